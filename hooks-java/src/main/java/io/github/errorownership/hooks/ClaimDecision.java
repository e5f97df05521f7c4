// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

import java.util.List;

/** Decides what a server tells its caller about an error it returns (docs/design.md §4.2). */
public final class ClaimDecision {
  private static final Verdict OWN = new Verdict(Claim.CLAIMED, Reason.OWN);
  private static final Verdict COINCIDENTAL = new Verdict(Claim.CLAIMED, Reason.COINCIDENTAL);
  private static final Verdict PASSED_UP = new Verdict(Claim.CLAIMED, Reason.PROPAGATED);
  private static final Verdict PROPAGATED = new Verdict(Claim.UNCLAIMED, Reason.PROPAGATED);
  private static final Verdict MISSING =
      new Verdict(Claim.UNCLAIMED, Reason.MISSING_DOWNSTREAM_CLAIM);

  private ClaimDecision() {}

  /**
   * Returns the claim for a failed request.
   *
   * @param outcomes the request's outbound logical calls
   * @param modes which edges are fail-open; {@code null} knows nothing (every edge unknown)
   * @param timedOut the request gave up waiting (deadline passed, answered with a timeout)
   */
  public static Verdict decide(List<Outcome> outcomes, ModeFunction modes, boolean timedOut) {
    if (timedOut) {
      for (Outcome o : outcomes) {
        if (o.inFlight()) {
          return PROPAGATED;
        }
      }
    }
    int failed = 0;
    int blocking = 0;
    int missing = 0;
    int noPolicy = 0;
    for (Outcome o : outcomes) {
      if (!o.failed()) {
        continue;
      }
      failed++;
      if (modes != null && modes.mode(o.peerService(), o.peerOperation()) == Mode.FAIL_OPEN) {
        continue;
      }
      blocking++;
      if (o.received() == Claim.MISSING) {
        missing++;
      }
      if (o.decision() == RetryDecision.NO_POLICY && o.received() != Claim.UNCLAIMED) {
        noPolicy++;
      }
    }
    if (failed == 0) {
      return OWN;
    }
    if (blocking == 0) {
      return COINCIDENTAL;
    }
    if (noPolicy == blocking) {
      return PASSED_UP;
    }
    if (missing == blocking) {
      return MISSING;
    }
    return PROPAGATED;
  }
}
