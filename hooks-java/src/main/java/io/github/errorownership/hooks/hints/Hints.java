// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.hints;

import static io.github.errorownership.hooks.OwnershipNames.EDGE_FIELD_CONFIDENCE;
import static io.github.errorownership.hooks.OwnershipNames.EDGE_FIELD_MODE;
import static io.github.errorownership.hooks.OwnershipNames.EDGE_FIELD_OPERATION;
import static io.github.errorownership.hooks.OwnershipNames.EDGE_FIELD_PEER_ADDRESSES;
import static io.github.errorownership.hooks.OwnershipNames.EDGE_FIELD_PEER_OPERATION;
import static io.github.errorownership.hooks.OwnershipNames.EDGE_FIELD_PEER_SERVICE;
import static io.github.errorownership.hooks.OwnershipNames.EDGE_FIELD_SAMPLES;
import static io.github.errorownership.hooks.OwnershipNames.HINTS_FIELD_EDGES;
import static io.github.errorownership.hooks.OwnershipNames.HINTS_FIELD_GENERATED_AT;
import static io.github.errorownership.hooks.OwnershipNames.HINTS_FIELD_RETRY_BUDGET;
import static io.github.errorownership.hooks.OwnershipNames.HINTS_FIELD_SERVICE;
import static io.github.errorownership.hooks.OwnershipNames.HINTS_FIELD_TTL_SECONDS;
import static io.github.errorownership.hooks.OwnershipNames.HINTS_FIELD_VERSION;
import static io.github.errorownership.hooks.OwnershipNames.RETRY_BUDGET_FIELD_MIN_RETRIES_PER_SECOND;
import static io.github.errorownership.hooks.OwnershipNames.RETRY_BUDGET_FIELD_RATIO;

import io.github.errorownership.hooks.BudgetLimits;
import io.github.errorownership.hooks.Mode;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.internal.Json;
import java.time.OffsetDateTime;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * A hints document (docs/design.md §9.3), as a collector serves it at {@code
 * /v1/hints?service=NAME}.
 *
 * @param version the format version, 1
 * @param service the service the hints are for ({@code ""}: the one asked for)
 * @param ttlSeconds how long the hints stay fresh (0: not said)
 * @param retryBudget the retry budget, or {@code null} for the defaults
 * @param edges the learned edges; edges not listed are unknown
 */
public record Hints(
    int version, String service, long ttlSeconds, BudgetLimits retryBudget, List<HintEdge> edges) {

  /** Returns the hints' budget, or the defaults. */
  public BudgetLimits budget() {
    return retryBudget == null ? BudgetLimits.defaults() : retryBudget;
  }

  /**
   * Parses and validates a document for {@code service}: one JSON object of version 1 for that
   * service (or none named), a ttl ≥ 0, a budget in range, fields of the right types. Fields a
   * newer collector adds are ignored; an unknown mode reads as unknown.
   *
   * @throws IllegalArgumentException if the document is not one a sane collector can mean
   */
  public static Hints parse(String body, String service) {
    Object v = Json.parse(body);
    if (!(v instanceof Map)) {
      throw new IllegalArgumentException("not a JSON object");
    }
    Map<?, ?> m = (Map<?, ?>) v;
    long version = integer(m, HINTS_FIELD_VERSION, 0);
    if (version != OwnershipNames.HINTS_VERSION) {
      throw new IllegalArgumentException("version " + version + ", want 1");
    }
    String svc = string(m, HINTS_FIELD_SERVICE);
    if (!svc.isEmpty() && !svc.equals(service)) {
      throw new IllegalArgumentException("hints for another service");
    }
    Object gen = m.get(HINTS_FIELD_GENERATED_AT);
    if (gen != null) {
      if (!(gen instanceof String string)) {
        throw new IllegalArgumentException("generated_at is not a string");
      }
      try {
        OffsetDateTime.parse(string);
      } catch (DateTimeParseException e) {
        throw new IllegalArgumentException("generated_at is not a time");
      }
    }
    long ttl = integer(m, HINTS_FIELD_TTL_SECONDS, 0);
    if (ttl < 0) {
      throw new IllegalArgumentException("negative ttl_seconds");
    }
    BudgetLimits budget = null;
    Object rb = m.get(HINTS_FIELD_RETRY_BUDGET);
    if (rb != null) {
      if (!(rb instanceof Map)) {
        throw new IllegalArgumentException("retry_budget is not an object");
      }
      budget =
          new BudgetLimits(
              number((Map<?, ?>) rb, RETRY_BUDGET_FIELD_RATIO),
              number((Map<?, ?>) rb, RETRY_BUDGET_FIELD_MIN_RETRIES_PER_SECOND));
      if (!budget.valid()) {
        throw new IllegalArgumentException("retry budget out of range");
      }
    }
    List<HintEdge> edges = new ArrayList<>();
    Object es = m.get(HINTS_FIELD_EDGES);
    if (es != null) {
      if (!(es instanceof List)) {
        throw new IllegalArgumentException("edges is not an array");
      }
      for (Object e : (List<?>) es) {
        if (!(e instanceof Map)) {
          throw new IllegalArgumentException("an edge is not an object");
        }
        Map<?, ?> em = (Map<?, ?>) e;
        List<String> addrs = new ArrayList<>();
        Object as = em.get(EDGE_FIELD_PEER_ADDRESSES);
        if (as != null) {
          if (!(as instanceof List)) {
            throw new IllegalArgumentException("peer_addresses is not an array");
          }
          for (Object a : (List<?>) as) {
            if (!(a instanceof String string)) {
              throw new IllegalArgumentException("an address is not a string");
            }
            addrs.add(string);
          }
        }
        edges.add(
            new HintEdge(
                string(em, EDGE_FIELD_OPERATION),
                string(em, EDGE_FIELD_PEER_SERVICE),
                string(em, EDGE_FIELD_PEER_OPERATION),
                Collections.unmodifiableList(addrs),
                Mode.parse(string(em, EDGE_FIELD_MODE)),
                number(em, EDGE_FIELD_CONFIDENCE),
                integer(em, EDGE_FIELD_SAMPLES, 0)));
      }
    }
    return new Hints((int) version, svc, ttl, budget, Collections.unmodifiableList(edges));
  }

  private static String string(Map<?, ?> m, String k) {
    Object v = m.get(k);
    if (v == null) {
      return "";
    }
    if (!(v instanceof String string)) {
      throw new IllegalArgumentException(k + " is not a string");
    }
    return string;
  }

  private static long integer(Map<?, ?> m, String k, long dflt) {
    Object v = m.get(k);
    if (v == null) {
      return dflt;
    }
    if (!(v instanceof Json.Num num)) {
      throw new IllegalArgumentException(k + " is not a number");
    }
    Long l = num.asLong();
    if (l == null) {
      throw new IllegalArgumentException(k + " is not an integer in range");
    }
    return l;
  }

  private static double number(Map<?, ?> m, String k) {
    Object v = m.get(k);
    if (v == null) {
      return 0;
    }
    if (!(v instanceof Json.Num num)) {
      throw new IllegalArgumentException(k + " is not a number");
    }
    double d = num.value;
    if (Double.isInfinite(d) || Double.isNaN(d)) {
      throw new IllegalArgumentException(k + " is out of range");
    }
    return d;
  }
}
