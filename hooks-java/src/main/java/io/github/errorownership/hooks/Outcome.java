// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

/**
 * The final outcome of one outbound logical call: the first attempt and its retries.
 *
 * @param peerService names the callee (its service name or address)
 * @param peerOperation the callee's operation, {@code ""} when not known
 * @param failed the last attempt failed with a server fault or never got an answer
 * @param received the claim on the last attempt's error response
 * @param decision the retry decision taken after the last attempt
 * @param inFlight the request stopped waiting for the call
 */
public record Outcome(
    String peerService,
    String peerOperation,
    boolean failed,
    Claim received,
    RetryDecision decision,
    boolean inFlight) {

  /** Normalises nulls. */
  public Outcome {
    peerService = peerService == null ? "" : peerService;
    peerOperation = peerOperation == null ? "" : peerOperation;
    received = received == null ? Claim.MISSING : received;
    decision = decision == null ? RetryDecision.NONE : decision;
  }

  /** Returns the outcome of a call to {@code peer} that succeeded. */
  public static Outcome succeeded(String peer, String peerOperation) {
    return new Outcome(peer, peerOperation, false, Claim.MISSING, RetryDecision.NONE, false);
  }

  /** Returns the outcome of a call to {@code peer} that failed. */
  public static Outcome failed(
      String peer, String peerOperation, Claim received, RetryDecision decision) {
    return new Outcome(peer, peerOperation, true, received, decision, false);
  }

  /** Returns the outcome of a call still in flight. */
  public static Outcome inFlight(String peer) {
    return new Outcome(peer, "", false, Claim.MISSING, RetryDecision.NONE, true);
  }

  /** Returns a copy marked in flight. */
  public Outcome withInFlight() {
    return new Outcome(peerService, peerOperation, failed, received, decision, true);
  }
}
