// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor;
import io.github.errorownership.hooks.grpc.ErrorOwnershipServerInterceptor;
import io.github.errorownership.hooks.httpclient.ErrorOwnershipHttpClient;
import io.github.errorownership.hooks.okhttp.ErrorOwnershipInterceptor;
import io.github.errorownership.hooks.servlet.ErrorOwnershipFilter;
import io.grpc.CallOptions;
import io.grpc.Contexts;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import okhttp3.OkHttp;
import okhttp3.OkHttpClient;
import okhttp3.Request;
import okhttp3.RequestBody;
import okhttp3.Response;
import org.apache.catalina.Context;
import org.apache.catalina.startup.Tomcat;
import org.apache.catalina.util.ServerInfo;
import org.apache.tomcat.util.descriptor.web.FilterDef;
import org.apache.tomcat.util.descriptor.web.FilterMap;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The hooks as an application gets them, from their published jar: a Tomcat server with the servlet
 * filter and a gRPC server with the server interceptor, both on 127.0.0.1 at ports the system
 * picked, called through each client hook. A callee that fails on its own is claimed and retried;
 * one that passes on a failure of its own callee is unclaimed and not retried.
 */
class ArtifactTest {
  private static final Duration BACKOFF = Duration.ofMillis(1);

  /** The attempts each callee saw, by key: the retry header of each ("-" on the first). */
  private static final Map<String, List<String>> ATTEMPTS = new ConcurrentHashMap<>();

  private static Tomcat tomcat;
  private static String base;
  private static Server grpcServer;
  private static ManagedChannel channel;
  private static HttpClient relayClient;

  @BeforeAll
  static void start() throws Exception {
    relayClient =
        ErrorOwnershipHttpClient.builder(HttpClient.newHttpClient())
            .setBackoff(BACKOFF, BACKOFF)
            .build();

    tomcat = new Tomcat();
    tomcat.setBaseDir(Files.createTempDirectory("tomcat").toString());
    tomcat.setPort(0);
    tomcat.getConnector().setProperty("address", "127.0.0.1");
    Context ctx = tomcat.addContext("", null);
    Tomcat.addServlet(ctx, "callee", new Callee());
    ctx.addServletMappingDecoded("/*", "callee");
    FilterDef filter = new FilterDef();
    filter.setFilterName("errorownership");
    filter.setFilter(ErrorOwnershipFilter.create());
    ctx.addFilterDef(filter);
    FilterMap mapping = new FilterMap();
    mapping.setFilterName("errorownership");
    mapping.addURLPattern("/*");
    ctx.addFilterMap(mapping);
    tomcat.start();
    base = "http://127.0.0.1:" + tomcat.getConnector().getLocalPort();

    ServerServiceDefinition service =
        ServerServiceDefinition.builder("it.Echo")
            .addMethod(
                SAY,
                ServerCalls.asyncUnaryCall(
                    (req, out) -> {
                      Status fault = grpcCallee(req);
                      if (fault != null) {
                        out.onError(fault.asRuntimeException());
                        return;
                      }
                      out.onNext(req);
                      out.onCompleted();
                    }))
            .build();
    grpcServer =
        NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
            .addService(
                ServerInterceptors.intercept(
                    service, ErrorOwnershipServerInterceptor.create(), CAPTURE_PREVIOUS))
            .build()
            .start();
    channel =
        NettyChannelBuilder.forAddress(
                new InetSocketAddress(InetAddress.getLoopbackAddress(), grpcServer.getPort()))
            .usePlaintext()
            .intercept(
                ErrorOwnershipClientInterceptor.builder().setBackoff(BACKOFF, BACKOFF).build())
            .build();
  }

