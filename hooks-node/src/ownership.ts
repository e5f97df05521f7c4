// SPDX-License-Identifier: Apache-2.0

/**
 * The shared vocabulary of error ownership (docs/design.md §3): wire names,
 * span attribute names, the spellings of claims, reasons, retry decisions and
 * edge modes, and the ownership hints' format with the retry-budget defaults.
 * It mirrors the Go package `ownership` name for name.
 */

/** The HTTP response header that carries a claim. */
export const HTTP_CLAIM_HEADER = 'Error-Claim';
/** The gRPC trailer key that carries a claim. */
export const GRPC_CLAIM_KEY = 'error-claim';
/** The gRPC trailer that, set to "-1", tells a plain gRPC retry policy (gRFC A6) not to retry. */
export const GRPC_PUSHBACK_KEY = 'grpc-retry-pushback-ms';
/** The HTTP request header carrying the attempt number on retries (1 for the first retry). */
export const HTTP_RETRY_ATTEMPT_HEADER = 'Retry-Attempt';
/** gRPC's standard request metadata key for the number of earlier attempts. */
export const GRPC_PREVIOUS_ATTEMPTS_KEY = 'grpc-previous-rpc-attempts';

/** Server span: the claim the service sent upstream. */
export const ATTR_CLAIM = 'error_ownership.claim.sent';
/** Server span: the reason for that claim. */
export const ATTR_CLAIM_REASON = 'error_ownership.claim.reason';
/** Client span: the claim the callee sent. */
export const ATTR_CLAIM_RECEIVED = 'error_ownership.claim.received';
/** Client span: the retry decision taken after the attempt. */
export const ATTR_RETRY_DECISION = 'error_ownership.retry.decision';
/** Client span: the attempt number, 0 first. */
export const ATTR_RETRY_ATTEMPT = 'error_ownership.retry.attempt';
/** The semantic convention for the ordinal of an HTTP resend; absent on the first attempt. */
export const ATTR_HTTP_RESEND_COUNT = 'http.request.resend_count';

/** What a callee says about an error it returns. "missing" is the safe reading of anything else. */
export type Claim = 'claimed' | 'unclaimed' | 'missing';
/** Why a service sent the claim it sent; '' when nothing is known. */
export type Reason = '' | 'own' | 'propagated' | 'coincidental' | 'missing_downstream_claim';
/** What a caller did after a failed attempt; '' when not recorded. */
export type RetryDecision =
  | ''
  | 'retried'
  | 'suppressed_unclaimed'
  | 'suppressed_budget'
  | 'no_policy'
  | 'exhausted';
/** What the dependency analysis learned about an edge. "unknown" is treated as fail-close. */
export type Mode = 'unknown' | 'fail_close' | 'fail_open';

const REASONS: readonly Reason[] = ['own', 'propagated', 'coincidental', 'missing_downstream_claim'];
const DECISIONS: readonly RetryDecision[] = [
  'retried',
  'suppressed_unclaimed',
  'suppressed_budget',
  'no_policy',
  'exhausted',
];

/** The longest claim value looked at: len("unclaimed"). */
const MAX_CLAIM_LEN = 9;
/** A header or trailer value longer than this is missing, whatever it says. */
export const MAX_CLAIM_VALUE_BYTES = 64;

/** ASCII-only case folding: no Unicode letter may pass for an ASCII one. */
function equalFoldASCII(s: string, lower: string): boolean {
  if (s.length !== lower.length) return false;
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c >= 65 && c <= 90) c += 32;
    if (c !== lower.charCodeAt(i)) return false;
  }
  return true;
}

/**
 * Reads one header, trailer or attribute value: "claimed" or "unclaimed" in
 * any ASCII letter case; anything else, "missing" and oversized values
 * included, is "missing".
 */
export function parseClaim(s: string): Claim {
  if (typeof s !== 'string' || s.length > MAX_CLAIM_LEN) return 'missing';
  if (equalFoldASCII(s, 'claimed')) return 'claimed';
  if (equalFoldASCII(s, 'unclaimed')) return 'unclaimed';
  return 'missing';
}

/**
 * Reads a claim off the wire from the values a header (or trailer) had, one
 * per field: exactly one value, at most 64 bytes, spelled as parseClaim
 * accepts. Several fields, a comma list or anything else is "missing".
 */
export function claimOfValues(values: readonly (string | Buffer)[] | undefined | null): Claim {
  if (!values || values.length !== 1) return 'missing';
  const v = values[0];
  if (v === undefined || v === null) return 'missing';
  if (v.length > MAX_CLAIM_VALUE_BYTES) return 'missing';
  return parseClaim(typeof v === 'string' ? v : v.toString('latin1'));
}

/** Reads a reason's spelling; unknown values are ''. */
export function parseReason(s: string): Reason {
  return (REASONS as readonly string[]).includes(s) ? (s as Reason) : '';
}

/** Reads a retry decision's spelling; unknown values are ''. */
export function parseRetryDecision(s: string): RetryDecision {
  return (DECISIONS as readonly string[]).includes(s) ? (s as RetryDecision) : '';
}

/** Whether a decision is a retry the hooks held back: the storm prevented. */
export function isSuppressed(d: RetryDecision): boolean {
  return d === 'suppressed_unclaimed' || d === 'suppressed_budget';
}

