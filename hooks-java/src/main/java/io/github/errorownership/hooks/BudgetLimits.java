// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

/**
 * A retry budget's limits: {@code ratio}, the retries each request earns, and {@code
 * minRetriesPerSecond}, the floor of retries per second of window allowed on top.
 *
 * @param ratio retries allowed per request, in [0, 1]
 * @param minRetriesPerSecond the floor, in [0, {@link #MAX_MIN_RETRIES_PER_SECOND}]
 */
public record BudgetLimits(double ratio, double minRetriesPerSecond) {
  /** One retry per ten requests. */
  public static final double DEFAULT_RATIO = OwnershipNames.DEFAULT_RETRY_RATIO;

  /** The default floor. */
  public static final double DEFAULT_MIN_RETRIES_PER_SECOND =
      OwnershipNames.DEFAULT_MIN_RETRIES_PER_SECOND;

  /** The largest floor a hints document may announce. */
  public static final double MAX_MIN_RETRIES_PER_SECOND = OwnershipNames.MAX_MIN_RETRIES_PER_SECOND;

  private static final BudgetLimits DEFAULT =
      new BudgetLimits(DEFAULT_RATIO, DEFAULT_MIN_RETRIES_PER_SECOND);

  /** Returns the default limits, ratio 0.1 and 10 retries a second. */
  public static BudgetLimits defaults() {
    return DEFAULT;
  }

  /** Reports whether the limits are in range (what a sane collector can mean). */
  public boolean valid() {
    return ratio >= 0
        && ratio <= 1
        && minRetriesPerSecond >= 0
        && minRetriesPerSecond <= MAX_MIN_RETRIES_PER_SECOND;
  }
}
