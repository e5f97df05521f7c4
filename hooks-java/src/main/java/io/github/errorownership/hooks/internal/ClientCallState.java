// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.internal;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.Outcome;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.RetryBudget;
import io.github.errorownership.hooks.RetryDecision;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.common.AttributesBuilder;
import io.opentelemetry.api.trace.Span;

/**
 * One outbound logical call through a client hook: its budget, its ledger entry, and the retry
 * decision after each attempt. Internal: not part of the API.
 */
public final class ClientCallState {
  private static final AttributeKey<Long> RETRY_ATTEMPT =
      AttributeKey.longKey(OwnershipNames.ATTR_RETRY_ATTEMPT);
  private static final AttributeKey<Long> RESEND_COUNT =
      AttributeKey.longKey(OwnershipNames.ATTR_HTTP_RESEND_COUNT);
  private static final AttributeKey<String> RECEIVED =
      AttributeKey.stringKey(OwnershipNames.ATTR_CLAIM_RECEIVED);
  private static final AttributeKey<String> DECISION =
      AttributeKey.stringKey(OwnershipNames.ATTR_RETRY_DECISION);

  private final RetrySettings settings;
  private final String peer;
  private final String peerOperation;
  private final boolean hasPolicy;
  private final boolean http;
  private final RetryBudget budget;
  private final Ledger ledger;
  private final int call;

  /**
   * The delay before the next attempt, when the last decision was {@link RetryDecision#RETRIED}.
   */
  public long delayNanos;

  public ClientCallState(
      RetrySettings settings,
      Ledger ledger,
      String peer,
      String peerOperation,
      boolean hasPolicy,
      boolean http) {
    this.settings = settings;
    this.peer = peer;
    this.peerOperation = peerOperation;
    this.hasPolicy = hasPolicy && settings.maxAttempts > 1;
    this.http = http;
    this.budget = settings.budgetFor(peer);
    this.budget.deposit();
    this.ledger = ledger;
    this.call = ledger == null ? -1 : ledger.begin(peer);
  }

  /** The attempt succeeded (or failed as the caller's fault): the call ends. */
  public void succeeded(int attempt, Span span) {
    // The first attempt too: a span without its attempt number reads as one made outside the hooks.
    annotate(span, attempt, Claim.MISSING, RetryDecision.NONE);
    if (ledger != null) {
      ledger.end(call, Outcome.succeeded(peer, peerOperation));
    }
  }

  /**
   * The attempt failed with a server fault or without an answer: decides whether to retry,
   * annotates {@code span}, and ends the call unless the decision is {@link RetryDecision#RETRIED}
   * (then {@link #delayNanos} is the wait).
   */
  public RetryDecision failed(
      int attempt, Claim received, long deadlineNanos, boolean canceled, Span span) {
    RetryDecision d;
    boolean inFlight = false;
    if (canceled) {
      d = RetryDecision.EXHAUSTED;
      inFlight = true;
    } else {
      boolean left = attempt + 1 < settings.maxAttempts;
      if (hasPolicy && left && received != Claim.UNCLAIMED) {
        delayNanos = settings.backoffNanos(attempt + 1);
        left = RetrySettings.fits(deadlineNanos, delayNanos);
        settings.refresh(budget);
      }
      d = RetryDecision.decide(received, hasPolicy, left, budget);
    }
    annotate(span, attempt, received, d);
    if (d != RetryDecision.RETRIED && ledger != null) {
      Outcome o = Outcome.failed(peer, peerOperation, received, d);
      ledger.end(call, inFlight ? o.withInFlight() : o);
    }
    return d;
  }

  /** The wait before a retry was cut short: the call ends in flight. */
  public void abandoned(Claim received) {
    if (ledger != null) {
      ledger.end(
          call,
          Outcome.failed(peer, peerOperation, received, RetryDecision.RETRIED).withInFlight());
    }
  }

  private void annotate(Span span, int attempt, Claim received, RetryDecision d) {
    if (span == null || !span.isRecording()) {
      return;
    }
    span.setAllAttributes(attributes(attempt, received, d, http));
  }

  /**
   * The hooks' attributes for an attempt: what {@link #succeeded} and {@link #failed} put on the
   * span they are given, for a caller that puts them on a span of its own (the Java agent's).
   */
  public static Attributes attributes(int attempt, Claim received, RetryDecision d, boolean http) {
    AttributesBuilder b = Attributes.builder().put(RETRY_ATTEMPT, (long) attempt);
    if (http && attempt > 0) {
      b.put(RESEND_COUNT, (long) attempt);
    }
    if (d != RetryDecision.NONE) {
      b.put(RECEIVED, received.wireName());
      b.put(DECISION, d.wireName());
    }
    return b.build();
  }
}
