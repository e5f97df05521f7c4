// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.it;

import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Scope;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import okhttp3.OkHttpClient;
import okhttp3.Request;
import okhttp3.RequestBody;
import okhttp3.Response;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.ajax.JSON;

/**
 * The application the zero-code tests run under the agent: nothing of the hooks in its code or on
 * its class path. {@code client FILE INDEX...} calls scripted callees through java.net.http ({@code
 * async}: its sendAsync; {@code okhttp}: OkHttp 4), one root span per case; {@code server FILE
 * INDEX...} serves each server case from a Jetty 12 servlet whose handler calls its callees through
 * java.net.http (or, with {@code huc}, through HttpURLConnection). Each case prints one line {@code
 * RESULT <index> <json>}.
 */
public final class VectorApp {
  /**
   * {@code --await=K}: before the cases, serve case K on /probe/K until its Error-Claim is the one
   * the case wants: the agent's hint client polls once it starts, and the cases need its hints.
   */
  static final String AWAIT = Calls.AWAIT;

  private VectorApp() {}

  /**
   * Separates the runs of one invocation: {@code client FILE 0 1 --and grpc-client FILE 0:PORT}.
   */
  static final String AND = "--and";

  public static void main(String[] args) throws Exception {
    // Without it the JDK server's small responses wait out the peer's delayed ACK (~40 ms each).
    System.setProperty("sun.net.httpserver.nodelay", "true");
    int from = 0;
    for (int i = 0; i <= args.length; i++) {
      if (i == args.length || args[i].equals(AND)) {
        run(Arrays.copyOfRange(args, from, i));
        from = i + 1;
      }
    }
  }

  static void run(String[] args) throws Exception {
    if (args[0].equals("serve")) {
      serve(args[1]);
      return;
    }
    if (args[0].startsWith("grpc-")) {
      GrpcApp.run(args);
      return;
    }
    Calls.Picks p = Calls.Picks.parse(args);
    Object[] cases = p.cases();
    List<Integer> picks = p.picks();
    int await = p.await();
    switch (args[0]) {
      case "client", "okhttp", "async" -> {
        for (int i : picks) {
          client(args[0], i, (Map<?, ?>) cases[i]);
        }
      }
      case "server", "huc" -> server(args[0].equals("huc"), cases, picks, await);
      default -> throw new IllegalArgumentException(args[0]);
    }
  }

  static final OkHttpClient OKHTTP = new OkHttpClient();

  /** The call through OkHttp 4: {@code OKHTTP}, built by the application as usual. */
  static int callOkHttp(Map<?, ?> c, String url) throws IOException {
    String method = (String) c.get("method");
    String body = (String) c.get("body");
    Request.Builder b =
        new Request.Builder()
            .url(url)
            .method(
                method,
                body == null && !method.equals("POST") && !method.equals("PUT")
                    ? null
                    : RequestBody.create(body == null ? "" : body, null));
    Map<?, ?> headers = (Map<?, ?>) c.get("headers");
    if (headers != null) {
      headers.forEach((k, v) -> b.header((String) k, (String) v));
    }
    try (Response r = OKHTTP.newCall(b.build()).execute()) {
      if (r.body() != null) {
        r.body().bytes();
      }
      return r.code();
    }
  }

  /** sendAsync's results are numbered from here, apart from send's in the same JVM. */
  static final int ASYNC_RESULTS = 2000;

  static void client(String mode, int index, Map<?, ?> c) throws Exception {
    try (Calls.Callee callee = new Calls.Callee((Object[]) c.get("responses"))) {
      Span root = GlobalOpenTelemetry.getTracer("vectors").spanBuilder("case " + index).startSpan();
      int status;
      try (Scope ignored = root.makeCurrent()) {
        status =
            mode.equals("okhttp")
                ? callOkHttp(c, callee.url())
                : Calls.call(c, callee.url(), mode.equals("async"));
      } finally {
        root.end();
      }
      System.out.println(
          "RESULT "
              + (mode.equals("async") ? ASYNC_RESULTS + index : index)
              + " "
              + new JSON()
                  .toJSON(
                      Map.of(
                          "status", status,
                          "requests", callee.requests.toArray(),
                          "bodies", callee.bodies.toArray(),
                          "trace", root.getSpanContext().getTraceId())));
    }
  }

  static void server(boolean huc, Object[] cases, List<Integer> picks, int await) throws Exception {
    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    server.addConnector(connector);
    ServletContextHandler context = new ServletContextHandler();
    HttpServlet servlet =
        new HttpServlet() {
          @Override
          protected void service(HttpServletRequest req, HttpServletResponse res)
              throws IOException {
            int index = Integer.parseInt(req.getPathInfo().substring(1));
            Calls.handle(cases, index, huc, res::addHeader, res::setStatus);
          }
        };
    context.addServlet(new ServletHolder(servlet), "/case/*");
    context.addServlet(new ServletHolder(servlet), "/probe/*");
    server.setHandler(context);
    server.start();
    try {
      Calls.runCases("http://127.0.0.1:" + connector.getLocalPort(), cases, picks, await);
    } finally {
      server.stop();
    }
  }

  /**
   * The benchmark's service: a servlet on /work making one HttpClient call to {@code calleeUrl};
   * prints {@code PORT <port>} and serves until its standard input closes.
   */
  static void serve(String calleeUrl) throws Exception {
    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    server.addConnector(connector);
    ServletContextHandler context = new ServletContextHandler();
    context.addServlet(
        new ServletHolder(
            new HttpServlet() {
              @Override
              protected void service(HttpServletRequest req, HttpServletResponse res)
                  throws IOException {
                try {
                  Calls.call(Map.of("method", "GET"), calleeUrl);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
                res.setStatus(200);
              }
            }),
        "/work");
    server.setHandler(context);
    server.start();
    System.out.println("PORT " + connector.getLocalPort());
    System.out.flush();
    while (System.in.read() >= 0) {
      // until the runner closes the pipe
    }
    server.stop();
  }
}
