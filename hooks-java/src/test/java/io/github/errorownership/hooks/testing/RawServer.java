// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.testing;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.concurrent.CountDownLatch;

/** A server on 127.0.0.1 that answers every request with whatever a test writes, byte for byte. */
public final class RawServer implements AutoCloseable {
  /** Writes one answer; the connection is closed after it. */
  public interface Responder {
    void respond(OutputStream out, CountDownLatch stop) throws IOException, InterruptedException;
  }

  private final ServerSocket socket;
  private final CountDownLatch stop = new CountDownLatch(1);
  private final Thread acceptor;

  public RawServer(Responder responder) throws IOException {
    socket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    acceptor =
        new Thread(
            () -> {
              while (!socket.isClosed()) {
                try {
                  Socket s = socket.accept();
                  Thread t = new Thread(() -> serve(s, responder), "raw-conn");
                  t.setDaemon(true);
                  t.start();
                } catch (IOException e) {
                  return;
                }
              }
            },
            "raw-accept");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  private void serve(Socket s, Responder responder) {
    try (s) {
      InputStream in = s.getInputStream();
      int state = 0;
      while (state < 4) { // read to the end of the request head
        int b = in.read();
        if (b < 0) {
          return;
        }
        state =
            (b == '\r' && (state == 0 || state == 2)) || (b == '\n' && (state == 1 || state == 3))
                ? state + 1
                : (b == '\r' ? 1 : 0);
      }
      OutputStream out = new BufferedOutputStream(s.getOutputStream(), 1 << 16);
      responder.respond(out, stop);
      out.flush();
    } catch (IOException | InterruptedException e) {
      // the client went away
    }
  }

  public String url(String path) {
    return "http://127.0.0.1:" + socket.getLocalPort() + path;
  }

  @Override
  public void close() throws IOException {
    stop.countDown();
    socket.close();
  }
}
