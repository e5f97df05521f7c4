// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.okhttp;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.HintSource;
import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.RetryBudget;
import io.github.errorownership.hooks.internal.ClientCallState;
import io.github.errorownership.hooks.internal.HttpRules;
import io.github.errorownership.hooks.internal.RetrySettings;
import io.github.errorownership.hooks.internal.SendLoop;
import io.github.errorownership.hooks.internal.SpanLoop;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.context.propagation.TextMapSetter;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.time.Duration;
import java.util.function.Predicate;
import okhttp3.Interceptor;
import okhttp3.Request;
import okhttp3.Response;

/**
 * An OkHttp <em>application</em> interceptor ({@code OkHttpClient.Builder.addInterceptor}) that
 * retries server faults (5xx, or an {@link IOException}) only where the decision matrix allows:
 * claimed or unlabelled errors, within a per-peer budget and the attempt limit (default 3), with
 * jittered backoff; never an unclaimed error, never a request without a retry policy (by default:
 * non-idempotent methods without an idempotency key, and one-shot bodies). Retries carry {@code
 * Retry-Attempt: N}; each call's outcome is recorded in the {@link Ledger} of the current context.
 *
 * <p>An application interceptor sees one call, and each {@code chain.proceed} is an attempt. With
 * {@link Builder#setOpenTelemetry} the hooks make each attempt a CLIENT span of their own (current
 * while the attempt runs, its context injected into the request) carrying the attempt's attributes.
 * Without it they make no spans and set no attributes.
 */
public final class ErrorOwnershipInterceptor implements Interceptor {
  private static final TextMapSetter<Request.Builder> SETTER = Request.Builder::header;

  private final RetrySettings settings;
  private final Predicate<Request> policy;

  private ErrorOwnershipInterceptor(Builder b) {
    this.settings =
        new RetrySettings(
            b.hints, b.budget, b.maxAttempts, b.initialBackoff, b.maxBackoff, b.openTelemetry);
    this.policy = b.policy;
  }

  /** Returns an interceptor with the default settings. */
  public static ErrorOwnershipInterceptor create() {
    return builder().build();
  }

  /** Returns a new builder. */
  public static Builder builder() {
    return new Builder();
  }

  /** The default retry policy: an idempotent method or an idempotency key. */
  public static boolean idempotent(Request r) {
    return HttpRules.idempotentMethod(r.method())
        || r.header("Idempotency-Key") != null
        || r.header("X-Idempotency-Key") != null;
  }

  /** Reads the {@code Error-Claim} header of a response. */
  public static Claim claimOf(Response r) {
    return Claim.parse(r.headers(OwnershipNames.HTTP_CLAIM_HEADER));
  }

  @Override
  public Response intercept(Chain chain) throws IOException {
    Request request = chain.request();
    Context parent = Context.current();
    boolean replayable = request.body() == null || !request.body().isOneShot();
    ClientCallState call =
        new ClientCallState(
            settings,
            Ledger.current(),
            HttpRules.peerAddress(request.url().uri()),
            HttpRules.operation(request.method(), request.url().uri()),
            replayable && policy.test(request),
            true);
    try {
      return SendLoop.run(
          new SpanLoop<Response>(call) {
            @Override
            protected Span startSpan(int n) {
              return ErrorOwnershipInterceptor.this.startSpan(request, parent);
            }

            @Override
            protected Response send(int n, Span span) throws IOException {
              Request ar = attemptRequest(request, n, parent, span);
              try (Scope ignored = span == null ? null : parent.with(span).makeCurrent()) {
                return chain.proceed(ar);
              }
            }

            @Override
            protected int status(Response res) {
              return res.code();
            }

            @Override
            protected Claim claim(Response res) {
              return claimOf(res);
            }

            @Override
            protected boolean canceled(IOException failure) {
              return chain.call().isCanceled() || failure instanceof InterruptedIOException;
            }

            @Override
            public void discard(Response res) {
              res.close();
            }
          });
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("retry abandoned");
    }
  }

  private Request attemptRequest(Request request, int attempt, Context parent, Span span) {
    if (attempt == 0 && span == null) {
      return request;
    }
    Request.Builder b = request.newBuilder();
    if (attempt > 0) {
      b.header(OwnershipNames.HTTP_RETRY_ATTEMPT_HEADER, Integer.toString(attempt));
    }
    if (span != null) {
      settings
          .openTelemetry
          .getPropagators()
          .getTextMapPropagator()
          .inject(parent.with(span), b, SETTER);
    }
    return b.build();
  }

  private Span startSpan(Request request, Context parent) {
    return HttpRules.startAttemptSpan(
        settings.tracer,
        parent,
        request.method(),
        request.url().toString(),
        request.url().host(),
        request.url().port());
  }

  /** Builds an {@link ErrorOwnershipInterceptor}. */
  public static final class Builder {
    private HintSource hints;
    private RetryBudget budget;
    private int maxAttempts = RetrySettings.DEFAULT_MAX_ATTEMPTS;
    private Duration initialBackoff = RetrySettings.DEFAULT_INITIAL_BACKOFF;
    private Duration maxBackoff = RetrySettings.DEFAULT_MAX_BACKOFF;
    private Predicate<Request> policy = ErrorOwnershipInterceptor::idempotent;
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

    /** Sets which requests may be retried at all (default {@link #idempotent}). */
    public Builder setRetryPolicy(Predicate<Request> policy) {
      this.policy = policy;
      return this;
    }

    /** Makes one CLIENT span per attempt with {@code openTelemetry}. */
    public Builder setOpenTelemetry(OpenTelemetry openTelemetry) {
      this.openTelemetry = openTelemetry;
      return this;
    }

    /** Returns the interceptor. */
    public ErrorOwnershipInterceptor build() {
      return new ErrorOwnershipInterceptor(this);
    }
  }
}