/** Reads a mode's spelling; anything else is "unknown", the safe reading. */
export function parseMode(s: unknown): Mode {
  return s === 'fail_close' || s === 'fail_open' || s === 'unknown' ? s : 'unknown';
}

/** The hints format version; a document of another version is rejected whole. */
export const HINTS_VERSION = 1;
/** Where a collector serves hints; the service is the query parameter "service". */
export const HINTS_PATH = '/v1/hints';
/** One retry per ten requests. */
export const DEFAULT_RETRY_RATIO = 0.1;
/** Retries a client may always make per second of window, on top of what requests earn. */
export const DEFAULT_MIN_RETRIES_PER_SECOND = 10;
/** The largest retry-budget floor a hints document may announce. */
export const MAX_MIN_RETRIES_PER_SECOND = 1000;

/** A retry budget's limits, as the hints announce them. */
export interface RetryBudgetLimits {
  ratio: number;
  min_retries_per_second: number;
}

/** The default limits: ratio 0.1, floor 10 per second. */
export function defaultRetryBudget(): RetryBudgetLimits {
  return { ratio: DEFAULT_RETRY_RATIO, min_retries_per_second: DEFAULT_MIN_RETRIES_PER_SECOND };
}

/** One learned edge: (service, operation) → (peer_service, peer_operation). */
export interface HintEdge {
  operation: string;
  peer_service: string;
  peer_operation: string;
  peer_addresses?: string[];
  mode: Mode;
  confidence?: number;
  samples?: number;
}

/** The document a collector serves for one service at GET /v1/hints?service=NAME. */
export interface Hints {
  version: number;
  service: string;
  generated_at?: string;
  ttl_seconds: number;
  retry_budget?: RetryBudgetLimits;
  edges: HintEdge[];
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function optString(v: unknown, what: string): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new Error(`${what}: not a string`);
  return v;
}

/**
 * Decodes and validates a hints document for service, as the Go
 * ownership.Hints.Validate does: a wrong version, another service, a negative
 * ttl or a budget out of range rejects the whole document. Unknown fields are
 * ignored; an unknown mode reads as "unknown". Throws on anything else.
 */
export function decodeHints(doc: unknown, service: string): Hints {
  if (!isObject(doc)) throw new Error('hints: not a JSON object');
  const version = doc.version;
  if (version !== HINTS_VERSION) throw new Error(`hints: version ${String(version)}, want ${HINTS_VERSION}`);
  const svc = optString(doc.service, 'service');
  if (svc !== '' && svc !== service) throw new Error(`hints for service ${JSON.stringify(svc)}, want ${JSON.stringify(service)}`);
  let ttl = 0;
  if (doc.ttl_seconds !== undefined && doc.ttl_seconds !== null) {
    if (typeof doc.ttl_seconds !== 'number' || !Number.isInteger(doc.ttl_seconds)) throw new Error('hints: ttl_seconds not an integer');
    ttl = doc.ttl_seconds;
  }
  if (ttl < 0) throw new Error('hints: negative ttl_seconds');
  let budget: RetryBudgetLimits | undefined;
  if (doc.retry_budget !== undefined && doc.retry_budget !== null) {
    const b = doc.retry_budget;
    if (!isObject(b)) throw new Error('hints: retry_budget not an object');
    const ratio = b.ratio ?? 0;
    const floor = b.min_retries_per_second ?? 0;
    if (typeof ratio !== 'number' || typeof floor !== 'number') throw new Error('hints: retry_budget not numbers');
    if (!(ratio >= 0 && ratio <= 1) || !(floor >= 0 && floor <= MAX_MIN_RETRIES_PER_SECOND)) {
      throw new Error(`retry budget out of range: ratio ${ratio} (want 0 to 1), min_retries_per_second ${floor} (want 0 to ${MAX_MIN_RETRIES_PER_SECOND})`);
    }
    budget = { ratio, min_retries_per_second: floor };
  }
  const edges: HintEdge[] = [];
  if (doc.edges !== undefined && doc.edges !== null) {
    if (!Array.isArray(doc.edges)) throw new Error('hints: edges not an array');
    for (const e of doc.edges) {
      if (!isObject(e)) throw new Error('hints: an edge is not an object');
      let addrs: string[] | undefined;
      if (e.peer_addresses !== undefined && e.peer_addresses !== null) {
        if (!Array.isArray(e.peer_addresses) || !e.peer_addresses.every(a => typeof a === 'string')) {
          throw new Error('hints: peer_addresses not strings');
        }
        addrs = e.peer_addresses as string[];
      }
      edges.push({
        operation: optString(e.operation, 'operation'),
        peer_service: optString(e.peer_service, 'peer_service'),
        peer_operation: optString(e.peer_operation, 'peer_operation'),
        peer_addresses: addrs,
        mode: parseMode(e.mode),
        confidence: typeof e.confidence === 'number' ? e.confidence : undefined,
        samples: typeof e.samples === 'number' ? e.samples : undefined,
      });
    }
  }
  return {
    version,
    service: svc,
    generated_at: typeof doc.generated_at === 'string' ? doc.generated_at : undefined,
    ttl_seconds: ttl,
    retry_budget: budget,
    edges,
  };
}
