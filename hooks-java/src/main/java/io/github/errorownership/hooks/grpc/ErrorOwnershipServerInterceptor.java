// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.grpc;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.HintSource;
import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.ModeFunction;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.Verdict;
import io.github.errorownership.hooks.internal.ServerRules;
import io.grpc.ForwardingServerCall;
import io.grpc.ForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * A gRPC server interceptor that puts a {@link Ledger} in the OpenTelemetry context of each call's
 * handler (current in every listener callback), and sets the {@code error-claim} trailer on calls
 * that end with a server-fault code (by default UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED,
 * INTERNAL, UNAVAILABLE, DATA_LOSS), with {@code grpc-retry-pushback-ms: -1} when it is {@code
 * unclaimed}. A handler that set {@code error-claim} itself to one valid value wins; any other
 * value is replaced. The server span ({@link Span#current()} when the call starts: register this
 * interceptor so that it runs inside the OpenTelemetry gRPC instrumentation's) gets {@code
 * error_ownership.claim.sent} and {@code error_ownership.claim.reason}.
 */
public final class ErrorOwnershipServerInterceptor implements ServerInterceptor {
  static final Metadata.Key<String> CLAIM_KEY =
      Metadata.Key.of(OwnershipNames.GRPC_CLAIM_KEY, Metadata.ASCII_STRING_MARSHALLER);
  static final Metadata.Key<String> PUSHBACK_KEY =
      Metadata.Key.of(OwnershipNames.GRPC_PUSHBACK_KEY, Metadata.ASCII_STRING_MARSHALLER);

  private final HintSource hints;
  private final Set<Status.Code> faults;

  private ErrorOwnershipServerInterceptor(Builder b) {
    this.hints = b.hints;
    this.faults = b.faults;
  }

  /** Returns an interceptor with the default settings. */
  public static ErrorOwnershipServerInterceptor create() {
    return builder().build();
  }

  /** Returns a new builder. */
  public static Builder builder() {
    return new Builder();
  }

  /** Reads the {@code error-claim} values of trailers. */
  public static Claim claimOf(Metadata trailers) {
    if (trailers == null) {
      return Claim.MISSING;
    }
    Iterable<String> vs = trailers.getAll(CLAIM_KEY);
    if (vs == null) {
      return Claim.MISSING;
    }
    List<String> l = new ArrayList<>(1);
    for (String v : vs) {
      l.add(v);
      if (l.size() > 1) {
        return Claim.MISSING;
      }
    }
    return Claim.parse(l);
  }

  @Override
  public <ReqT, RespT> ServerCall.Listener<ReqT> interceptCall(
      ServerCall<ReqT, RespT> call, Metadata headers, ServerCallHandler<ReqT, RespT> next) {
    Context parent = Context.current();
    Ledger ledger = Ledger.create();
    Context ctx = parent.with(ledger);
    Span span = Span.fromContext(parent);
    String op = call.getMethodDescriptor().getFullMethodName();
    ServerCall<ReqT, RespT> claiming =
        new ForwardingServerCall.SimpleForwardingServerCall<ReqT, RespT>(call) {
          @Override
          public void close(Status status, Metadata trailers) {
            if (faults.contains(status.getCode())) {
              settle(status, trailers, ledger, span, op);
            }
            super.close(status, trailers);
          }
        };
    ServerCall.Listener<ReqT> listener;
    try (Scope ignored = ctx.makeCurrent()) {
      listener = next.startCall(claiming, headers);
    }
    return new ForwardingServerCallListener.SimpleForwardingServerCallListener<ReqT>(listener) {
      @Override
      public void onMessage(ReqT message) {
        try (Scope ignored = ctx.makeCurrent()) {
          super.onMessage(message);
        }
      }

      @Override
      public void onHalfClose() {
        try (Scope ignored = ctx.makeCurrent()) {
          super.onHalfClose();
        }
      }

      @Override
      public void onCancel() {
        try (Scope ignored = ctx.makeCurrent()) {
          super.onCancel();
        }
      }

      @Override
      public void onComplete() {
        try (Scope ignored = ctx.makeCurrent()) {
          super.onComplete();
        }
      }

      @Override
      public void onReady() {
        try (Scope ignored = ctx.makeCurrent()) {
          super.onReady();
        }
      }
    };
  }

  private void settle(Status status, Metadata trailers, Ledger ledger, Span span, String op) {
    if (trailers.containsKey(CLAIM_KEY)) {
      Claim own = claimOf(trailers);
      if (own != Claim.MISSING) {
        if (own == Claim.UNCLAIMED) {
          trailers.removeAll(PUSHBACK_KEY);
          trailers.put(PUSHBACK_KEY, "-1");
        }
        ServerRules.annotate(span, own);
        return;
      }
      trailers.removeAll(CLAIM_KEY);
    }
    ModeFunction modes = ServerRules.modes(hints, op);
    io.grpc.Deadline deadline = io.grpc.Context.current().getDeadline();
    boolean timedOut =
        status.getCode() == Status.Code.DEADLINE_EXCEEDED
            || (deadline != null && deadline.isExpired());
    Verdict v = ledger.decide(modes, timedOut);
    trailers.put(CLAIM_KEY, v.claim().wireName());
    if (v.claim() == Claim.UNCLAIMED) {
      trailers.removeAll(PUSHBACK_KEY);
      trailers.put(PUSHBACK_KEY, "-1");
    }
    ServerRules.annotate(span, v);
  }

  /** Builds an {@link ErrorOwnershipServerInterceptor}. */
  public static final class Builder {
    private HintSource hints;
    private Set<Status.Code> faults = GrpcFaults.DEFAULT;

    private Builder() {}

    /** Uses {@code hints} for edge modes; without, every edge is unknown (fail-close). */
    public Builder setHints(HintSource hints) {
      this.hints = hints;
      return this;
    }

    /** Sets the server-fault codes (default {@link GrpcFaults#DEFAULT}). */
    public Builder setFaultCodes(Set<Status.Code> faults) {
      this.faults = Set.copyOf(faults);
      return this;
    }

    /** Returns the interceptor. */
    public ErrorOwnershipServerInterceptor build() {
      return new ErrorOwnershipServerInterceptor(this);
    }
  }
}
