// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.hostile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.Outcome;
import io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor;
import io.github.errorownership.hooks.grpc.ErrorOwnershipServerInterceptor;
import io.github.errorownership.hooks.testing.GrpcTesting;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Lies and garbage a gRPC callee can send in its status and trailers (ported from
 * hooksgrpc/hostile_test.go): the caller gets the code a caller without the hooks gets, the claim
 * read is clean, and a relaying server's own error-claim is one clean value.
 */
class HostileGrpcCalleeTest {
  private static GrpcTesting.Handler fails(Status.Code code, String... claims) {
    return (req, headers, out) -> {
      Metadata t = new Metadata();
      for (String c : claims) {
        t.put(GrpcTesting.CLAIM, c);
      }
      if (code == Status.Code.OK) {
        out.onNext("ok");
        out.onCompleted();
        return;
      }
      out.onError(Status.fromCode(code).asRuntimeException(t));
    };
  }

  static Stream<Arguments> callees() {
    List<String> thousand = new ArrayList<>();
    for (int i = 0; i < 1000; i++) {
      thousand.add("claimed");
    }
    return Stream.of(
        Arguments.of("claims everything", fails(Status.Code.UNAVAILABLE, "claimed"), Claim.CLAIMED),
        Arguments.of(
            "unclaims everything", fails(Status.Code.INTERNAL, "unclaimed"), Claim.UNCLAIMED),
        Arguments.of("an invalid value", fails(Status.Code.INTERNAL, "yes-please"), Claim.MISSING),
        Arguments.of("capitals", fails(Status.Code.INTERNAL, "CLAIMED"), Claim.CLAIMED),
        Arguments.of(
            "claimed and unclaimed",
            fails(Status.Code.INTERNAL, "claimed", "unclaimed"),
            Claim.MISSING),
        Arguments.of(
            "1000 repeated claims",
            fails(Status.Code.INTERNAL, thousand.toArray(new String[0])),
            Claim.MISSING),
        Arguments.of(
            "a 4 KiB claim", fails(Status.Code.INTERNAL, "claimed".repeat(600)), Claim.MISSING),
        Arguments.of(
            "a comma list", fails(Status.Code.INTERNAL, "claimed,unclaimed"), Claim.MISSING),
        Arguments.of("a claim on OK", fails(Status.Code.OK, "unclaimed"), Claim.MISSING),
        Arguments.of(
            "a claim on a caller fault",
            fails(Status.Code.INVALID_ARGUMENT, "claimed"),
            Claim.MISSING),
        Arguments.of(
            "no answer until the deadline",
            (GrpcTesting.Handler)
                (req, headers, out) -> {
                  Thread.sleep(2000);
                  out.onNext("late");
                  out.onCompleted();
                },
            Claim.MISSING));
  }

  private static Status.Code call(ManagedChannel ch, long deadlineMs, Metadata[] trailers) {
    try {
      ClientCalls.blockingUnaryCall(
          ch,
          GrpcTesting.SAY,
          CallOptions.DEFAULT.withDeadlineAfter(deadlineMs, TimeUnit.MILLISECONDS),
          "hi");
      return Status.Code.OK;
    } catch (StatusRuntimeException e) {
      if (trailers != null) {
        trailers[0] = e.getTrailers();
      }
      return e.getStatus().getCode();
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("callees")
  @Timeout(60)
  void callee(String name, GrpcTesting.Handler handler, Claim want) throws Exception {
    long deadline = name.startsWith("no answer") ? 300 : 5000;
    Server server = GrpcTesting.serve(handler);
    ManagedChannel bare = GrpcTesting.channel(server);
    ManagedChannel hooked =
        GrpcTesting.channel(
            server,
            ErrorOwnershipClientInterceptor.builder()
                .setBackoff(Duration.ofMillis(1), Duration.ofMillis(1))
                .build());
    try {
      Status.Code plain = call(bare, deadline, null);
      Ledger ledger = Ledger.create();
      Status.Code got;
      try (Scope ignored = Context.current().with(ledger).makeCurrent()) {
        got = call(hooked, deadline, null);
      }
      assertEquals(plain, got, "what the caller gets");
      List<Outcome> outs = ledger.outcomes();
      assertEquals(1, outs.size());
      assertEquals(want, outs.get(0).received(), "claim read");
      if (name.startsWith("no answer")) {
        assertTrue(outs.get(0).inFlight(), "a call cut short by the deadline is in flight");
      }
    } finally {
      GrpcTesting.shutdown(server, bare, hooked);
    }
  }

  @ParameterizedTest(name = "relay: {0}")
  @MethodSource("callees")
  @Timeout(60)
  void relay(String name, GrpcTesting.Handler handler, Claim want) throws Exception {
    if (name.startsWith("no answer")) {
      return; // covered above; a relay adds nothing to a callee that never answers
    }
    Server callee = GrpcTesting.serve(handler);
    ManagedChannel toCallee =
        GrpcTesting.channel(
            callee,
            ErrorOwnershipClientInterceptor.builder()
                .setBackoff(Duration.ofMillis(1), Duration.ofMillis(1))
                .build());
    // The relay passes its callee's status and trailers on as they are, garbage included.
    Server relay =
        GrpcTesting.serve(
            (req, headers, out) -> {
              Metadata[] t = new Metadata[1];
              Status.Code code = call(toCallee, 5000, t);
              if (code == Status.Code.OK) {
                out.onNext("ok");
                out.onCompleted();
                return;
              }
              out.onError(Status.fromCode(code).asRuntimeException(t[0]));
            },
            ErrorOwnershipServerInterceptor.create());
    ManagedChannel caller = GrpcTesting.channel(relay);
    try {
      Metadata[] t = new Metadata[1];
      Status.Code code = call(caller, 10000, t);
      if (code == Status.Code.OK || code == Status.Code.INVALID_ARGUMENT) {
        return;
      }
      List<String> claims = new ArrayList<>();
      t[0].getAll(GrpcTesting.CLAIM).forEach(claims::add);
      assertEquals(1, claims.size(), "one error-claim value: " + claims);
      assertTrue(Claim.parse(claims) != Claim.MISSING, "a clean claim: " + claims);
      if (want != Claim.CLAIMED && want != Claim.UNCLAIMED) {
        // Garbage was replaced by the relay's own decision: its callee failed without a claim.
        assertEquals("unclaimed", claims.get(0));
      }
    } finally {
      GrpcTesting.shutdown(relay, caller);
      GrpcTesting.shutdown(callee, toCallee);
    }
  }
}
