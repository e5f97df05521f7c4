// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.internal;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.HintSource;
import io.github.errorownership.hooks.Mode;
import io.github.errorownership.hooks.ModeFunction;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.Verdict;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;

/** What the server hooks (servlet, gRPC) share. Internal: not part of the API. */
public final class ServerRules {
  private static final AttributeKey<String> CLAIM =
      AttributeKey.stringKey(OwnershipNames.ATTR_CLAIM);
  private static final AttributeKey<String> REASON =
      AttributeKey.stringKey(OwnershipNames.ATTR_CLAIM_REASON);

  private ServerRules() {}

  /**
   * Returns the modes of the edges from {@code operation}, as {@code hints} tell them, or null
   * (every edge unknown) without hints. A hint source that throws, or answers null, tells unknown:
   * the hooks never fail a request because of it.
   */
  public static ModeFunction modes(HintSource hints, String operation) {
    if (hints == null) {
      return null;
    }
    return (peer, peerOp) -> {
      try {
        Mode m = hints.mode(operation, peer, peerOp);
        return m == null ? Mode.UNKNOWN : m;
      } catch (RuntimeException e) {
        return Mode.UNKNOWN;
      }
    };
  }

  /**
   * Sets {@code error_ownership.claim.sent} on the server span: the claim the handler sent itself.
   */
  public static void annotate(Span span, Claim own) {
    if (span.isRecording()) {
      span.setAttribute(CLAIM, own.wireName());
    }
  }

  /**
   * Sets {@code error_ownership.claim.sent} and {@code error_ownership.claim.reason} on the server
   * span.
   */
  public static void annotate(Span span, Verdict v) {
    if (span.isRecording()) {
      span.setAttribute(CLAIM, v.claim().wireName());
      span.setAttribute(REASON, v.reason().wireName());
    }
  }
}
