// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.errorownership.hooks.internal.RetrySettings;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class RetryBudgetTest {
  @Test
  void concurrentWithdrawalsNeverOverdraw() throws Exception {
    RetryBudget b = RetryBudget.create(new BudgetLimits(0.5, 0));
    for (int i = 0; i < 1000; i++) {
      b.deposit();
    }
    AtomicInteger granted = new AtomicInteger();
    CountDownLatch go = new CountDownLatch(1);
    List<Thread> threads = new ArrayList<>();
    for (int t = 0; t < 8; t++) {
      Thread th =
          new Thread(
              () -> {
                try {
                  go.await();
                } catch (InterruptedException e) {
                  return;
                }
                for (int i = 0; i < 200; i++) {
                  if (b.tryWithdraw()) {
                    granted.incrementAndGet();
                  }
                }
              });
      th.start();
      threads.add(th);
    }
    go.countDown();
    for (Thread th : threads) {
      th.join();
    }
    assertTrue(granted.get() <= 500, "granted " + granted.get());
    assertEquals(500 - granted.get(), b.available());
  }

  @Test
  void depositsExpireASliceAtATime() {
    AtomicLong now = new AtomicLong();
    RetryBudget b =
        RetryBudget.builder()
            .setLimits(new BudgetLimits(1, 0))
            .setWindow(Duration.ofSeconds(1))
            .setNanoClock(now::get)
            .build();
    b.deposit();
    now.set(Duration.ofMillis(950).toNanos());
    assertEquals(1, b.available());
    now.set(Duration.ofSeconds(1).toNanos());
    assertEquals(0, b.available());
  }

  @Test
  void backoffIsJitteredWithinHalfToFull() {
    RetrySettings s =
        new RetrySettings(null, null, 3, Duration.ofMillis(100), Duration.ofSeconds(1), null);
    long[][] ceil = {{1, 100}, {2, 200}, {4, 800}, {5, 1000}, {30, 1000}};
    for (long[] c : ceil) {
      long max = Duration.ofMillis(c[1]).toNanos();
      for (int i = 0; i < 100; i++) {
        long d = s.backoffNanos((int) c[0]);
        assertTrue(d >= max / 2 && d <= max, "retry " + c[0] + ": " + d);
      }
    }
  }

  @Test
  void budgetsArePerPeerThenShareAnOverflow() {
    RetrySettings s = new RetrySettings(null, null, 3, Duration.ZERO, Duration.ZERO, null);
    RetryBudget a = s.budgetFor("a");
    assertTrue(a != s.budgetFor("b") && a == s.budgetFor("a"));
    for (int i = 0; i < RetrySettings.MAX_PEERS + 10; i++) {
      s.budgetFor("peer" + i);
    }
    assertTrue(s.budgetFor("new1") == s.budgetFor("new2"), "overflow shared");
    RetryBudget shared = RetryBudget.create();
    RetrySettings t = new RetrySettings(null, shared, 3, Duration.ZERO, Duration.ZERO, null);
    assertTrue(t.budgetFor("x") == shared);
  }

  @Test
  void limitsRefreshFromTheHintsOnTheFailurePath() {
    HintSource hints =
        new HintSource() {
          @Override
          public Mode mode(String operation, String peer, String peerOperation) {
            return Mode.UNKNOWN;
          }

          @Override
          public BudgetLimits budgetLimits() {
            return new BudgetLimits(0.5, 1);
          }
        };
    RetrySettings s = new RetrySettings(hints, null, 3, Duration.ZERO, Duration.ZERO, null);
    RetryBudget b = s.budgetFor("a");
    assertEquals(new BudgetLimits(0.5, 1), b.limits());
    b.setLimits(BudgetLimits.defaults());
    s.refresh(b);
    assertEquals(new BudgetLimits(0.5, 1), b.limits());
  }
}
