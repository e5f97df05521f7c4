// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

/**
 * What the hooks need from the learned model: edge modes and the retry budget's limits. {@link
 * io.github.errorownership.hooks.hints.HintsClient} implements it; a static table can too.
 * Implementations must answer at once, never waiting on I/O.
 */
public interface HintSource {
  /**
   * Returns the mode of the edge from {@code operation} to ({@code peer}, {@code peerOperation});
   * any argument may be {@code ""} when not known.
   */
  Mode mode(String operation, String peer, String peerOperation);

  /** Returns the retry budget's limits. */
  BudgetLimits budgetLimits();
}
