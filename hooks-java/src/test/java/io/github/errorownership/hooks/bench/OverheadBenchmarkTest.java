// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.errorownership.hooks.httpclient.ErrorOwnershipHttpClient;
import io.github.errorownership.hooks.servlet.ErrorOwnershipFilter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Proxy;
import java.net.Authenticator;
import java.net.CookieHandler;
import java.net.ProxySelector;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSession;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The hooks' per-request overhead: one inbound request through the servlet filter that makes one
 * outbound call through the HttpClient wrapper, against the bare path (the same handler and call
 * without the hooks). The network is left out: the callee is an in-memory HttpClient answering at
 * once, and the servlet request and response are in-memory stand-ins, so the figures are the hooks'
 * own cost. Run with {@code mvn -B -o -Pbench test}; the figures go to stdout and target/bench.txt.
 */
@Tag("bench")
class OverheadBenchmarkTest {
  private static final int WARMUP = 200_000;
  private static final int ROUNDS = 5;
  private static final int N = 200_000;

  /** An HttpClient that answers every request at once with status. */
  static final class InstantClient extends HttpClient {
    volatile int status = 200;
    final HttpHeaders headers;

    InstantClient(Map<String, List<String>> h) {
      headers = HttpHeaders.of(h, (a, b) -> true);
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T> HttpResponse<T> send(HttpRequest req, HttpResponse.BodyHandler<T> h) {
      int st = status;
      return (HttpResponse<T>)
          new HttpResponse<Void>() {
            @Override
            public int statusCode() {
              return st;
            }

            @Override
            public HttpRequest request() {
              return req;
            }

            @Override
            public Optional<HttpResponse<Void>> previousResponse() {
              return Optional.empty();
            }

            @Override
            public HttpHeaders headers() {
              return headers;
            }

            @Override
            public Void body() {
              return null;
            }

            @Override
            public Optional<SSLSession> sslSession() {
              return Optional.empty();
            }

            @Override
            public URI uri() {
              return req.uri();
            }

            @Override
            public Version version() {
              return Version.HTTP_1_1;
            }
          };
    }

    @Override
    public <T> CompletableFuture<HttpResponse<T>> sendAsync(
        HttpRequest r, HttpResponse.BodyHandler<T> h) {
      return CompletableFuture.completedFuture(send(r, h));
    }

    @Override
    public <T> CompletableFuture<HttpResponse<T>> sendAsync(
        HttpRequest r, HttpResponse.BodyHandler<T> h, HttpResponse.PushPromiseHandler<T> p) {
      return sendAsync(r, h);
    }

    @Override
    public Optional<CookieHandler> cookieHandler() {
      return Optional.empty();
    }

    @Override
    public Optional<Duration> connectTimeout() {
      return Optional.empty();
    }

    @Override
    public Redirect followRedirects() {
      return Redirect.NEVER;
    }

    @Override
    public Optional<ProxySelector> proxy() {
      return Optional.empty();
    }

    @Override
    public SSLContext sslContext() {
      return null;
    }

    @Override
    public SSLParameters sslParameters() {
      return null;
    }

    @Override
    public Optional<Authenticator> authenticator() {
      return Optional.empty();
    }

    @Override
    public Version version() {
      return Version.HTTP_1_1;
    }

    @Override
    public Optional<Executor> executor() {
      return Optional.empty();
    }
  }

  /** A servlet request: test stand-in made with a dynamic proxy (test code only). */
  static HttpServletRequest request() {
    return (HttpServletRequest)
        Proxy.newProxyInstance(
            OverheadBenchmarkTest.class.getClassLoader(),
            new Class<?>[] {HttpServletRequest.class},
            (p, m, a) -> {
              return switch (m.getName()) {
                case "getMethod" -> "GET";
                case "getRequestURI" -> "/checkout";
                case "isAsyncStarted" -> false;
                case "hashCode" -> 1;
                default -> null;
              };
            });
  }

  /** A servlet response keeping its status and headers. */
  static final class Resp {
    int status = 200;
    final Map<String, List<String>> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);

