// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.testing;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.Executors;

/** Serves one service's hints ("checkout") as a test sets them, on 127.0.0.1. */
public final class HintsServer implements AutoCloseable {
  /** A custom answer. */
  public interface Answer {
    void answer(HttpExchange ex) throws IOException;
  }

  private final HttpServer server;
  private int status = 200;
  private String body = "";
  private Map<String, String> headers = Map.of();
  private Answer answer;
  private String lastIfNoneMatch;
  private int requests;

  private HintsServer(HttpServer server) {
    this.server = server;
  }

  public static HintsServer start() throws IOException {
    HttpServer s = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    HintsServer h = new HintsServer(s);
    s.createContext("/", h::handle);
    s.setExecutor(
        Executors.newCachedThreadPool(
            r -> {
              Thread t = new Thread(r, "hints-server");
              t.setDaemon(true);
              return t;
            }));
    s.start();
    return h;
  }

  public String url() {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  public synchronized void serve(int status, String body, Map<String, String> headers) {
    this.status = status;
    this.body = body;
    this.headers = headers;
    this.answer = null;
  }

  public synchronized void serve(Answer answer) {
    this.answer = answer;
  }

  public synchronized String lastIfNoneMatch() {
    return lastIfNoneMatch;
  }

  public synchronized int requests() {
    return requests;
  }

  private void handle(HttpExchange ex) throws IOException {
    int st;
    String b;
    Map<String, String> h;
    Answer a;
    synchronized (this) {
      requests++;
      lastIfNoneMatch = ex.getRequestHeaders().getFirst("If-None-Match");
      st = status;
      b = body;
      h = headers;
      a = answer;
    }
    try {
      String q = ex.getRequestURI().getRawQuery();
      if (!ex.getRequestURI().getPath().equals("/v1/hints") || !"service=checkout".equals(q)) {
        ex.sendResponseHeaders(404, -1);
        return;
      }
      if (a != null) {
        a.answer(ex);
        return;
      }
      h.forEach((k, v) -> ex.getResponseHeaders().add(k, v));
      byte[] bytes = b.getBytes(StandardCharsets.UTF_8);
      if (st == 304 || st == 204 || bytes.length == 0) {
        ex.sendResponseHeaders(st, -1);
      } else {
        ex.sendResponseHeaders(st, bytes.length);
        try (OutputStream o = ex.getResponseBody()) {
          o.write(bytes);
        }
      }
    } catch (IOException e) {
      // the client went away
    } finally {
      ex.close();
    }
  }

  @Override
  public void close() {
    server.stop(0);
  }
}
