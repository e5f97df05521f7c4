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

  /** Every key of keys: the span has it with want's value if want has it, and lacks it if not. */
  public static void check(
      String what, SpanData span, Map<String, Object> want, List<String> keys) {
    for (String k : keys) {
      Object got =
          span.getAttributes().asMap().entrySet().stream()
              .filter(e -> e.getKey().getKey().equals(k))
              .map(Map.Entry::getValue)
              .findFirst()
              .orElse(null);
      Object w = Vectors.plain(want.get(k));
      assertEquals(w, got, what + ": " + k);
    }
  }

  public static AttributeKey<String> key(String k) {
    return AttributeKey.stringKey(k);
  }
}