    HttpServletResponse proxy() {
      return (HttpServletResponse)
          Proxy.newProxyInstance(
              OverheadBenchmarkTest.class.getClassLoader(),
              new Class<?>[] {HttpServletResponse.class},
              (p, m, a) -> {
                switch (m.getName()) {
                  case "setStatus" -> {
                    status = (Integer) a[0];
                    return null;
                  }
                  case "getStatus" -> {
                    return status;
                  }
                  case "isCommitted" -> {
                    return false;
                  }
                  case "setHeader" -> {
                    headers.put((String) a[0], new ArrayList<>(List.of((String) a[1])));
                    return null;
                  }
                  case "getHeaders" -> {
                    List<String> v = headers.get((String) a[0]);
                    return v == null ? List.of() : (Collection<String>) v;
                  }
                  case "getWriter" -> {
                    return new PrintWriter(java.io.Writer.nullWriter());
                  }
                  case "hashCode" -> {
                    return 1;
                  }
                  default -> {
                    return null;
                  }
                }
              });
    }
  }

  interface Op {
    void run() throws Exception;
  }

  static String measure(String name, Op op) throws Exception {
    for (int i = 0; i < WARMUP; i++) {
      op.run();
    }
    com.sun.management.ThreadMXBean mx =
        (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    long tid = Thread.currentThread().getId();
    double best = Double.MAX_VALUE;
    double bytes = 0;
    for (int r = 0; r < ROUNDS; r++) {
      long a0 = mx.getThreadAllocatedBytes(tid);
      long t0 = System.nanoTime();
      for (int i = 0; i < N; i++) {
        op.run();
      }
      long t1 = System.nanoTime();
      long a1 = mx.getThreadAllocatedBytes(tid);
      best = Math.min(best, (t1 - t0) / (double) N);
      bytes = (a1 - a0) / (double) N;
    }
    return String.format("%-44s %8.0f ns/op %8.0f B/op", name, best, bytes);
  }

  @Test
  void overhead() throws Exception {
    InstantClient ok = new InstantClient(Map.of());
    InstantClient failing = new InstantClient(Map.of("Error-Claim", List.of("unclaimed")));
    failing.status = 503;
    HttpClient hookedOk = ErrorOwnershipHttpClient.wrap(ok);
    HttpClient hookedFailing = ErrorOwnershipHttpClient.wrap(failing);
    ErrorOwnershipFilter filter = ErrorOwnershipFilter.create();
    HttpRequest outbound =
        HttpRequest.newBuilder(URI.create("http://10.0.0.7:8080/items/1")).build();
    HttpServletRequest req = request();

    Op bare =
        () -> {
          Resp r = new Resp();
          HttpServletResponse res = r.proxy();
          int st = ok.send(outbound, HttpResponse.BodyHandlers.discarding()).statusCode();
          res.setStatus(st);
        };
    Op hooked =
        () -> {
          Resp r = new Resp();
          filter.doFilter(
              req,
              r.proxy(),
              (FilterChain)
                  (q, s) -> {
                    try {
                      int st =
                          hookedOk
                              .send(outbound, HttpResponse.BodyHandlers.discarding())
                              .statusCode();
                      ((HttpServletResponse) s).setStatus(st);
                    } catch (InterruptedException e) {
                      throw new IOException(e);
                    }
                  });
        };
    Op bareFail =
        () -> {
          Resp r = new Resp();
          HttpServletResponse res = r.proxy();
          failing.send(outbound, HttpResponse.BodyHandlers.discarding());
          res.setStatus(502);
        };
    Op hookedFail =
        () -> {
          Resp r = new Resp();
          filter.doFilter(
              req,
              r.proxy(),
              (FilterChain)
                  (ServletRequest q, ServletResponse s) -> {
                    try {
                      hookedFailing.send(outbound, HttpResponse.BodyHandlers.discarding());
                      ((HttpServletResponse) s).setStatus(502);
                    } catch (InterruptedException e) {
                      throw new IOException(e);
                    }
                  });
          if (!"unclaimed".equals(r.headers.get("Error-Claim").get(0))) {
            throw new AssertionError("the failure path did not claim");
          }
        };
    List<String> lines = new ArrayList<>();
    lines.add(
        "errorownership-hooks overhead, one inbound request making one outbound call"
            + " (best of "
            + ROUNDS
            + " x "
            + N
            + ", Java "
            + System.getProperty("java.version")
            + ")");
    lines.add(measure("bare: 200", bare));
    lines.add(measure("filter + HttpClient hooks: 200", hooked));
    lines.add(measure("bare: callee 503 unclaimed, answer 502", bareFail));
    lines.add(measure("filter + HttpClient hooks: 503 unclaimed -> 502", hookedFail));
    String out = String.join("\n", lines) + "\n";
    System.out.print(out);
    Files.createDirectories(Path.of("target"));
    Files.writeString(Path.of("target", "bench.txt"), out, StandardCharsets.UTF_8);
    assertEquals(5, lines.size());
  }
}
