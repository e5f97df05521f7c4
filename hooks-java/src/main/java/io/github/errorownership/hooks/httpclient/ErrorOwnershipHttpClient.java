// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.httpclient;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.HintSource;
import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.RetryBudget;
import io.github.errorownership.hooks.internal.AsyncLoop;
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
import java.net.Authenticator;
import java.net.CookieHandler;
import java.net.ProxySelector;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.WebSocket;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.function.Predicate;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;

/**
 * A {@link HttpClient} that retries server faults (5xx, or no answer) of the client it wraps only
 * where the decision matrix allows: claimed or unlabelled errors, within a per-peer budget (callee
 * address {@code host[:port]}) and the attempt limit (default 3), with jittered exponential
 * backoff; never an error the callee unclaimed ({@code Error-Claim: unclaimed}), and never a
 * request without a retry policy (by default: methods other than GET HEAD OPTIONS TRACE PUT DELETE
 * without an {@code Idempotency-Key} or {@code X-Idempotency-Key} header). Retries carry {@code
 * Retry-Attempt: N}. Each call's outcome is recorded in the {@link Ledger} of the current context,
 * if any, for the server hook.
 *
 * <p>With {@link Builder#setOpenTelemetry}, each attempt is a CLIENT span of its own, made by the
 * hooks (with the HTTP semantic conventions' basic attributes and the context injected into the
 * request), carrying {@code error_ownership.retry.attempt}, {@code http.request.resend_count}
 * (retries), {@code error_ownership.claim.received} and {@code error_ownership.retry.decision}
 * (failed attempts). Without it the hooks make no spans and set no attributes.
 *
 * <pre>{@code
 * HttpClient client = ErrorOwnershipHttpClient.builder(HttpClient.newHttpClient())
 *     .setOpenTelemetry(openTelemetry).setHints(hints).build();
 * }</pre>
 */
public final class ErrorOwnershipHttpClient extends HttpClient {

  private final HttpClient delegate;
  private final RetrySettings settings;
  private final Predicate<HttpRequest> policy;

  private ErrorOwnershipHttpClient(Builder b) {
    this.delegate = b.delegate;
    this.settings =
        new RetrySettings(
            b.hints, b.budget, b.maxAttempts, b.initialBackoff, b.maxBackoff, b.openTelemetry);
    this.policy = b.policy;
  }

  /** Returns {@code delegate} wrapped with the default settings. */
  public static HttpClient wrap(HttpClient delegate) {
    return builder(delegate).build();
  }

  /** Returns a builder wrapping {@code delegate}. */
  public static Builder builder(HttpClient delegate) {
    return new Builder(delegate);
  }

  /** The default retry policy: an idempotent method or an idempotency key. */
  public static boolean idempotent(HttpRequest r) {
    return JdkCalls.idempotent(r);
  }

  /** Reads the {@code Error-Claim} header of a response. */
  public static Claim claimOf(HttpHeaders headers) {
    return Claim.parse(headers.allValues(OwnershipNames.HTTP_CLAIM_HEADER));
  }

  @Override
  public <T> HttpResponse<T> send(HttpRequest request, HttpResponse.BodyHandler<T> handler)
      throws IOException, InterruptedException {
    Context parent = Context.current();
    return SendLoop.run(new Attempts<>(begin(request), request, handler, null, parent));
  }

  @Override
  public <T> CompletableFuture<HttpResponse<T>> sendAsync(
      HttpRequest request, HttpResponse.BodyHandler<T> handler) {
    return sendAsync(request, handler, null);
  }

  @Override
  public <T> CompletableFuture<HttpResponse<T>> sendAsync(
      HttpRequest request,
      HttpResponse.BodyHandler<T> handler,
      HttpResponse.PushPromiseHandler<T> push) {
    Context parent = Context.current();
    ClientCallState call;
    try (Scope ignored = parent.makeCurrent()) {
      call = begin(request);
    }
    return AsyncLoop.run(
        new Attempts<>(call, request, handler, push, parent), new CompletableFuture<>());
  }

  /** The attempts of one call, each a span of the hooks' (none without OpenTelemetry). */
  private final class Attempts<T> extends SpanLoop<HttpResponse<T>> {
    private final HttpRequest request;
    private final HttpResponse.BodyHandler<T> handler;
    private final HttpResponse.PushPromiseHandler<T> push;
    private final Context parent;

    Attempts(
        ClientCallState call,
        HttpRequest request,
        HttpResponse.BodyHandler<T> handler,
        HttpResponse.PushPromiseHandler<T> push,
        Context parent) {
      super(call);
      this.request = request;
      this.handler = handler;
      this.push = push;
      this.parent = parent;
    }

    @Override
    protected Span startSpan(int n) {
      return ErrorOwnershipHttpClient.this.startSpan(request, parent);
    }

    @Override
    protected HttpResponse<T> send(int n, Span span) throws IOException, InterruptedException {
      HttpRequest ar = attemptRequest(request, n, parent, span);
      try (Scope ignored = span == null ? null : parent.with(span).makeCurrent()) {
        return delegate.send(ar, handler);
      }
    }

