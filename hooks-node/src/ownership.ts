// SPDX-License-Identifier: Apache-2.0

/**
 * The shared vocabulary of error ownership (docs/design.md §3): wire names,
 * span attribute names, the spellings of claims, reasons, retry decisions and
 * edge modes, and the ownership hints' format with the retry-budget defaults.
 * The names and values are generated from conformance/vocabulary.yaml into
 * vocabulary.ts; what reads them is in values.ts. This module publishes both,
 * as the Go package `ownership` does, name for name.
 */

export {
  HTTP_CLAIM_HEADER,
  GRPC_CLAIM_KEY,
  GRPC_PUSHBACK_KEY,
  HTTP_RETRY_ATTEMPT_HEADER,
  GRPC_PREVIOUS_ATTEMPTS_KEY,
  ATTR_CLAIM,
  ATTR_CLAIM_REASON,
  ATTR_CLAIM_RECEIVED,
  ATTR_RETRY_DECISION,
  ATTR_RETRY_ATTEMPT,
  ATTR_HTTP_RESEND_COUNT,
  Claim,
  Reason,
  RetryDecision,
  Mode,
  isSuppressed,
  MAX_CLAIM_VALUE_BYTES,
  HINTS_VERSION,
  HINTS_PATH,
  DEFAULT_RETRY_RATIO,
  DEFAULT_MIN_RETRIES_PER_SECOND,
  MAX_MIN_RETRIES_PER_SECOND,
} from './vocabulary';
export {
  parseClaim,
  claimOfValues,
  parseReason,
  parseRetryDecision,
  parseMode,
  RetryBudgetLimits,
  defaultRetryBudget,
  HintEdge,
  Hints,
  decodeHints,
} from './values';
