// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.testing;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.github.errorownership.hooks.Vectors;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;

/**
 * A callee on 127.0.0.1 that answers each attempt with the next of responses (status, and the
 * Error-Claim header when claim is given), recording each request's Retry-Attempt and body.
 */
public final class ScriptedCallee implements AutoCloseable {
  private final HttpServer server;
  private final List<Object> responses;
  private final List<String> retryAttempts = new ArrayList<>();
  private final List<String> bodies = new ArrayList<>();

  public ScriptedCallee(List<Object> responses) throws IOException {
    this.responses = responses;
    server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    server.createContext("/", this::handle);
    server.setExecutor(
        Executors.newFixedThreadPool(
            2,
            r -> {
              Thread t = new Thread(r, "callee");
              t.setDaemon(true);
              return t;
            }));
    server.start();
  }

  public String url(String path) {
    return "http://127.0.0.1:" + server.getAddress().getPort() + path;
  }

  public String address() {
    return "127.0.0.1:" + server.getAddress().getPort();
  }

  public synchronized List<String> retryAttempts() {
    return new ArrayList<>(retryAttempts);
  }

  public synchronized List<String> bodies() {
    return new ArrayList<>(bodies);
  }

  private void handle(HttpExchange ex) throws IOException {
    Object r;
    try {
      String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
      synchronized (this) {
        int n = retryAttempts.size();
        retryAttempts.add(ex.getRequestHeaders().getFirst("Retry-Attempt"));
        bodies.add(body);
        r = responses.get(Math.min(n, responses.size() - 1));
      }
      int status = (int) Vectors.lng(r, "status", 200);
      String claim = Vectors.str(r, "claim");
      if (claim != null) {
        ex.getResponseHeaders().add("Error-Claim", claim);
      }
      if (status == 204 || status == 304) {
        ex.sendResponseHeaders(status, -1);
      } else {
        byte[] b = "answer".getBytes(StandardCharsets.UTF_8);
        ex.sendResponseHeaders(status, b.length);
        try (OutputStream o = ex.getResponseBody()) {
          o.write(b);
        }
      }
    } finally {
      ex.close();
    }
  }

  @Override
  public void close() {
    server.stop(0);
  }
}
