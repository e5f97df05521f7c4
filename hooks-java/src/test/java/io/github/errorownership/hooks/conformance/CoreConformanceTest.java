// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.errorownership.hooks.BudgetLimits;
import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.Mode;
import io.github.errorownership.hooks.Outcome;
import io.github.errorownership.hooks.RetryBudget;
import io.github.errorownership.hooks.RetryDecision;
import io.github.errorownership.hooks.Vectors;
import io.github.errorownership.hooks.Verdict;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** claim.json, retry.json, budget.json, claim_values.json. */
class CoreConformanceTest {
  static Stream<Arguments> claim() {
    return Vectors.cases("claim.json", "cases");
  }

  static Stream<Arguments> retry() {
    return Vectors.cases("retry.json", "cases");
  }

  static Stream<Arguments> budget() {
    return Vectors.cases("budget.json", "cases");
  }

  static Stream<Arguments> claimValues() {
    return Vectors.cases("claim_values.json", "cases");
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource
  void claim(String name, Map<String, Object> c) {
    Ledger ledger = Ledger.create();
    for (Object o : Vectors.list(c, "calls")) {
      String peer = Vectors.str(o, "peer_service");
      int call = ledger.begin(peer);
      if (Vectors.bool(o, "in_flight")) {
        continue;
      }
      Claim received = Claim.parse(Vectors.str(o, "received"));
      String d = Vectors.str(o, "decision");
      ledger.end(
          call,
          new Outcome(
              peer,
              "",
              Vectors.bool(o, "failed"),
              received,
              RetryDecision.parse(d),
              Vectors.bool(o, "cut_short")));
    }
    Map<String, Object> modes = Vectors.map(c, "modes");
    Verdict v =
        ledger.decide(
            (peer, op) ->
                Mode.parse(modes.containsKey(peer) ? (String) modes.get(peer) : "unknown"),
            Vectors.bool(c, "timed_out"));
    Map<String, Object> want = Vectors.map(c, "want");
    assertEquals(want.get("claim"), v.claim().wireName(), "claim");
    assertEquals(want.get("reason"), v.reason().wireName(), "reason");
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource
  void retry(String name, Map<String, Object> c) {
    String kind = Vectors.str(c, "budget");
    RetryBudget budget = null;
    if (!kind.equals("none")) {
      budget = RetryBudget.create(new BudgetLimits(0, 0));
      if (kind.equals("tokens")) {
        budget = RetryBudget.create(new BudgetLimits(1, 0));
        budget.deposit();
      }
      assertEquals(kind.equals("tokens") ? 1 : 0, budget.available());
    }
    long before = budget == null ? 0 : budget.available();
    RetryDecision d =
        RetryDecision.decide(
            Claim.parse(Vectors.str(c, "received")),
            Vectors.bool(c, "has_policy"),
            Vectors.bool(c, "attempts_left"),
            budget);
    assertEquals(Vectors.str(c, "want"), d.wireName());
    if (budget != null) {
      assertEquals(Vectors.bool(c, "withdrawn"), budget.available() == before - 1, "withdrawn");
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource
  void budget(String name, Map<String, Object> c) {
    AtomicLong now = new AtomicLong(1_000_000_000L);
    long start = now.get();
    RetryBudget.Builder b =
        RetryBudget.builder()
            .setLimits(Vectors.limits(Vectors.map(c, "limits")))
            .setNanoClock(now::get);
    if (c.containsKey("window_ms")) {
      b.setWindow(Duration.ofMillis(Vectors.lng(c, "window_ms", 10_000)));
    }
    RetryBudget budget = b.build();
    int i = 0;
    for (Object s : Vectors.list(c, "steps")) {
      i++;
      now.set(start + Vectors.lng(s, "at_ms", 0) * 1_000_000L);
      String op = Vectors.str(s, "op");
      long times = Vectors.lng(s, "times", 1);
      switch (op) {
        case "deposit" -> {
          for (long k = 0; k < times; k++) {
            budget.deposit();
          }
        }
        case "withdraw" -> {
          for (long k = 0; k < times; k++) {
            assertEquals(
                Vectors.bool(s, "want"), budget.tryWithdraw(), "step " + i + " withdraw " + k);
          }
        }
        case "available" ->
            assertEquals(
                Vectors.lng(s, "want", -1), budget.available(), "step " + i + " available");
        case "set_limits" -> budget.setLimits(Vectors.limits(s));
        default -> throw new AssertionError("unknown op " + op);
      }
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource
  void claimValues(String name, Map<String, Object> c) {
    List<String> values = new ArrayList<>();
    for (Object v : Vectors.list(c, "values")) {
      values.add((String) v);
    }
    assertEquals(Vectors.str(c, "want"), Claim.parse(values).wireName());
  }
}