  @AfterAll
  static void stop() throws Exception {
    if (channel != null) {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    if (grpcServer != null) {
      grpcServer.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    if (tomcat != null) {
      tomcat.stop();
      tomcat.destroy();
    }
  }

  /**
   * /ok/KEY answers 200. /flaky/KEY?fail=N answers 503 to its first N attempts, a fault of its own
   * that the filter claims. /relay/KEY calls /flaky/KEY-down?fail=99 through the hooked HttpClient
   * (which retries that claimed fault to its limit) and answers 502, which the filter unclaims: a
   * callee failed.
   */
  static final class Callee extends HttpServlet {
    @Override
    protected void service(HttpServletRequest req, HttpServletResponse resp) throws IOException {
      String[] path = req.getRequestURI().split("/", 3);
      String kind = path[1];
      String key = path[2];
      int attempt = record(key, req.getHeader("Retry-Attempt"));
      switch (kind) {
        case "ok" -> resp.setStatus(200);
        case "flaky" ->
            resp.setStatus(attempt < Integer.parseInt(req.getParameter("fail")) ? 503 : 200);
        case "relay" -> {
          HttpResponse<Void> down = send(relayClient, "GET", "/flaky/" + key + "-down?fail=99");
          resp.setStatus(down.statusCode() >= 500 ? 502 : 200);
        }
        default -> resp.setStatus(404);
      }
    }
  }

  /**
   * Like the servlet, over gRPC: the request "ok:KEY" succeeds, "flaky:KEY:N" fails UNAVAILABLE on
   * its first N attempts (claimed by the server interceptor), "relay:KEY" calls
   * /flaky/grpc/KEY-down?fail=99 over HTTP through the hooked HttpClient and fails UNAVAILABLE
   * (unclaimed).
   */
  private static Status grpcCallee(String req) {
    String[] f = req.split(":");
    String key = "grpc/" + f[1];
    int attempt = record(key, PREVIOUS_SEEN.get());
    return switch (f[0]) {
      case "ok" -> null;
      case "flaky" -> attempt < Integer.parseInt(f[2]) ? Status.UNAVAILABLE : null;
      case "relay" -> {
        HttpResponse<Void> down = send(relayClient, "GET", "/flaky/" + key + "-down?fail=99");
        yield down.statusCode() >= 500 ? Status.UNAVAILABLE : null;
      }
      default -> Status.UNIMPLEMENTED;
    };
  }

  /** Puts the request's grpc-previous-rpc-attempts where the handler reads it. */
  private static final ServerInterceptor CAPTURE_PREVIOUS =
      new ServerInterceptor() {
        @Override
        public <Q, R> ServerCall.Listener<Q> interceptCall(
            ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
          io.grpc.Context ctx =
              io.grpc.Context.current().withValue(PREVIOUS_SEEN, headers.get(PREVIOUS));
          return Contexts.interceptCall(ctx, call, headers, next);
        }
      };

  private static int record(String key, String retryAttempt) {
    List<String> seen = ATTEMPTS.computeIfAbsent(key, k -> new ArrayList<>());
    synchronized (seen) {
      seen.add(retryAttempt == null ? "-" : retryAttempt);
      return seen.size() - 1;
    }
  }

  private static List<String> attempts(String key) {
    List<String> seen = ATTEMPTS.getOrDefault(key, List.of());
    synchronized (seen) {
      return List.copyOf(seen);
    }
  }

  private static HttpResponse<Void> send(HttpClient client, String method, String path) {
    HttpRequest r =
        HttpRequest.newBuilder(URI.create(base + path))
            .method(method, HttpRequest.BodyPublishers.noBody())
            .build();
    try {
      return client.send(r, HttpResponse.BodyHandlers.discarding());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** What a caller saw: the final status and the Error-Claim header on it. */
  record Seen(int status, String claim) {}

  interface Caller {
    Seen call(String method, String path) throws IOException;
  }

  private static Caller javaNetHttp() {
    HttpClient c =
        ErrorOwnershipHttpClient.builder(HttpClient.newHttpClient())
            .setBackoff(BACKOFF, BACKOFF)
            .build();
    return (method, path) -> {
      HttpResponse<Void> r = send(c, method, path);
      return new Seen(r.statusCode(), r.headers().firstValue("Error-Claim").orElse(null));
    };
  }

  private static Caller okHttp() {
    OkHttpClient c =
        new OkHttpClient.Builder()
            .addInterceptor(
                ErrorOwnershipInterceptor.builder().setBackoff(BACKOFF, BACKOFF).build())
            .build();
    return (method, path) -> {
      RequestBody body = method.equals("GET") ? null : RequestBody.create(new byte[0], null);
      Request r = new Request.Builder().url(base + path).method(method, body).build();
      try (Response res = c.newCall(r).execute()) {
        return new Seen(res.code(), res.header("Error-Claim"));
      }
    };
  }

  static Stream<Arguments> httpCases() {
    List<Arguments> cases = new ArrayList<>();
    for (String client : List.of("java.net.http", "okhttp")) {
      String k = client + "/";
      // name, client, method, path, key the callee counts under, final status, final claim,
      // the retry header of each attempt the callee saw
      cases.add(
          Arguments.of(
              "succeeds", client, "GET", "/ok/" + k + "ok", k + "ok", 200, null, List.of("-")));
      cases.add(
          Arguments.of(
              "own fault once: claimed, retried",
              client,
              "GET",
              "/flaky/" + k + "once?fail=1",
              k + "once",
              200,
              null,
              List.of("-", "1")));
      cases.add(
          Arguments.of(
              "own fault every time: claimed, retried to the attempt limit",
              client,
              "GET",
              "/flaky/" + k + "always?fail=99",
              k + "always",
              503,
              "claimed",
              List.of("-", "1", "2")));
      cases.add(
          Arguments.of(
              "a callee's fault passed on: unclaimed, not retried",
              client,
              "GET",
              "/relay/" + k + "relay",
              k + "relay",
              502,
              "unclaimed",
              List.of("-")));
      cases.add(
          Arguments.of(
              "POST without an idempotency key: no retry policy",
              client,
              "POST",
              "/flaky/" + k + "post?fail=99",
              k + "post",
              503,
              "claimed",
              List.of("-")));
    }
    return cases.stream();
  }

  @ParameterizedTest(name = "{1}: {0}")
  @MethodSource("httpCases")
  void httpClients(
      String name,
      String client,
      String method,
      String path,
      String key,
      int wantStatus,
      String wantClaim,
      List<String> wantAttempts)
      throws IOException {
    Caller caller = client.equals("okhttp") ? okHttp() : javaNetHttp();
    Seen got = caller.call(method, path);
    assertEquals(new Seen(wantStatus, wantClaim), got);
    assertEquals(wantAttempts, attempts(key));
  }

  static Stream<Arguments> libraries() {
    return Stream.of(
        Arguments.of("tomcat", ServerInfo.getServerNumber()),
        Arguments.of("okhttp", OkHttp.VERSION),
        Arguments.of("grpc", ServerCall.class.getPackage().getImplementationVersion()));
  }

  /** The profile's versions are the ones the application runs with, not what Maven mediated. */
  @ParameterizedTest(name = "runs with the profile's {0}")
  @MethodSource("libraries")
  void versions(String library, String running) {
    String want = System.getProperty("it." + library + ".version");
    // Tomcat numbers its builds one level deeper: 10.1.62.0.
    assertTrue(
        running != null && (running.equals(want) || running.startsWith(want + ".")),
        running + " is not " + want);
  }

  static Stream<Arguments> grpcCases() {
    // name, request, key the callee counts under, final code, final error-claim trailer, the
    // grpc-previous-rpc-attempts of each attempt the callee saw
    return Stream.of(
        Arguments.of("succeeds", "ok:ok", "grpc/ok", Status.Code.OK, null, List.of("-")),
        Arguments.of(
            "own UNAVAILABLE once: claimed, retried",
            "flaky:once:1",
            "grpc/once",
            Status.Code.OK,
            null,
            List.of("-", "1")),
        Arguments.of(
            "own UNAVAILABLE every time: claimed, retried to the attempt limit",
            "flaky:always:99",
            "grpc/always",
            Status.Code.UNAVAILABLE,
            "claimed",
            List.of("-", "1", "2")),
        Arguments.of(
            "a callee's fault passed on: unclaimed, not retried",
            "relay:relay",
            "grpc/relay",
            Status.Code.UNAVAILABLE,
            "unclaimed",
            List.of("-")));
  }

  @ParameterizedTest(name = "grpc: {0}")
  @MethodSource("grpcCases")
  void grpc(
      String name,
      String request,
      String key,
      Status.Code wantCode,
      String wantClaim,
      List<String> wantAttempts) {
    CallOptions options = CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS);
    if (wantCode == Status.Code.OK) {
      assertEquals(request, ClientCalls.blockingUnaryCall(channel, SAY, options, request));
    } else {
      StatusRuntimeException e =
          assertThrows(
              StatusRuntimeException.class,
              () -> ClientCalls.blockingUnaryCall(channel, SAY, options, request));
      Metadata trailers = Status.trailersFromThrowable(e);
      assertEquals(wantCode, e.getStatus().getCode());
      assertEquals(wantClaim, trailers == null ? null : trailers.get(CLAIM));
    }
    assertEquals(wantAttempts, attempts(key));
  }

  private static final Metadata.Key<String> CLAIM =
      Metadata.Key.of("error-claim", Metadata.ASCII_STRING_MARSHALLER);
  private static final Metadata.Key<String> PREVIOUS =
      Metadata.Key.of("grpc-previous-rpc-attempts", Metadata.ASCII_STRING_MARSHALLER);
  private static final io.grpc.Context.Key<String> PREVIOUS_SEEN =
      io.grpc.Context.key("previous-attempts");

  private static final MethodDescriptor.Marshaller<String> STRING =
      new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(String value) {
          return new ByteArrayInputStream(value.getBytes(StandardCharsets.UTF_8));
        }

        @Override
        public String parse(InputStream stream) {
          try {
            return new String(stream.readAllBytes(), StandardCharsets.UTF_8);
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }
      };

  private static final MethodDescriptor<String, String> SAY =
      MethodDescriptor.<String, String>newBuilder(STRING, STRING)
          .setType(MethodDescriptor.MethodType.UNARY)
          .setFullMethodName("it.Echo/Say")
          .build();
}
