// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

/**
 * What the dependency analysis learned about an edge. {@link #UNKNOWN} is treated as fail-close.
 */
public enum Mode {
  /** Too few samples, or behaviour between the thresholds: treated as fail-close. */
  UNKNOWN(OwnershipNames.MODE_UNKNOWN),
  /** When the call fails, the request fails. */
  FAIL_CLOSE(OwnershipNames.MODE_FAIL_CLOSE),
  /** The service tolerates the call failing. */
  FAIL_OPEN(OwnershipNames.MODE_FAIL_OPEN);

  private final String wire;

  Mode(String wire) {
    this.wire = wire;
  }

  /** Returns the hints spelling. */
  public String wireName() {
    return wire;
  }

  @Override
  public String toString() {
    return wire;
  }

  /** Reads a hints spelling; anything else is {@link #UNKNOWN}, the safe reading. */
  public static Mode parse(String s) {
    for (Mode m : values()) {
      if (m.wire.equals(s)) {
        return m;
      }
    }
    return UNKNOWN;
  }
}
