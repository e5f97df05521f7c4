// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.it;

import com.sun.net.httpserver.HttpServer;
import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Scope;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
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
  static final String AWAIT = "--await=";

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
    Object[] cases =
        (Object[])
            ((Map<?, ?>) new JSON().fromJSON(Files.readString(Path.of(args[1])))).get("cases");
    List<Integer> picks = new ArrayList<>();
    int await = -1;
    for (int i = 2; i < args.length; i++) {
      if (args[i].startsWith(AWAIT)) {
        await = Integer.parseInt(args[i].substring(AWAIT.length()));
      } else {
        picks.add(Integer.parseInt(args[i]));
      }
    }
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

  /** A callee answering each attempt with the next scripted response. */
  static final class Callee implements AutoCloseable {
    final HttpServer server;
    final List<Object> requests = Collections.synchronizedList(new ArrayList<>());
    final List<Object> bodies = Collections.synchronizedList(new ArrayList<>());

    Callee(Object[] responses) throws IOException {
      server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
      server.createContext(
          "/",
          ex -> {
            int n = requests.size();
            requests.add(ex.getRequestHeaders().getFirst("Retry-Attempt"));
            bodies.add(new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8));
            Map<?, ?> r = (Map<?, ?>) responses[Math.min(n, responses.length - 1)];
            if (r.get("claim") != null) {
              ex.getResponseHeaders().add("Error-Claim", (String) r.get("claim"));
            }
            int status = ((Number) r.get("status")).intValue();
            ex.sendResponseHeaders(status, status == 204 ? -1 : 2);
            if (status != 204) {
              try (OutputStream o = ex.getResponseBody()) {
                o.write("ok".getBytes(StandardCharsets.UTF_8));
              }
            }
            ex.close();
          });
      server.start();
    }

    String url() {
      return url("/call");
    }

    /** The callee's URL with {@code path}: the peer operation the hints name. */
    String url(String path) {
      return "http://127.0.0.1:" + server.getAddress().getPort() + path;
    }

    @Override
    public void close() {
      server.stop(0);
    }
  }

  static final HttpClient HTTP = HttpClient.newHttpClient();

  static int call(Map<?, ?> c, String url) throws IOException, InterruptedException {
    return call(c, url, false);
  }

  /** The call through java.net.http, {@code send} or ({@code async}) {@code sendAsync}. */
  static int call(Map<?, ?> c, String url, boolean async) throws IOException, InterruptedException {
    String method = (String) c.get("method");
    String body = (String) c.get("body");
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(url))
            .method(
                method,
                body == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofString(body));
    Map<?, ?> headers = (Map<?, ?>) c.get("headers");
    if (headers != null) {
      headers.forEach((k, v) -> b.header((String) k, (String) v));
    }
    if (!async) {
      return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString()).statusCode();
    }
    try {
      return HTTP.sendAsync(b.build(), HttpResponse.BodyHandlers.ofString()).get().statusCode();
    } catch (java.util.concurrent.ExecutionException e) {
      throw new IOException(e.getCause());
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

  static int callHuc(String url) throws IOException {
    HttpURLConnection c = (HttpURLConnection) new URL(url).openConnection();
    int status = c.getResponseCode();
    try (InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream()) {
      if (in != null) {
        in.readAllBytes();
      }
    }
    return status;
  }

  /** sendAsync's results are numbered from here, apart from send's in the same JVM. */
  static final int ASYNC_RESULTS = 2000;

  static void client(String mode, int index, Map<?, ?> c) throws Exception {
    try (Callee callee = new Callee((Object[]) c.get("responses"))) {
      Span root = GlobalOpenTelemetry.getTracer("vectors").spanBuilder("case " + index).startSpan();
      int status;
      try (Scope ignored = root.makeCurrent()) {
        status =
            mode.equals("okhttp")
                ? callOkHttp(c, callee.url())
                : call(c, callee.url(), mode.equals("async"));
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
            Map<?, ?> c = (Map<?, ?>) cases[index];
            Object[] calls = (Object[]) c.get("calls");
            for (int j = 0; calls != null && j < calls.length; j++) {
              Map<?, ?> call = (Map<?, ?>) calls[j];
              try (Callee callee = new Callee((Object[]) call.get("responses"))) {
                String url = callee.url(calleePath(index, j));
                if (huc) {
                  callHuc(url);
                } else {
                  call(call, url);
                }
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
            }
            Object[] set = (Object[]) c.get("set_claim");
            for (Object v : set == null ? new Object[0] : set) {
              res.addHeader("Error-Claim", (String) v);
            }
            res.setStatus(((Number) c.get("status")).intValue());
          }
        };
    context.addServlet(new ServletHolder(servlet), "/case/*");
    context.addServlet(new ServletHolder(servlet), "/probe/*");
    server.setHandler(context);
    server.start();
    String base = "http://127.0.0.1:" + connector.getLocalPort();
    try {
      if (await >= 0) {
        Object want = ((Map<?, ?>) ((Map<?, ?>) cases[await]).get("want")).get("header");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!List.of(want).equals(front(base + "/probe/" + await).get("header"))) {
          if (System.nanoTime() > deadline) {
            throw new IllegalStateException("the hints did not arrive in 30 s");
          }
          Thread.sleep(50);
        }
      }
      for (int i : picks) {
        Map<String, Object> out = front(base + "/case/" + i);
        System.out.println("RESULT " + i + " " + new JSON().toJSON(out));
      }
    } finally {
      server.stop();
    }
  }

  /** The path of case {@code index}'s call {@code j}: its peer operation is GET /c{index}/{j}. */
  public static String calleePath(int index, int j) {
    return "/c" + index + "/" + j;
  }

  /**
   * One request to the server through HttpURLConnection, which the hooks record but never retry:
   * its status and Error-Claim values.
   */
  static Map<String, Object> front(String url) throws IOException {
    HttpURLConnection front = (HttpURLConnection) new URL(url).openConnection();
    int status = front.getResponseCode();
    List<String> header = new ArrayList<>();
    front
        .getHeaderFields()
        .forEach(
            (k, v) -> {
              if (k != null && k.equalsIgnoreCase("Error-Claim")) {
                header.addAll(v);
              }
            });
    front.disconnect();
    Map<String, Object> out = new java.util.HashMap<>();
    out.put("status", status);
    out.put("header", header);
    return out;
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
                  call(Map.of("method", "GET"), calleeUrl);
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
