// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.errorownership.hooks.BudgetLimits;
import io.github.errorownership.hooks.HintSource;
import io.github.errorownership.hooks.Mode;
import io.github.errorownership.hooks.RetryBudget;
import io.github.errorownership.hooks.Vectors;
import io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor;
import io.github.errorownership.hooks.grpc.ErrorOwnershipServerInterceptor;
import io.github.errorownership.hooks.testing.GrpcServerSpan;
import io.github.errorownership.hooks.testing.GrpcTesting;
import io.github.errorownership.hooks.testing.SetOnce;
import io.github.errorownership.hooks.testing.SpanCheck;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.sdk.testing.junit5.OpenTelemetryExtension;
import io.opentelemetry.sdk.trace.data.SpanData;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** grpc.json, over real gRPC servers on 127.0.0.1 (Netty). */
class GrpcConformanceTest {
  @RegisterExtension static final OpenTelemetryExtension otel = OpenTelemetryExtension.create();

  static Stream<Arguments> client() {
    return Vectors.cases("grpc.json", "client", "cases");
  }

  static Stream<Arguments> server() {
    return Vectors.cases("grpc.json", "server", "cases");
  }

  /** What one call got: its code, and its trailers. */
  static final class Result {
    Status.Code code = Status.Code.OK;
    Metadata trailers = new Metadata();
  }

  static Result call(ManagedChannel ch) {
    Result r = new Result();
    try {
      ClientCalls.blockingUnaryCall(
          ch,
          GrpcTesting.SAY,
          CallOptions.DEFAULT.withDeadlineAfter(10, java.util.concurrent.TimeUnit.SECONDS),
          "hi");
    } catch (StatusRuntimeException e) {
      r.code = e.getStatus().getCode();
      r.trailers = e.getTrailers() == null ? new Metadata() : e.getTrailers();
    }
    return r;
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource
  void client(String name, Map<String, Object> c) throws Exception {
    GrpcTesting.Scripted callee = new GrpcTesting.Scripted(Vectors.list(c, "responses"));
    Server server = GrpcTesting.serve(callee);
    ErrorOwnershipClientInterceptor.Builder b =
        ErrorOwnershipClientInterceptor.builder()
            .setOpenTelemetry(SetOnce.wrap(otel.getOpenTelemetry()))
            .setMaxAttempts((int) Vectors.lng(c, "max_attempts", 3))
            .setBackoff(Duration.ofNanos(1), Duration.ofNanos(1));
    if (c.containsKey("budget")) {
      b.setBudget(RetryBudget.create(Vectors.limits(Vectors.map(c, "budget"))));
    }
    ManagedChannel ch = GrpcTesting.channel(server, b.build());
    try {
      Result r = call(ch);
      Map<String, Object> want = Vectors.map(c, "want");
      assertEquals(Vectors.str(want, "code"), r.code.name(), "code");
      List<String> wantRequests = new ArrayList<>();
      for (Object o : Vectors.list(want, "requests")) {
        wantRequests.add((String) o);
      }
      assertEquals(wantRequests, callee.previous(), "grpc-previous-rpc-attempts per attempt");
      List<SpanData> spans = SpanCheck.ofKind(otel.getSpans(), SpanKind.CLIENT);
      List<Object> wantSpans = Vectors.list(want, "spans");
      assertEquals(wantSpans.size(), spans.size(), "client spans");
      for (int i = 0; i < spans.size(); i++) {
        @SuppressWarnings("unchecked")
        Map<String, Object> w = (Map<String, Object>) wantSpans.get(i);
        SpanCheck.check("attempt " + i, spans.get(i), w, SpanCheck.CLIENT_KEYS);
      }
    } finally {
      GrpcTesting.shutdown(server, ch);
    }
  }

  static final class AddressHints implements HintSource {
    final Map<String, Mode> modes = new ConcurrentHashMap<>();

    @Override
    public Mode mode(String operation, String peer, String peerOperation) {
      return modes.getOrDefault(peer, Mode.UNKNOWN);
    }

    @Override
    public BudgetLimits budgetLimits() {
      return BudgetLimits.defaults();
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource
  void server(String name, Map<String, Object> c) throws Exception {
    AddressHints hints = new AddressHints();
    List<Server> callees = new ArrayList<>();
    List<ManagedChannel> channels = new ArrayList<>();
    ErrorOwnershipClientInterceptor outbound =
        ErrorOwnershipClientInterceptor.builder()
            .setBackoff(Duration.ofNanos(1), Duration.ofNanos(1))
            .setHints(hints)
            .build();
    Server front = null;
    ManagedChannel caller = null;
    try {
      for (Object call : Vectors.list(c, "calls")) {
        Server s = GrpcTesting.serve(new GrpcTesting.Scripted(Vectors.list(call, "responses")));
        callees.add(s);
        channels.add(GrpcTesting.channel(s, outbound));
        String mode = Vectors.str(call, "mode");
        if (mode != null) {
          hints.modes.put("127.0.0.1:" + s.getPort(), Mode.parse(mode));
        }
      }
      Status.Code code = Status.Code.valueOf(Vectors.str(c, "code"));
      String setClaim = Vectors.str(c, "set_claim");
      front =
          GrpcTesting.serve(
              (req, headers, out) -> {
                for (ManagedChannel ch : channels) {
                  call(ch);
                }
                if (code == Status.Code.OK) {
                  out.onNext("ok");
                  out.onCompleted();
                  return;
                }
                Metadata trailers = new Metadata();
                if (setClaim != null) {
                  trailers.put(GrpcTesting.CLAIM, setClaim);
                }
                out.onError(Status.fromCode(code).asRuntimeException(trailers));
              },
              ErrorOwnershipServerInterceptor.builder().setHints(hints).build(),
              new GrpcServerSpan(SetOnce.wrap(otel.getOpenTelemetry())));
      caller = GrpcTesting.channel(front);
      Result r = call(caller);
      Map<String, Object> want = Vectors.map(c, "want");
      assertEquals(code, r.code, "code");
      assertEquals(Vectors.str(want, "claim"), r.trailers.get(GrpcTesting.CLAIM), "error-claim");
      assertEquals(
          Vectors.str(want, "pushback"),
          r.trailers.get(GrpcTesting.PUSHBACK),
          "grpc-retry-pushback-ms");
      List<SpanData> spans = SpanCheck.ofKind(otel.getSpans(), SpanKind.SERVER);
      assertEquals(1, spans.size(), "server spans");
      SpanCheck.check(
          "server span", spans.get(0), Vectors.map(want, "span"), SpanCheck.SERVER_KEYS);
    } finally {
      if (caller != null) {
        caller.shutdownNow();
      }
      if (front != null) {
        front.shutdownNow();
      }
      for (ManagedChannel ch : channels) {
        ch.shutdownNow();
      }
      for (Server s : callees) {
        s.shutdownNow();
      }
    }
  }
}
