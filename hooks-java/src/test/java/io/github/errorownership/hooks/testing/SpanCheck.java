// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.errorownership.hooks.Vectors;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.sdk.trace.data.SpanData;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** Compares the hooks' attributes on spans with a vector's want. */
public final class SpanCheck {
  public static final List<String> CLIENT_KEYS =
      List.of(
          "error_ownership.retry.attempt",
          "http.request.resend_count",
          "error_ownership.claim.received",
          "error_ownership.retry.decision");
  public static final List<String> SERVER_KEYS =
      List.of("error_ownership.claim.sent", "error_ownership.claim.reason");

  private SpanCheck() {}

  public static List<SpanData> ofKind(List<SpanData> spans, SpanKind kind) {
    List<SpanData> out = new ArrayList<>();
    for (SpanData s : spans) {
      if (s.getKind() == kind) {
        out.add(s);
      }
    }
    out.sort(Comparator.comparingLong(SpanData::getStartEpochNanos));
    return out;
  }

  /**
   * The hooks' attributes on span (those named in keys, and any other error_ownership.* one) are
   * exactly want's, each was set once (the spans come from {@link SetOnce#wrap}; a second set fails
   * even with the same value), and the span dropped none.
   */
  public static void check(
      String what, SpanData span, Map<String, Object> want, List<String> keys) {
    Map<String, Object> got = new TreeMap<>();
    span.getAttributes()
        .forEach(
            (k, v) -> {
              if (keys.contains(k.getKey()) || k.getKey().startsWith("error_ownership.")) {
                got.put(k.getKey(), v);
              }
            });
    Map<String, Object> w = new TreeMap<>();
    want.forEach((k, v) -> w.put(k, Vectors.plain(v)));
    assertEquals(w, got, what + ": the hooks' attributes");
    Map<String, Integer> sets = SetOnce.sets(span);
    sets.values().removeIf(n -> n == 1);
    assertEquals(Map.of(), sets, what + ": attributes set more than once on " + span.getName());
    assertEquals(
        span.getAttributes().size(),
        span.getTotalAttributeCount(),
        what + ": dropped attributes on " + span.getName());
  }

  public static AttributeKey<String> key(String k) {
    return AttributeKey.stringKey(k);
  }
}
