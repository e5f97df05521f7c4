// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.it;

import com.sun.net.httpserver.HttpServer;
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
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import java.util.function.IntConsumer;
import org.eclipse.jetty.util.ajax.JSON;

/**
 * What the test applications share, whatever servlet container they run (JDK types and Jetty's JSON
 * only, which Jetty 9.4 and 12 spell alike): the scripted callees, the calls through java.net.http,
 * and server.json's cases.
 */
final class Calls {
  /**
   * {@code --await=K}: before the cases, serve case K on /probe/K until its Error-Claim is the one
   * the case wants: the agent's hint client polls once it starts, and the cases need its hints.
   */
  static final String AWAIT = "--await=";

  private Calls() {}

  /** JSON.fromJSON, which takes a String in Jetty 9.4 and a CharSequence in Jetty 12. */
  static Object fromJson(String json) {
    try {
      for (java.lang.reflect.Method m : JSON.class.getMethods()) {
        if (m.getName().equals("fromJSON")
            && m.getParameterCount() == 1
            && m.getParameterTypes()[0].isAssignableFrom(String.class)) {
          return m.invoke(new JSON(), json);
        }
      }
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException(e);
    }
    throw new IllegalStateException("no JSON.fromJSON");
  }

  /** {@code MODE FILE [--await=K] INDEX...}: the file's cases, those picked, the case awaited. */
  // The cases as Jetty's JSON reads them: an array, compared by no one.
  @SuppressWarnings("ArrayRecordComponent")
  record Picks(Object[] cases, List<Integer> picks, int await) {
    static Picks parse(String[] args) throws IOException {
      Object[] cases =
          (Object[]) ((Map<?, ?>) fromJson(Files.readString(Path.of(args[1])))).get("cases");
      List<Integer> picks = new ArrayList<>();
      int await = -1;
      for (int i = 2; i < args.length; i++) {
        if (args[i].startsWith(AWAIT)) {
          await = Integer.parseInt(args[i].substring(AWAIT.length()));
        } else {
          picks.add(Integer.parseInt(args[i]));
        }
      }
      return new Picks(cases, picks, await);
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

  /**
   * Serves server.json's case {@code index}: its calls (through java.net.http, or with {@code huc}
   * HttpURLConnection), the Error-Claim values the handler sets itself, its status.
   */
  static void handle(
      Object[] cases,
      int index,
      boolean huc,
      BiConsumer<String, String> addHeader,
      IntConsumer setStatus)
      throws IOException {
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
      addHeader.accept("Error-Claim", (String) v);
    }
    setStatus.accept(((Number) c.get("status")).intValue());
  }

  /**
   * Requests the picked cases of the server at {@code base} (/case/INDEX), after case {@code await}
   * (if not -1) answered on /probe/ as it wants: one line {@code RESULT <index> <json>} each.
   */
  static void runCases(String base, Object[] cases, List<Integer> picks, int await)
      throws Exception {
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
}
