// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

import java.util.List;
import java.util.Locale;

/** What a callee says about an error it returns. */
public enum Claim {
  /** No claim, or one that cannot be read: never mistaken for {@link #CLAIMED}. */
  MISSING(OwnershipNames.CLAIM_MISSING),
  /** The callee originated the error: a caller may retry it. */
  CLAIMED(OwnershipNames.CLAIM_CLAIMED),
  /** The callee only passed a dependency's failure on: a caller must not retry it. */
  UNCLAIMED(OwnershipNames.CLAIM_UNCLAIMED);

  /** The longest claim value read at all; longer values are {@link #MISSING}. */
  public static final int MAX_VALUE_LENGTH = OwnershipNames.MAX_CLAIM_VALUE_LENGTH;

  private final String wire;

  Claim(String wire) {
    this.wire = wire;
  }

  /** Returns the wire spelling: {@code claimed}, {@code unclaimed} or {@code missing}. */
  public String wireName() {
    return wire;
  }

  @Override
  public String toString() {
    return wire;
  }

  /**
   * Reads one header, trailer or attribute value: {@code claimed} or {@code unclaimed} in any ASCII
   * letter case; anything else, including {@code missing} and oversized values, is {@link
   * #MISSING}.
   */
  public static Claim parse(String s) {
    if (s == null || s.length() > "unclaimed".length()) {
      return MISSING;
    }
    if (asciiEqualFold(s, "claimed")) {
      return CLAIMED;
    }
    if (asciiEqualFold(s, "unclaimed")) {
      return UNCLAIMED;
    }
    return MISSING;
  }

  /**
   * Reads the values of a header or trailer as the callee sent them: exactly one value, at most
   * {@link #MAX_VALUE_LENGTH} characters, else {@link #MISSING}.
   */
  public static Claim parse(List<String> values) {
    if (values == null || values.size() != 1) {
      return MISSING;
    }
    String v = values.get(0);
    if (v == null || v.length() > MAX_VALUE_LENGTH) {
      return MISSING;
    }
    return parse(v);
  }

  static boolean asciiEqualFold(String s, String lower) {
    if (s.length() != lower.length()) {
      return false;
    }
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c >= 'A' && c <= 'Z') {
        c = (char) (c + ('a' - 'A'));
      }
      if (c != lower.charAt(i)) {
        return false;
      }
    }
    return true;
  }

  /** Reads a wire spelling, {@code missing} included; unknown values are {@link #MISSING}. */
  static Claim fromWireName(String s) {
    return s == null ? MISSING : parse(s.toLowerCase(Locale.ROOT));
  }
}