    @Override
    protected CompletableFuture<HttpResponse<T>> sendAsync(int n, Span span) {
      HttpRequest ar = attemptRequest(request, n, parent, span);
      try (Scope ignored = span == null ? null : parent.with(span).makeCurrent()) {
        return push == null
            ? delegate.sendAsync(ar, handler)
            : delegate.sendAsync(ar, handler, push);
      }
    }

    @Override
    protected int status(HttpResponse<T> res) {
      return res.statusCode();
    }

    @Override
    protected Claim claim(HttpResponse<T> res) {
      return claimOf(res.headers());
    }

    @Override
    protected boolean canceled(IOException failure) {
      return Thread.currentThread().isInterrupted();
    }

    @Override
    public void discard(HttpResponse<T> res) {
      JdkCalls.discard(res);
    }
  }

  private ClientCallState begin(HttpRequest request) {
    String peer = HttpRules.peerAddress(request.uri());
    return new ClientCallState(
        settings,
        Ledger.current(),
        peer,
        HttpRules.operation(request.method(), request.uri()),
        policy.test(request),
        true);
  }

  private static final TextMapSetter<HttpRequest.Builder> SETTER = HttpRequest.Builder::setHeader;

  private HttpRequest attemptRequest(HttpRequest request, int attempt, Context parent, Span span) {
    if (attempt == 0 && span == null) {
      return request;
    }
    HttpRequest.Builder b = JdkCalls.attemptBuilder(request, attempt);
    if (span != null) {
      settings
          .openTelemetry
          .getPropagators()
          .getTextMapPropagator()
          .inject(parent.with(span), b, SETTER);
    }
    return b.build();
  }

  private Span startSpan(HttpRequest request, Context parent) {
    URI uri = request.uri();
    return HttpRules.startAttemptSpan(
        settings.tracer, parent, request.method(), uri.toString(), uri.getHost(), uri.getPort());
  }

  @Override
  public Optional<CookieHandler> cookieHandler() {
    return delegate.cookieHandler();
  }

  @Override
  public Optional<Duration> connectTimeout() {
    return delegate.connectTimeout();
  }

  @Override
  public Redirect followRedirects() {
    return delegate.followRedirects();
  }

  @Override
  public Optional<ProxySelector> proxy() {
    return delegate.proxy();
  }

  @Override
  public SSLContext sslContext() {
    return delegate.sslContext();
  }

  @Override
  public SSLParameters sslParameters() {
    return delegate.sslParameters();
  }

  @Override
  public Optional<Authenticator> authenticator() {
    return delegate.authenticator();
  }

  @Override
  public Version version() {
    return delegate.version();
  }

  @Override
  public Optional<Executor> executor() {
    return delegate.executor();
  }

  @Override
  public WebSocket.Builder newWebSocketBuilder() {
    return delegate.newWebSocketBuilder();
  }

  /** Builds an {@link ErrorOwnershipHttpClient}. */
  public static final class Builder {
    private final HttpClient delegate;
    private HintSource hints;
    private RetryBudget budget;
    private int maxAttempts = RetrySettings.DEFAULT_MAX_ATTEMPTS;
    private Duration initialBackoff = RetrySettings.DEFAULT_INITIAL_BACKOFF;
    private Duration maxBackoff = RetrySettings.DEFAULT_MAX_BACKOFF;
    private Predicate<HttpRequest> policy = ErrorOwnershipHttpClient::idempotent;
    private OpenTelemetry openTelemetry;

    private Builder(HttpClient delegate) {
      this.delegate = delegate;
    }

    /** Uses {@code hints} for the budgets' limits (default: {@code BudgetLimits.defaults()}). */
    public Builder setHints(HintSource hints) {
      this.hints = hints;
      return this;
    }

    /** Draws every retry from {@code budget}, shared by all peers, instead of one per peer. */
    public Builder setBudget(RetryBudget budget) {
      this.budget = budget;
      return this;
    }

    /** Sets the attempts per call, the first included (default 3); 1 disables retries. */
    public Builder setMaxAttempts(int maxAttempts) {
      this.maxAttempts = Math.max(1, maxAttempts);
      return this;
    }

    /**
     * Sets the backoff: retry n waits a random time in [d/2, d], d = min(max, initial·2^(n−1));
     * defaults 50 ms and 1 s.
     */
    public Builder setBackoff(Duration initial, Duration max) {
      this.initialBackoff = initial;
      this.maxBackoff = max;
      return this;
    }

    /**
     * Sets which requests may be retried at all (default {@link #idempotent}). A request it rejects
     * fails with decision {@code no_policy}. Bodies from {@code BodyPublishers.ofInputStream}
     * cannot be sent twice: reject such requests here.
     */
    public Builder setRetryPolicy(Predicate<HttpRequest> policy) {
      this.policy = policy;
      return this;
    }

    /** Makes one CLIENT span per attempt with {@code openTelemetry}'s tracer and propagators. */
    public Builder setOpenTelemetry(OpenTelemetry openTelemetry) {
      this.openTelemetry = openTelemetry;
      return this;
    }

    /** Returns the client. */
    public ErrorOwnershipHttpClient build() {
      return new ErrorOwnershipHttpClient(this);
    }
  }
}
