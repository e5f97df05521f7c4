// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.LongSupplier;

/**
 * Bounds retries to a share of requests over a sliding window, in the manner of Finagle's
 * RetryBudget: each request deposits ({@link #deposit}), each retry withdraws ({@link
 * #tryWithdraw}), and a retry is allowed only while, over the last window,
 *
 * <pre>retries ≤ ratio × requests + minRetriesPerSecond × window</pre>
 *
 * <p>still holds with it. The window is cut into ten slices; a count made in slice s counts while
 * the current slice is below s + 10. The budget is lock-free: each slice's counts are packed with
 * the slice number in one {@code long} (slice &lt;&lt; 32 | count). {@link #tryWithdraw} takes its
 * token first and gives it back if overdrawn, so concurrent withdrawals never overdraw.
 */
public final class RetryBudget {
  /** How long a deposit counts by default. */
  public static final Duration DEFAULT_WINDOW = Duration.ofSeconds(10);

  private static final int SLICES = 10;
  private static final long MASK = 0xFFFF_FFFFL;

  private final AtomicLong ratioBits = new AtomicLong();
  private final AtomicLong floorBits = new AtomicLong();
  private final long sliceNanos;
  private final double windowSeconds;
  private final LongSupplier nanoClock;
  private final long start;
  // Index 2i: deposits of slot i; 2i+1: withdrawals.
  private final AtomicLongArray slots = new AtomicLongArray(2 * SLICES);

  private RetryBudget(Builder b) {
    long window = Math.max(b.window.toNanos(), Duration.ofMillis(10).toNanos());
    this.sliceNanos = window / SLICES;
    this.windowSeconds = (sliceNanos * SLICES) / 1e9;
    this.nanoClock = b.nanoClock;
    this.start = nanoClock.getAsLong();
    setLimits(b.limits);
  }

  /** Returns a budget with the default limits and window. */
  public static RetryBudget create() {
    return builder().build();
  }

  /** Returns a budget with limits {@code l} and the default window. */
  public static RetryBudget create(BudgetLimits l) {
    return builder().setLimits(l).build();
  }

  /** Returns a new builder. */
  public static Builder builder() {
    return new Builder();
  }

  /** Changes the limits; counts already made stay. Negative or NaN values are taken as 0. */
  public void setLimits(BudgetLimits l) {
    ratioBits.set(Double.doubleToRawLongBits(nonNegative(l.ratio())));
    floorBits.set(Double.doubleToRawLongBits(nonNegative(l.minRetriesPerSecond())));
  }

  /** Returns the current limits. */
  public BudgetLimits limits() {
    return new BudgetLimits(ratio(), floor());
  }

  /** Returns how long a deposit counts. */
  public Duration window() {
    return Duration.ofNanos(sliceNanos * SLICES);
  }

  /** Records one request (a logical call's first attempt, not a retry). */
  public void deposit() {
    int e = epoch();
    bump(2 * (e % SLICES), e);
  }

  /** Takes one retry from the budget and reports whether it was allowed. */
  public boolean tryWithdraw() {
    int e = epoch();
    int i = 2 * (e % SLICES) + 1;
    bump(i, e);
    if (balance(e) >= 0) {
      return true;
    }
    unbump(i, e);
    return false;
  }

  /** Returns how many retries the budget would allow now. */
  public long available() {
    return (long) Math.floor(balance(epoch()));
  }

  private double ratio() {
    return Double.longBitsToDouble(ratioBits.get());
  }

  private double floor() {
    return Double.longBitsToDouble(floorBits.get());
  }

  private double balance(int e) {
    long deposits = 0;
    long withdrawals = 0;
    for (int i = 0; i < SLICES; i++) {
      deposits += count(slots.get(2 * i), e);
      withdrawals += count(slots.get(2 * i + 1), e);
    }
    return ratio() * deposits + floor() * windowSeconds - withdrawals + 1e-9;
  }

  private int epoch() {
    long d = nanoClock.getAsLong() - start;
    if (d < 0) {
      return 0;
    }
    return (int) Math.min(d / sliceNanos, Integer.MAX_VALUE);
  }

  private static long count(long v, int e) {
    if (e - (int) (v >>> 32) >= SLICES) {
      return 0;
    }
    return v & MASK;
  }

  private void bump(int i, int e) {
    while (true) {
      long old = slots.get(i);
      long next;
      if ((int) (old >>> 32) != e) {
        next = ((long) e << 32) | 1;
      } else if ((old & MASK) == MASK) {
        return; // saturated
      } else {
        next = old + 1;
      }
      if (slots.compareAndSet(i, old, next)) {
        return;
      }
    }
  }

  private void unbump(int i, int e) {
    while (true) {
      long old = slots.get(i);
      if ((int) (old >>> 32) != e || (old & MASK) == 0) {
        return;
      }
      if (slots.compareAndSet(i, old, old - 1)) {
        return;
      }
    }
  }

  private static double nonNegative(double f) {
    return f > 0 ? f : 0; // NaN too
  }

  /** Builds a {@link RetryBudget}. */
  public static final class Builder {
    private BudgetLimits limits = BudgetLimits.defaults();
    private Duration window = DEFAULT_WINDOW;
    private LongSupplier nanoClock = System::nanoTime;

    private Builder() {}

    /** Sets the limits (default {@link BudgetLimits#defaults()}). */
    public Builder setLimits(BudgetLimits limits) {
      this.limits = limits;
      return this;
    }

    /** Sets how long a deposit counts (default 10 s); windows under 10 ms are raised to 10 ms. */
    public Builder setWindow(Duration window) {
      this.window = window;
      return this;
    }

    /** Makes the budget read time, in nanoseconds, from {@code nanoClock}: for tests. */
    public Builder setNanoClock(LongSupplier nanoClock) {
      this.nanoClock = nanoClock;
      return this;
    }

    /** Returns the budget. */
    public RetryBudget build() {
      return new RetryBudget(this);
    }
  }
}
