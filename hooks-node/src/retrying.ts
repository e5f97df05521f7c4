// SPDX-License-Identifier: Apache-2.0

import { RetryBudget } from './budget';
import { HintSource } from './claim';
import { RetryBudgetLimits, defaultRetryBudget } from './ownership';

/** The first attempt and two retries. */
export const DEFAULT_MAX_ATTEMPTS = 3;
/** The ceiling of the first retry's delay, ms. */
export const DEFAULT_INITIAL_BACKOFF_MS = 50;
/** The cap on later retries' delays, ms. */
export const DEFAULT_MAX_BACKOFF_MS = 1000;
/** Past this many peers, new peers share one overflow budget. */
export const MAX_PEERS = 256;

/** Settings the HTTP and gRPC client hooks share. */
export interface RetrySettings {
  /** Edge modes and budget limits; without it every edge is unknown and budgets use the defaults. */
  hints?: HintSource;
  /** A budget shared by every peer instead of one per peer; it keeps its own limits. */
  budget?: RetryBudget;
  /** Attempts per call, the first included (default 3). 1 disables retries (no_policy). */
  maxAttempts?: number;
  /** Backoff: retry n waits a random time in [d/2, d], d = min(maxMs, initialMs × 2^(n−1)). */
  backoff?: { initialMs: number; maxMs: number };
}

/** One budget per peer, as gRPC throttles per channel: one failing dependency must not use up another's retries. */
export class Budgets {
  private readonly peers = new Map<string, RetryBudget>();
  private overflow: RetryBudget | undefined;
  constructor(
    private readonly shared?: RetryBudget,
    private readonly hints?: HintSource
  ) {}

  for(peer: string): RetryBudget {
    if (this.shared) return this.shared;
    const b = this.peers.get(peer);
    if (b) return b;
    if (this.peers.size >= MAX_PEERS) {
      this.overflow ??= new RetryBudget(this.limits());
      return this.overflow;
    }
    const nb = new RetryBudget(this.limits());
    this.peers.set(peer, nb);
    return nb;
  }

  /** Brings b's limits up to date with the hints; called on the failure path only. */
  refresh(b: RetryBudget): void {
    if (this.hints && b !== this.shared) {
      const l = safeLimits(this.hints);
      const cur = b.limits();
      if (l.ratio !== cur.ratio || l.min_retries_per_second !== cur.min_retries_per_second) b.setLimits(l);
    }
  }

  private limits(): RetryBudgetLimits {
    return this.hints ? safeLimits(this.hints) : defaultRetryBudget();
  }
}

function safeLimits(h: HintSource): RetryBudgetLimits {
  try {
    return h.budgetLimits();
  } catch {
    return defaultRetryBudget();
  }
}

/** Retry n (1 for the first) waits uniformly in [d/2, d], d = min(max, initial × 2^(n−1)). */
export function backoffDelay(n: number, initialMs: number, maxMs: number): number {
  let d = initialMs;
  for (let i = 1; i < n && d < maxMs; i++) d *= 2;
  d = Math.min(d, maxMs);
  if (!(d > 0)) return 0;
  const half = d / 2;
  return half + Math.random() * (d - half);
}

/** Whether waiting d ms still leaves time before deadline (ms since the epoch; Infinity: none). */
export function fits(deadline: number | undefined, d: number): boolean {
  return deadline === undefined || !Number.isFinite(deadline) || deadline - Date.now() > d;
}

/** Waits ms, or until signal aborts (then rejects with its reason). The timer does not hold the process. */
export function sleep(ms: number, signal?: AbortSignal | null): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  if (!(ms > 0)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(t);
      reject(abortReason(signal!));
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new Error('aborted');
}

/** Normalised retry settings. */
export interface Resolved {
  maxAttempts: number;
  initialMs: number;
  maxMs: number;
}

export function resolveSettings(s: RetrySettings): Resolved {
  return {
    maxAttempts: Math.max(Math.floor(s.maxAttempts ?? DEFAULT_MAX_ATTEMPTS), 1),
    initialMs: s.backoff?.initialMs ?? DEFAULT_INITIAL_BACKOFF_MS,
    maxMs: s.backoff?.maxMs ?? DEFAULT_MAX_BACKOFF_MS,
  };
}
