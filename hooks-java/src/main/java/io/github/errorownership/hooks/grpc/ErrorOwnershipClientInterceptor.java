// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.grpc;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.HintSource;
import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.RetryBudget;
import io.github.errorownership.hooks.RetryDecision;
import io.github.errorownership.hooks.internal.ClientCallState;
import io.github.errorownership.hooks.internal.RetrySettings;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.Deadline;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.context.propagation.TextMapSetter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * A gRPC client interceptor that retries unary calls ending with a server-fault code only where the
 * decision matrix allows: claimed ({@code error-claim: claimed}) or unlabelled errors, within a
 * per-peer budget (the channel's authority) and the attempt limit (default 3), with jittered
 * backoff that never sleeps past the call's deadline; never an unclaimed error. Retries carry
 * {@code grpc-previous-rpc-attempts: N}. Each call's outcome is recorded in the {@link Ledger} of
 * the current context. A unary attempt's response is held until the attempt closes, so that the
 * caller only ever sees the last attempt. Streaming calls pass through unchanged.
 *
 * <p>With {@link Builder#setOpenTelemetry} each attempt is a CLIENT span made by the hooks (context
 * injected into the metadata) carrying {@code error_ownership.retry.attempt}, and {@code
 * error_ownership.claim.received} and {@code error_ownership.retry.decision} on failed attempts.
 */
public final class ErrorOwnershipClientInterceptor implements ClientInterceptor {
  private static final Metadata.Key<String> PREVIOUS =
      Metadata.Key.of(OwnershipNames.GRPC_PREVIOUS_ATTEMPTS_KEY, Metadata.ASCII_STRING_MARSHALLER);
  private static final AttributeKey<String> RPC_SYSTEM = AttributeKey.stringKey("rpc.system");
  private static final AttributeKey<String> RPC_SERVICE = AttributeKey.stringKey("rpc.service");
  private static final AttributeKey<String> RPC_METHOD = AttributeKey.stringKey("rpc.method");
  private static final AttributeKey<String> SERVER_ADDRESS =
      AttributeKey.stringKey("server.address");
  private static final AttributeKey<Long> GRPC_STATUS =
      AttributeKey.longKey("rpc.grpc.status_code");
  private static final TextMapSetter<Metadata> SETTER =
      (md, k, v) -> md.put(Metadata.Key.of(k, Metadata.ASCII_STRING_MARSHALLER), v);
  private static final ScheduledExecutorService RETRIES =
      Executors.newSingleThreadScheduledExecutor(
          r -> {
            Thread t = new Thread(r, "errorownership-grpc-retry");
            t.setDaemon(true);
            return t;
          });

  private final RetrySettings settings;
  private final Set<Status.Code> faults;
  private final Predicate<MethodDescriptor<?, ?>> policy;
  private final String peerService;

  private ErrorOwnershipClientInterceptor(Builder b) {
    this.settings =
        new RetrySettings(
            b.hints, b.budget, b.maxAttempts, b.initialBackoff, b.maxBackoff, b.openTelemetry);
    this.faults = b.faults;
    this.policy = b.policy;
    this.peerService = b.peerService;
  }

  /** Returns an interceptor with the default settings. */
  public static ErrorOwnershipClientInterceptor create() {
    return builder().build();
  }

  /** Returns a new builder. */
  public static Builder builder() {
    return new Builder();
  }

  @Override
  public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(
      MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
    if (method.getType() != MethodDescriptor.MethodType.UNARY) {
      return next.newCall(method, options);
    }
    return new RetryingCall<>(method, options, next);
  }

  private final class RetryingCall<ReqT, RespT> extends ClientCall<ReqT, RespT> {
    private final MethodDescriptor<ReqT, RespT> method;
    private final CallOptions options;
    private final Channel next;
    private final Context parent = Context.current();
    private final io.grpc.Context grpcContext = io.grpc.Context.current();
    private final ClientCallState state;
    private final long deadlineNanos;

    // Guarded by this.
    private Listener<RespT> app;
    private Metadata headers;
    private final List<ReqT> sent = new ArrayList<>(1);
    private int requested;
    private boolean halfClosed;
    private boolean cancelled;
    private ClientCall<ReqT, RespT> current;

    RetryingCall(MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
      this.method = method;
      this.options = options;
      this.next = next;
      String peer = peerService != null ? peerService : next.authority();
      this.state =
          new ClientCallState(
              settings,
              Ledger.current(),
              peer,
              method.getFullMethodName(),
              policy.test(method),
              false);
      Deadline d = options.getDeadline();
      Deadline cd = grpcContext.getDeadline();
      if (cd != null && (d == null || cd.isBefore(d))) {
        d = cd;
      }
      this.deadlineNanos =
          d == null ? 0 : System.nanoTime() + d.timeRemaining(TimeUnit.NANOSECONDS);
    }

    @Override
    public void start(Listener<RespT> listener, Metadata headers) {
      synchronized (this) {
        this.app = listener;
        this.headers = headers;
      }
      startAttempt(0);
    }

    private void startAttempt(int n) {
      Span span = null;
      if (settings.tracer != null) {
        String full = method.getFullMethodName();
        span =
            settings
                .tracer
                .spanBuilder(full)
                .setSpanKind(SpanKind.CLIENT)
                .setParent(parent)
                .setAttribute(RPC_SYSTEM, "grpc")
                .setAttribute(RPC_SERVICE, String.valueOf(method.getServiceName()))
                .setAttribute(RPC_METHOD, String.valueOf(method.getBareMethodName()))
                .setAttribute(SERVER_ADDRESS, String.valueOf(next.authority()))
                .startSpan();
      }
      Metadata h = new Metadata();
      ClientCall<ReqT, RespT> c = next.newCall(method, options);
      List<ReqT> replay;
      int req;
      boolean half;
      synchronized (this) {
        h.merge(headers);
        if (cancelled) {
          if (span != null) {
            span.end();
          }
          return;
        }
        current = c;
        replay = new ArrayList<>(sent);
        req = requested;
        half = halfClosed;
      }
      if (n > 0) {
        h.removeAll(PREVIOUS);
        h.put(PREVIOUS, Integer.toString(n));
      }
      Context ctx = span == null ? parent : parent.with(span);
      if (span != null) {
        settings.openTelemetry.getPropagators().getTextMapPropagator().inject(ctx, h, SETTER);
      }
      try (Scope ignored = ctx.makeCurrent()) {
        c.start(new AttemptListener(n, span), h);
        if (req > 0) {
          c.request(req);
        }
        for (ReqT m : replay) {
          c.sendMessage(m);
        }
        if (half) {
          c.halfClose();
        }
      }
    }

    @Override
    public void request(int numMessages) {
      ClientCall<ReqT, RespT> c;
      synchronized (this) {
        requested += numMessages;
        c = current;
      }
      if (c != null) {
        c.request(numMessages);
      }
    }

    @Override
    public void cancel(String message, Throwable cause) {
      ClientCall<ReqT, RespT> c;
      synchronized (this) {
        cancelled = true;
        c = current;
      }
      if (c != null) {
        c.cancel(message, cause);
      }
    }

    @Override
    public void halfClose() {
      ClientCall<ReqT, RespT> c;
      synchronized (this) {
        halfClosed = true;
        c = current;
      }
      if (c != null) {
        c.halfClose();
      }
    }

    @Override
    public void sendMessage(ReqT message) {
      ClientCall<ReqT, RespT> c;
      synchronized (this) {
        sent.add(message);
        c = current;
      }
      if (c != null) {
        c.sendMessage(message);
      }
    }

    @Override
    public boolean isReady() {
      ClientCall<ReqT, RespT> c;
      synchronized (this) {
        c = current;
      }
      return c != null && c.isReady();
    }

    private final class AttemptListener extends Listener<RespT> {
      private final int n;
      private final Span span;
      private Metadata respHeaders;
      private final List<RespT> messages = new ArrayList<>(1);

      AttemptListener(int n, Span span) {
        this.n = n;
        this.span = span;
      }

      @Override
      public void onHeaders(Metadata h) {
        respHeaders = h;
      }

      @Override
      public void onMessage(RespT message) {
        messages.add(message);
      }

      @Override
      public void onReady() {
        Listener<RespT> l;
        synchronized (RetryingCall.this) {
          l = app;
        }
        l.onReady();
      }

      @Override
      public void onClose(Status status, Metadata trailers) {
        if (span != null) {
          span.setAttribute(GRPC_STATUS, (long) status.getCode().value());
          if (faults.contains(status.getCode())) {
            span.setStatus(StatusCode.ERROR);
          }
        }
        if (!faults.contains(status.getCode())) {
          state.succeeded(n, span);
          end();
          deliver(status, trailers);
          return;
        }
        boolean stop;
        synchronized (RetryingCall.this) {
          stop = cancelled;
        }
        stop =
            stop
                || grpcContext.isCancelled()
                || (deadlineNanos != 0 && deadlineNanos - System.nanoTime() <= 0);
        Claim received = ErrorOwnershipServerInterceptor.claimOf(trailers);
        RetryDecision d = state.failed(n, received, deadlineNanos, stop, span);
        end();
        if (d != RetryDecision.RETRIED) {
          deliver(status, trailers);
          return;
        }
        // The task closes the call itself whatever happens, so the future carries nothing to read:
        // an exception left in it would leave the application waiting for a close that never
        // comes.
        Future<?> unused =
            RETRIES.schedule(
                () -> {
                  boolean gone;
                  synchronized (RetryingCall.this) {
                    gone = cancelled;
                  }
                  if (gone || grpcContext.isCancelled()) {
                    state.abandoned(received);
                    deliver(Status.CANCELLED.withDescription("retry abandoned"), new Metadata());
                    return;
                  }
                  try {
                    startAttempt(n + 1);
                  } catch (RuntimeException e) {
                    state.abandoned(received);
                    deliver(
                        Status.INTERNAL.withDescription("retry failed to start").withCause(e),
                        new Metadata());
                  }
                },
                state.delayNanos,
                TimeUnit.NANOSECONDS);
      }

      private void end() {
        if (span != null) {
          span.end();
        }
      }

      private void deliver(Status status, Metadata trailers) {
        Listener<RespT> l;
        synchronized (RetryingCall.this) {
          l = app;
        }
        if (respHeaders != null) {
          l.onHeaders(respHeaders);
        }
        for (RespT m : messages) {
          l.onMessage(m);
        }
        l.onClose(status, trailers);
      }
    }
  }

  /** Builds an {@link ErrorOwnershipClientInterceptor}. */
  public static final class Builder {
    private HintSource hints;
    private RetryBudget budget;
    private int maxAttempts = RetrySettings.DEFAULT_MAX_ATTEMPTS;
    private Duration initialBackoff = RetrySettings.DEFAULT_INITIAL_BACKOFF;
    private Duration maxBackoff = RetrySettings.DEFAULT_MAX_BACKOFF;
    private Set<Status.Code> faults = GrpcFaults.DEFAULT;
    private Predicate<MethodDescriptor<?, ?>> policy = m -> true;
    private String peerService;
    private OpenTelemetry openTelemetry;

    private Builder() {}

    /** Uses {@code hints} for the budgets' limits. */
    public Builder setHints(HintSource hints) {
      this.hints = hints;
      return this;
    }

    /** Draws every retry from {@code budget}, shared by all peers. */
    public Builder setBudget(RetryBudget budget) {
      this.budget = budget;
      return this;
    }

    /** Sets the attempts per call, the first included (default 3); 1 disables retries. */
    public Builder setMaxAttempts(int maxAttempts) {
      this.maxAttempts = Math.max(1, maxAttempts);
      return this;
    }

    /** Sets the backoff (defaults 50 ms and 1 s): retry n waits in [d/2, d]. */
    public Builder setBackoff(Duration initial, Duration max) {
      this.initialBackoff = initial;
      this.maxBackoff = max;
      return this;
    }

    /** Sets the server-fault codes (default {@link GrpcFaults#DEFAULT}). */
    public Builder setFaultCodes(Set<Status.Code> faults) {
      this.faults = Set.copyOf(faults);
      return this;
    }

    /** Sets which methods may be retried at all (default: every unary method). */
    public Builder setRetryPolicy(Predicate<MethodDescriptor<?, ?>> policy) {
      this.policy = policy;
      return this;
    }

    /** Names the callee (default: the channel's authority, host:port). */
    public Builder setPeerService(String peerService) {
      this.peerService = peerService;
      return this;
    }

    /** Makes one CLIENT span per attempt with {@code openTelemetry}. */
    public Builder setOpenTelemetry(OpenTelemetry openTelemetry) {
      this.openTelemetry = openTelemetry;
      return this;
    }

    /** Returns the interceptor. */
    public ErrorOwnershipClientInterceptor build() {
      return new ErrorOwnershipClientInterceptor(this);
    }
  }
}
