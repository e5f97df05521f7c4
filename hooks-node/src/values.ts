// SPDX-License-Identifier: Apache-2.0

/**
 * What reads and writes the vocabulary's values: claims off the wire, the
 * spellings of reasons, retry decisions and modes, and the hints document.
 * The names and values themselves are generated (vocabulary.ts).
 */

import {
  Claim,
  DEFAULT_MIN_RETRIES_PER_SECOND,
  DEFAULT_RETRY_RATIO,
  EDGE_FIELD_CONFIDENCE,
  EDGE_FIELD_MODE,
  EDGE_FIELD_OPERATION,
  EDGE_FIELD_PEER_ADDRESSES,
  EDGE_FIELD_PEER_OPERATION,
  EDGE_FIELD_PEER_SERVICE,
  EDGE_FIELD_SAMPLES,
  HINTS_FIELD_EDGES,
  HINTS_FIELD_GENERATED_AT,
  HINTS_FIELD_RETRY_BUDGET,
  HINTS_FIELD_SERVICE,
  HINTS_FIELD_TTL_SECONDS,
  HINTS_FIELD_VERSION,
  HINTS_VERSION,
  HintsField,
  EdgeField,
  RetryBudgetField,
  MAX_CLAIM_VALUE_BYTES,
  MAX_MIN_RETRIES_PER_SECOND,
  MODE_VALUES,
  Mode,
  REASON_VALUES,
  RETRY_BUDGET_FIELD_MIN_RETRIES_PER_SECOND,
  RETRY_BUDGET_FIELD_RATIO,
  RETRY_DECISION_VALUES,
  Reason,
  RetryDecision,
} from './vocabulary';

/** The longest claim value looked at: len("unclaimed"). */
const MAX_CLAIM_LEN = 9;
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
  if (values?.length !== 1) return 'missing';
  const v = values[0];
  if (v === undefined || v === null) return 'missing';
  if (v.length > MAX_CLAIM_VALUE_BYTES) return 'missing';
  return parseClaim(typeof v === 'string' ? v : v.toString('latin1'));
}

/** Reads a reason's spelling; unknown values are ''. */
export function parseReason(s: string): Reason {
  return s !== '' && (REASON_VALUES as readonly string[]).includes(s) ? (s as Reason) : '';
}

/** Reads a retry decision's spelling; unknown values are ''. */
export function parseRetryDecision(s: string): RetryDecision {
  return s !== '' && (RETRY_DECISION_VALUES as readonly string[]).includes(s) ? (s as RetryDecision) : '';
}

/** Reads a mode's spelling; anything else is "unknown", the safe reading. */
export function parseMode(s: unknown): Mode {
  return typeof s === 'string' && (MODE_VALUES as readonly string[]).includes(s) ? (s as Mode) : 'unknown';
}

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
  const version = doc[HINTS_FIELD_VERSION];
  if (version !== HINTS_VERSION) throw new Error(`hints: version ${String(version)}, want ${HINTS_VERSION}`);
  const svc = optString(doc[HINTS_FIELD_SERVICE], 'service');
  if (svc !== '' && svc !== service)
    throw new Error(`hints for service ${JSON.stringify(svc)}, want ${JSON.stringify(service)}`);
  let ttl = 0;
  const ttlSeconds = doc[HINTS_FIELD_TTL_SECONDS];
  if (ttlSeconds !== undefined && ttlSeconds !== null) {
    if (typeof ttlSeconds !== 'number' || !Number.isInteger(ttlSeconds))
      throw new Error('hints: ttl_seconds not an integer');
    ttl = ttlSeconds;
  }
  if (ttl < 0) throw new Error('hints: negative ttl_seconds');
  let budget: RetryBudgetLimits | undefined;
  const b = doc[HINTS_FIELD_RETRY_BUDGET];
  if (b !== undefined && b !== null) {
    if (!isObject(b)) throw new Error('hints: retry_budget not an object');
    const ratio = b[RETRY_BUDGET_FIELD_RATIO] ?? 0;
    const floor = b[RETRY_BUDGET_FIELD_MIN_RETRIES_PER_SECOND] ?? 0;
    if (typeof ratio !== 'number' || typeof floor !== 'number') throw new Error('hints: retry_budget not numbers');
    if (!(ratio >= 0 && ratio <= 1) || !(floor >= 0 && floor <= MAX_MIN_RETRIES_PER_SECOND)) {
      throw new Error(
        `retry budget out of range: ratio ${ratio} (want 0 to 1), min_retries_per_second ${floor} (want 0 to ${MAX_MIN_RETRIES_PER_SECOND})`
      );
    }
    budget = { ratio, min_retries_per_second: floor };
  }
  const edges: HintEdge[] = [];
  const es = doc[HINTS_FIELD_EDGES];
  if (es !== undefined && es !== null) {
    if (!Array.isArray(es)) throw new Error('hints: edges not an array');
    for (const e of es) {
      if (!isObject(e)) throw new Error('hints: an edge is not an object');
      let addrs: string[] | undefined;
      const as = e[EDGE_FIELD_PEER_ADDRESSES];
      if (as !== undefined && as !== null) {
        if (!Array.isArray(as) || !as.every(a => typeof a === 'string')) {
          throw new Error('hints: peer_addresses not strings');
        }
        addrs = as;
      }
      const confidence = e[EDGE_FIELD_CONFIDENCE];
      const samples = e[EDGE_FIELD_SAMPLES];
      edges.push({
        operation: optString(e[EDGE_FIELD_OPERATION], 'operation'),
        peer_service: optString(e[EDGE_FIELD_PEER_SERVICE], 'peer_service'),
        peer_operation: optString(e[EDGE_FIELD_PEER_OPERATION], 'peer_operation'),
        peer_addresses: addrs,
        mode: parseMode(e[EDGE_FIELD_MODE]),
        confidence: typeof confidence === 'number' ? confidence : undefined,
        samples: typeof samples === 'number' ? samples : undefined,
      });
    }
  }
  const generatedAt = doc[HINTS_FIELD_GENERATED_AT];
  return {
    version,
    service: svc,
    generated_at: typeof generatedAt === 'string' ? generatedAt : undefined,
    ttl_seconds: ttl,
    retry_budget: budget,
    edges,
  };
}

// The interfaces spell the hints document's fields as the registry does:
// this fails to compile when a key and the registry part ways.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Holds<T extends true> = T;
export type HintsFieldsMatchRegistry = [
  Holds<Same<keyof Hints, HintsField>>,
  Holds<Same<keyof RetryBudgetLimits, RetryBudgetField>>,
  Holds<Same<keyof HintEdge, EdgeField>>,
];
