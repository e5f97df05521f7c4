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
import java.util.function.BooleanSupplier;
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

  /**
   * How one call's attempts are traced and decided: by default the interceptor's own spans; under
   * the Java agent extension, the agent's. Not an API of its own: use the builder.
   */
  public interface Attempts {
    /** The call options of every attempt. */
    default CallOptions callOptions(CallOptions options) {
      return options;
    }

    /**
     * Starts attempt {@code n}: the context it runs in, its trace context put in {@code headers}.
     */
    Context start(int n, Metadata headers);

    /** Attempt {@code n} closed: its decision ({@link RetryDecision#NONE} when it did not fail). */
    RetryDecision closed(int n, Status status, Metadata trailers);

    /** The wait before the next attempt. */
    long delayNanos();

    /** The wait before a retry was cut short: the call ends. */
    void abandoned();
  }

  /** Makes the {@link Attempts} of each call. Not an API of its own. */
  public interface AttemptsFactory {
    /**
     * The attempts of a call of {@code method} to {@code authority}, made in {@code parent}; {@code
     * stopped} tells whether the caller gave up (canceled, or past {@code deadlineNanos}).
     */
    Attempts create(
        MethodDescriptor<?, ?> method,
        String authority,
        Context parent,
        long deadlineNanos,
        BooleanSupplier stopped);
  }

  /**
   * An interceptor whose retry loop (the one of {@link #create}) leaves the attempts' tracing and
   * decisions to {@code attempts}: the Java agent extension's, whose attempts are the agent's
   * spans.
   */
  public static ClientInterceptor withAttempts(AttemptsFactory attempts) {
    return new ClientInterceptor() {
      @Override
      public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(
          MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
        if (method.getType() != MethodDescriptor.MethodType.UNARY) {
          return next.newCall(method, options);
        }
        return new RetryingCall<>(method, options, next, attempts);
      }
    };
  }

  @Override
  public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(
      MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
    if (method.getType() != MethodDescriptor.MethodType.UNARY) {
      return next.newCall(method, options);
    }
    return new RetryingCall<>(method, options, next, SpanAttempts::new);
  }

  /** The attempts as the library makes them: spans of its own (none without OpenTelemetry). */
  private final class SpanAttempts implements Attempts {
    private final MethodDescriptor<?, ?> method;
    private final String authority;
    private final Context parent;
    private final long deadlineNanos;
    private final BooleanSupplier stopped;
    private final ClientCallState state;
    private Span span;
    private Claim received = Claim.MISSING;

    SpanAttempts(
        MethodDescriptor<?, ?> method,
        String authority,
        Context parent,
        long deadlineNanos,
        BooleanSupplier stopped) {
      this.method = method;
      this.authority = authority;
      this.parent = parent;
      this.deadlineNanos = deadlineNanos;
      this.stopped = stopped;
      this.state =
          new ClientCallState(
              settings,
              Ledger.fromContext(parent),
              peerService != null ? peerService : authority,
              method.getFullMethodName(),
              policy.test(method),
              false);
    }

    @Override
    public Context start(int n, Metadata headers) {
      span = null;
      if (settings.tracer == null) {
        return parent;
      }
      span =
          settings
              .tracer
              .spanBuilder(method.getFullMethodName())
              .setSpanKind(SpanKind.CLIENT)
              .setParent(parent)
              .setAttribute(RPC_SYSTEM, "grpc")
              .setAttribute(RPC_SERVICE, String.valueOf(method.getServiceName()))
              .setAttribute(RPC_METHOD, String.valueOf(method.getBareMethodName()))
              .setAttribute(SERVER_ADDRESS, String.valueOf(authority))
              .startSpan();
      Context ctx = parent.with(span);
      settings.openTelemetry.getPropagators().getTextMapPropagator().inject(ctx, headers, SETTER);
      return ctx;
    }

    @Override
    public RetryDecision closed(int n, Status status, Metadata trailers) {
      boolean fault = faults.contains(status.getCode());
      if (span != null) {
        span.setAttribute(GRPC_STATUS, (long) status.getCode().value());
        if (fault) {
          span.setStatus(StatusCode.ERROR);
        }
      }
      RetryDecision d;
      if (!fault) {
        state.succeeded(n, span);
        d = RetryDecision.NONE;
      } else {
        received = ErrorOwnershipServerInterceptor.claimOf(trailers);
        d = state.failed(n, received, deadlineNanos, stopped.getAsBoolean(), span);
      }
      if (span != null) {
        span.end();
      }
      return d;
    }

    @Override
    public long delayNanos() {
      return state.delayNanos;
    }

    @Override
    public void abandoned() {
      state.abandoned(received);
    }
  }

  /**
   * The retry loop of one unary call: each attempt a new call down the channel, the caller's
   * messages replayed, the response held until the attempt's decision.
   */
  private static final class RetryingCall<ReqT, RespT> extends ClientCall<ReqT, RespT> {
    private final MethodDescriptor<ReqT, RespT> method;
    private final CallOptions options;
    private final Channel next;
    private final io.grpc.Context grpcContext = io.grpc.Context.current();
    private final long deadlineNanos;
    private final Attempts attempts;

    // Guarded by this.
    private Listener<RespT> app;
    private Metadata headers;
    private final List<ReqT> sent = new ArrayList<>(1);
    private int requested;
    private boolean halfClosed;
    private boolean cancelled;
    private ClientCall<ReqT, RespT> current;

    RetryingCall(
        MethodDescriptor<ReqT, RespT> method,
        CallOptions options,
        Channel next,
        AttemptsFactory factory) {
      this.method = method;
      this.next = next;
      Deadline d = options.getDeadline();
      Deadline cd = grpcContext.getDeadline();
      if (cd != null && (d == null || cd.isBefore(d))) {
        d = cd;
      }
      this.deadlineNanos =
          d == null ? 0 : System.nanoTime() + d.timeRemaining(TimeUnit.NANOSECONDS);
      this.attempts =
          factory.create(method, next.authority(), Context.current(), deadlineNanos, this::stopped);
      this.options = attempts.callOptions(options);
    }

    /** Whether the caller gave up: canceled, or out of time. */
    private boolean stopped() {
      synchronized (this) {
        if (cancelled) {
          return true;
        }
      }
      return grpcContext.isCancelled()
          || (deadlineNanos != 0 && deadlineNanos - System.nanoTime() <= 0);
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
      Metadata h = new Metadata();
      List<ReqT> replay;
      int req;
      boolean half;
      synchronized (this) {
        if (cancelled) {
          return;
        }
        h.merge(headers);
        replay = new ArrayList<>(sent);
        req = requested;
        half = halfClosed;
      }
      if (n > 0) {
        h.removeAll(PREVIOUS);
        h.put(PREVIOUS, Integer.toString(n));
      }
      // The attempt's call is made in its context: an instrumentation further down the channel
      // makes its span there.
      try (Scope ignored = attempts.start(n, h).makeCurrent()) {
        ClientCall<ReqT, RespT> c = next.newCall(method, options);
        boolean gone;
        synchronized (this) {
          current = c;
          gone = cancelled;
        }
        c.start(new AttemptListener(n), h);
        if (gone) {
          c.cancel("call cancelled", null);
          return;
        }
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
      private Metadata respHeaders;
      private final List<RespT> messages = new ArrayList<>(1);

      AttemptListener(int n) {
        this.n = n;
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
        if (attempts.closed(n, status, trailers) != RetryDecision.RETRIED) {
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
                    attempts.abandoned();
                    deliver(Status.CANCELLED.withDescription("retry abandoned"), new Metadata());
                    return;
                  }
                  try {
                    startAttempt(n + 1);
                  } catch (RuntimeException e) {
                    attempts.abandoned();
                    deliver(
                        Status.INTERNAL.withDescription("retry failed to start").withCause(e),
                        new Metadata());
                  }
                },
                attempts.delayNanos(),
                TimeUnit.NANOSECONDS);
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
