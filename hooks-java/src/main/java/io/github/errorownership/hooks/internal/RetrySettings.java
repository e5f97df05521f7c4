// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.internal;

import io.github.errorownership.hooks.BudgetLimits;
import io.github.errorownership.hooks.HintSource;
import io.github.errorownership.hooks.RetryBudget;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Tracer;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The client hooks' shared retry settings and per-peer budgets. Internal: not part of the API, may
 * change without notice.
 */
public final class RetrySettings {
  /** Attempts per call, the first included. */
  public static final int DEFAULT_MAX_ATTEMPTS = 3;

  /** The first retry's backoff ceiling. */
  public static final Duration DEFAULT_INITIAL_BACKOFF = Duration.ofMillis(50);

  /** The largest backoff ceiling. */
  public static final Duration DEFAULT_MAX_BACKOFF = Duration.ofSeconds(1);

  /** Peers with a budget of their own; the others share one overflow budget. */
  public static final int MAX_PEERS = 256;

  private static final String INSTRUMENTATION = "io.github.errorownership.hooks";

  public final HintSource hints;
  public final RetryBudget shared;
  public final int maxAttempts;
  public final long initialBackoffNanos;
  public final long maxBackoffNanos;

  /** The tracer that makes one CLIENT span per attempt, or null. */
  public final Tracer tracer;

  public final OpenTelemetry openTelemetry;

  private final AtomicReference<Map<String, RetryBudget>> peers = new AtomicReference<>(Map.of());
  private RetryBudget overflow;

  public RetrySettings(
      HintSource hints,
      RetryBudget shared,
      int maxAttempts,
      Duration initialBackoff,
      Duration maxBackoff,
      OpenTelemetry openTelemetry) {
    this.hints = hints;
    this.shared = shared;
    this.maxAttempts = Math.max(1, maxAttempts);
    this.initialBackoffNanos = Math.max(0, initialBackoff.toNanos());
    this.maxBackoffNanos = Math.max(0, maxBackoff.toNanos());
    this.openTelemetry = openTelemetry;
    this.tracer = openTelemetry == null ? null : openTelemetry.getTracer(INSTRUMENTATION, "0.1.0");
  }

  /** Returns the budget for {@code peer}: the shared one if set, else the peer's own. */
  public RetryBudget budgetFor(String peer) {
    if (shared != null) {
      return shared;
    }
    RetryBudget b = peers.get().get(peer);
    if (b != null) {
      return b;
    }
    synchronized (this) {
      Map<String, RetryBudget> old = peers.get();
      b = old.get(peer);
      if (b != null) {
        return b;
      }
      if (old.size() >= MAX_PEERS) {
        if (overflow == null) {
          overflow = RetryBudget.create(limits());
        }
        return overflow;
      }
      Map<String, RetryBudget> m = new HashMap<>(old);
      b = RetryBudget.create(limits());
      m.put(peer, b);
      peers.set(Map.copyOf(m));
      return b;
    }
  }

  /** Refreshes a per-peer budget's limits from the hints (on the failure path). */
  public void refresh(RetryBudget b) {
    if (hints != null && b != shared) {
      BudgetLimits l = safeLimits();
      if (!l.equals(b.limits())) {
        b.setLimits(l);
      }
    }
  }

  private BudgetLimits limits() {
    return hints == null ? BudgetLimits.defaults() : safeLimits();
  }

  private BudgetLimits safeLimits() {
    try {
      BudgetLimits l = hints.budgetLimits();
      return l == null ? BudgetLimits.defaults() : l;
    } catch (RuntimeException e) {
      return BudgetLimits.defaults();
    }
  }

  /** Returns the wait before retry {@code n}: random in [d/2, d], d = min(max, initial·2^(n−1)). */
  public long backoffNanos(int n) {
    long d = initialBackoffNanos;
    for (int i = 1; i < n && d < maxBackoffNanos; i++) {
      d *= 2;
    }
    d = Math.min(d, maxBackoffNanos);
    if (d <= 0) {
      return 0;
    }
    long half = d / 2;
    return half + ThreadLocalRandom.current().nextLong(d - half + 1);
  }

  /** Reports whether a wait of {@code delay} ends before {@code deadlineNanos} (0: none). */
  public static boolean fits(long deadlineNanos, long delay) {
    return deadlineNanos == 0 || deadlineNanos - System.nanoTime() > delay;
  }
}
