// SPDX-License-Identifier: Apache-2.0

import { Claim, Mode, Reason, RetryDecision } from './ownership';
import type { RetryBudget } from './budget';

/**
 * Tells the mode of the edge from the current inbound operation to
 * (peerService, peerOperation); peerOperation is '' when not known.
 */
export type ModeFunc = (peerService: string, peerOperation: string) => Mode;

/** What the hooks need from the learned model; the HintClient implements it, a static table can too. */
export interface HintSource {
  mode(operation: string, peerService: string, peerOperation: string): Mode;
  budgetLimits(): { ratio: number; min_retries_per_second: number };
}

/** The final outcome of one outbound logical call: its first attempt and retries. */
export interface Outcome {
  /** The callee: its address (host[:port]) or service.name. */
  peerService: string;
  /** The callee's operation, '' when not known. */
  peerOperation?: string;
  /** The last attempt failed with a server fault, or never got an answer. */
  failed?: boolean;
  /** The claim on the last attempt's error. */
  received?: Claim;
  /** The retry decision taken after the last attempt. */
  decision?: RetryDecision;
  /** The request stopped waiting for the call (still running when it answered, or cut short). */
  inFlight?: boolean;
}

/**
 * Decides what a server tells its caller about an error it returns
 * (docs/design.md §4.1–4.2), from the request's outbound calls, the edge
 * modes, and whether the request gave up waiting. For a request with no
 * failed call it returns claimed/own.
 */
export function decideClaim(
  outcomes: readonly Outcome[],
  modes: ModeFunc | undefined,
  timedOut: boolean
): { claim: Exclude<Claim, 'missing'>; reason: Exclude<Reason, ''> } {
  if (timedOut) {
    for (const o of outcomes) {
      if (o.inFlight) return { claim: 'unclaimed', reason: 'propagated' };
    }
  }
  let failed = 0;
  let blocking = 0;
  let missing = 0;
  let noPolicy = 0;
  for (const o of outcomes) {
    if (!o.failed) continue;
    failed++;
    if (modes && modes(o.peerService, o.peerOperation ?? '') === 'fail_open') continue;
    blocking++;
    const received = o.received ?? 'missing';
    if (received === 'missing') missing++;
    // At least once: a caller without a retry policy for a claimed (or
    // unlabelled) error passes it up claimed, or nobody would retry it.
    if (o.decision === 'no_policy' && received !== 'unclaimed') noPolicy++;
  }
  if (failed === 0) return { claim: 'claimed', reason: 'own' };
  if (blocking === 0) return { claim: 'claimed', reason: 'coincidental' };
  if (noPolicy === blocking) return { claim: 'claimed', reason: 'propagated' };
  if (missing === blocking) return { claim: 'unclaimed', reason: 'missing_downstream_claim' };
  return { claim: 'unclaimed', reason: 'propagated' };
}

/**
 * Decides whether a caller retries a failed attempt (the decision matrix,
 * docs/design.md §4.3). Only when every other check passes is a token
 * withdrawn from budget, so a suppressed retry costs none. A null budget
 * allows every retry.
 */
export function decideRetry(
  received: Claim,
  hasPolicy: boolean,
  attemptsLeft: boolean,
  budget: RetryBudget | null | undefined
): Exclude<RetryDecision, ''> {
  if (!hasPolicy) return 'no_policy';
  if (received === 'unclaimed') return 'suppressed_unclaimed';
  if (!attemptsLeft) return 'exhausted';
  if (budget && !budget.tryWithdraw()) return 'suppressed_budget';
  return 'retried';
}
