// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

/** Why a service sent the claim it sent ({@code error_ownership.claim.reason}). */
public enum Reason {
  /** The request did not fail, or nothing is known. */
  NONE(OwnershipNames.REASON_NONE),
  /** No outbound call failed: the service originated the error. */
  OWN(OwnershipNames.REASON_OWN),
  /** A call on a fail-close (or not yet known) edge failed. */
  PROPAGATED(OwnershipNames.REASON_PROPAGATED),
  /** Calls failed, but only on fail-open edges: the service failed for its own reason. */
  COINCIDENTAL(OwnershipNames.REASON_COINCIDENTAL),
  /** Propagated, and the failed callee sent no claim: this is the first hop that can unclaim. */
  MISSING_DOWNSTREAM_CLAIM(OwnershipNames.REASON_MISSING_DOWNSTREAM_CLAIM);

  private final String wire;

  Reason(String wire) {
    this.wire = wire;
  }

  /** Returns the attribute spelling, {@code ""} for {@link #NONE}. */
  public String wireName() {
    return wire;
  }

  @Override
  public String toString() {
    return wire;
  }

  /** Reads an attribute value; unknown values are {@link #NONE}. */
  public static Reason parse(String s) {
    for (Reason r : values()) {
      if (!r.wire.isEmpty() && r.wire.equals(s)) {
        return r;
      }
    }
    return NONE;
  }
}
