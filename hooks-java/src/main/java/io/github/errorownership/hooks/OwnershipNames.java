// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

/**
 * The wire and span attribute names of error ownership (docs/design.md §3), as the Go package
 * {@code ownership} defines them.
 */
public final class OwnershipNames {
  /** The HTTP response header that carries a {@link Claim}. */
  public static final String HTTP_CLAIM_HEADER = "Error-Claim";
  /** The gRPC response trailer that carries a {@link Claim}. */
  public static final String GRPC_CLAIM_KEY = "error-claim";
  /** The gRPC trailer that, set to {@code -1}, tells a plain gRPC retry policy not to retry. */
  public static final String GRPC_PUSHBACK_KEY = "grpc-retry-pushback-ms";
  /** The HTTP request header with the attempt number, on retries only (1, 2, …). */
  public static final String HTTP_RETRY_ATTEMPT_HEADER = "Retry-Attempt";
  /** gRPC's request metadata key with the number of earlier attempts of a call. */
  public static final String GRPC_PREVIOUS_ATTEMPTS_KEY = "grpc-previous-rpc-attempts";

  /** Server span attribute: the claim the service sent. */
  public static final String ATTR_CLAIM = "error_ownership.claim.sent";
  /** Server span attribute: the reason for that claim. */
  public static final String ATTR_CLAIM_REASON = "error_ownership.claim.reason";
  /** Client span attribute: the claim the callee sent. */
  public static final String ATTR_CLAIM_RECEIVED = "error_ownership.claim.received";
  /** Client span attribute: the retry decision taken after the attempt. */
  public static final String ATTR_RETRY_DECISION = "error_ownership.retry.decision";
  /** Client span attribute: the attempt number, 0 first. */
  public static final String ATTR_RETRY_ATTEMPT = "error_ownership.retry.attempt";
  /** The semantic convention for the ordinal of an HTTP resend; absent on the first attempt. */
  public static final String ATTR_HTTP_RESEND_COUNT = "http.request.resend_count";

  /** Where a collector serves hints; the service is the query parameter {@code service}. */
  public static final String HINTS_PATH = "/v1/hints";
  /** The hints format version. */
  public static final int HINTS_VERSION = 1;

  private OwnershipNames() {}
}
