// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.bootstrap;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.RetryDecision;
import io.github.errorownership.hooks.internal.ClientCallState;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.common.AttributesBuilder;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.ContextKey;

/**
 * One logical call the hooks retry under the agent (java.net.http, OkHttp, gRPC). The agent's
 * instrumentation makes each attempt's CLIENT span; {@link ClientAttempts}, an attributes extractor
 * of that instrumentation, ends the attempt here while the span is still open, so that the
 * decision's attributes land on the agent's span. The subclass, next to the client library, reads
 * its responses.
 */
public abstract class LoopCall {
  static final ContextKey<LoopCall> KEY = ContextKey.named("errorownership-agent-call");
  private static final AttributeKey<Long> RESEND_COUNT =
      AttributeKey.longKey("http.request.resend_count");

  private final ClientCallState state;
  private int attempt;
  private RetryDecision decision;
  private boolean ended;
  private Claim received = Claim.MISSING;
  private boolean resendCounted;

  private final boolean http;

  protected LoopCall(Context parent, String peer, String operation, boolean policy) {
    this(parent, peer, operation, policy, true);
  }

  /** A call of HTTP ({@code http}, its retries counted in http.request.resend_count) or gRPC. */
  protected LoopCall(Context parent, String peer, String operation, boolean policy, boolean http) {
    this.http = http;
    this.state =
        new ClientCallState(
            AgentHooks.get().retry, Ledger.fromContext(parent), peer, operation, policy, http);
  }

  /** The call a client instrumentation's span is an attempt of, in its context, or null. */
  public static LoopCall current(Context context) {
    return context.get(KEY);
  }

  /** Whether {@code response} is a server fault. */
  protected abstract boolean fault(Object response);

  /** Whether the caller gave up, when an attempt failed with {@code error} (maybe null). */
  protected boolean canceled(Throwable error) {
    return Thread.currentThread().isInterrupted()
        || !(error == null || error instanceof java.io.IOException);
  }

  /** The caller's deadline ({@link System#nanoTime}), or 0. */
  protected long deadlineNanos() {
    return 0;
  }

  /** The response's Error-Claim values, read as a claim. */
  protected abstract Claim claim(Object response);

  /** Starts attempt {@code n}: returns the context to make it in. */
  public Context startAttempt(Context parent, int n) {
    attempt = n;
    decision = null;
    ended = false;
    resendCounted = false;
    received = Claim.MISSING;
    return parent.with(KEY, this);
  }

  /** The instrumentation set http.request.resend_count on this attempt's span itself. */
  synchronized void resendCounted() {
    resendCounted = true;
  }

  /** Called by the extractor at the end of the attempt's span (at most once per attempt). */
  synchronized void onSpanEnd(AttributesBuilder attributes, Object response, Throwable error) {
    if (ended) {
      return;
    }
    end(response, error, attributes);
  }

  /**
   * Ends the attempt after the client returned: the extractor's decision if it made one, else this
   * one (the instrumentation was off: no span, no attributes).
   */
  public synchronized RetryDecision afterAttempt(Object response, Throwable error) {
    if (!ended) {
      end(response, error, null);
    }
    return decision;
  }

  /** The claim the last failed attempt carried. */
  public Claim received() {
    return received;
  }

  /** The wait before the next attempt. */
  public long delayNanos() {
    return state.delayNanos;
  }

  /** The wait before a retry was cut short. */
  public void abandoned() {
    state.abandoned(received);
  }

  private void end(Object response, Throwable error, AttributesBuilder attributes) {
    ended = true;
    if (response != null && !fault(response)) {
      decision = RetryDecision.NONE;
      state.succeeded(attempt, null);
      put(attributes, ClientCallState.attributes(attempt, Claim.MISSING, decision, http));
      return;
    }
    received = response == null ? Claim.MISSING : claim(response);
    decision = state.failed(attempt, received, deadlineNanos(), canceled(error), null);
    put(attributes, ClientCallState.attributes(attempt, received, decision, http));
  }

  /** Puts the attempt's attributes on its span, each once: none the instrumentation set. */
  private void put(AttributesBuilder b, Attributes attributes) {
    if (b == null) {
      return;
    }
    if (resendCounted) {
      attributes = attributes.toBuilder().remove(RESEND_COUNT).build();
    }
    b.putAll(attributes);
  }
}
