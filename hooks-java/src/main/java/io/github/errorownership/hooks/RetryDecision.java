// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

/** What a caller did after a failed attempt ({@code error_ownership.retry.decision}). */
public enum RetryDecision {
  /** Not recorded: no hooks, or the attempt succeeded. */
  NONE(OwnershipNames.RETRY_DECISION_NONE),
  /** The caller retried. */
  RETRIED(OwnershipNames.RETRY_DECISION_RETRIED),
  /** The callee unclaimed the error: no retry. */
  SUPPRESSED_UNCLAIMED(OwnershipNames.RETRY_DECISION_SUPPRESSED_UNCLAIMED),
  /** The retry budget was empty: no retry. */
  SUPPRESSED_BUDGET(OwnershipNames.RETRY_DECISION_SUPPRESSED_BUDGET),
  /** The caller has no retry policy for the call: it passes the error up claimed. */
  NO_POLICY(OwnershipNames.RETRY_DECISION_NO_POLICY),
  /** The attempt limit or the deadline refused another attempt. */
  EXHAUSTED(OwnershipNames.RETRY_DECISION_EXHAUSTED);

  private final String wire;

  RetryDecision(String wire) {
    this.wire = wire;
  }

  /** Returns the attribute spelling, {@code ""} for {@link #NONE}. */
  public String wireName() {
    return wire;
  }

  @Override
  public String toString() {
    return wire;
  }

  /** Reports whether the decision is a retry the hooks held back. */
  public boolean suppressed() {
    return this == SUPPRESSED_UNCLAIMED || this == SUPPRESSED_BUDGET;
  }

  /** Reads an attribute value; unknown values are {@link #NONE}. */
  public static RetryDecision parse(String s) {
    for (RetryDecision d : values()) {
      if (!d.wire.isEmpty() && d.wire.equals(s)) {
        return d;
      }
    }
    return NONE;
  }

  /**
   * Decides whether a caller retries a failed attempt (docs/design.md §4.3). Only when every other
   * check passes does it withdraw from {@code budget}, so a suppressed retry costs no token. A
   * {@code null} budget allows every retry.
   *
   * @param received the claim on the attempt's error
   * @param hasPolicy the caller may retry this call at all (configured, idempotent, replayable)
   * @param attemptsLeft another attempt fits the attempt limit and the deadline
   * @param budget the budget to draw from, or {@code null}
   */
  public static RetryDecision decide(
      Claim received, boolean hasPolicy, boolean attemptsLeft, RetryBudget budget) {
    if (!hasPolicy) {
      return NO_POLICY;
    }
    if (received == Claim.UNCLAIMED) {
      return SUPPRESSED_UNCLAIMED;
    }
    if (!attemptsLeft) {
      return EXHAUSTED;
    }
    if (budget != null && !budget.tryWithdraw()) {
      return SUPPRESSED_BUDGET;
    }
    return RETRIED;
  }
}
