// SPDX-License-Identifier: Apache-2.0

import { Attributes, Context, Span, context, createContextKey } from '@opentelemetry/api';
import type { RetryBudget } from '../budget';
import { decideRetry } from '../claim';
import { Ledger, CallId } from '../ledger';
import {
  ATTR_CLAIM_RECEIVED,
  ATTR_HTTP_RESEND_COUNT,
  ATTR_RETRY_ATTEMPT,
  ATTR_RETRY_DECISION,
  Claim,
  RetryDecision,
  claimOfValues,
} from '../ownership';
import { Budgets, Resolved, backoffDelay, fits, sleep } from '../retrying';

/** The context key under which the attempt being made travels, for the instrumentation hooks. */
export const ATTEMPT_KEY = createContextKey('errorownership attempt');

/** One logical call: the first attempt and its retries. */
export class LogicalCall {
  callId: CallId = -1;
  constructor(
    readonly settings: Resolved,
    readonly budgets: Budgets,
    readonly budget: RetryBudget,
    readonly peer: string,
    // Set late by the zero-code http.request wrapper: whether its body can be sent again is known only at the response.
    public hasPolicy: boolean,
    readonly fault: (status: number) => boolean,
    readonly signal: AbortSignal | undefined | null,
    readonly deadline: number | undefined,
    readonly ledger: Ledger | undefined,
    readonly resendCount: boolean
  ) {
    budget.deposit();
    if (ledger) this.callId = ledger.begin(peer);
  }
}

/**
 * One attempt of a logical call. settle() decides, once, whether it failed
 * and what the caller does next; the instrumentation's response hook calls
 * it as soon as the response's headers arrive (so that the attributes land
 * on the attempt's span before it ends), and the client hook after the
 * attempt's answer, whichever comes first.
 */
export class Attempt {
  span: Span | undefined;
  settled = false;
  failed = false;
  inFlight = false;
  received: Claim = 'missing';
  decision: RetryDecision = '';
  delay = 0;
  private annotated = false;

  constructor(
    readonly lc: LogicalCall,
    readonly n: number
  ) {}

  /** The context in which to make the attempt: ctx with this attempt in it. */
  context(ctx: Context = context.active()): Context {
    return ctx.setValue(ATTEMPT_KEY, this);
  }

  /** status undefined: the attempt got no answer (a connection error). */
  settle(status: number | undefined, claimValues: readonly (string | Buffer)[] | undefined): void {
    if (this.settled) return;
    this.settled = true;
    const lc = this.lc;
    if (lc.signal?.aborted) {
      // The caller stopped waiting: no retry can help it, and the call was cut short.
      this.failed = true;
      this.inFlight = true;
      this.decision = 'exhausted';
      return;
    }
    if (status !== undefined && !lc.fault(status)) return;
    this.failed = true;
    this.received = status === undefined ? 'missing' : claimOfValues(claimValues);
    let left = this.n + 1 < lc.settings.maxAttempts;
    if (lc.hasPolicy && left && this.received !== 'unclaimed') {
      this.delay = backoffDelay(this.n + 1, lc.settings.initialMs, lc.settings.maxMs);
      left = fits(lc.deadline, this.delay);
      lc.budgets.refresh(lc.budget);
    }
    this.decision = decideRetry(this.received, lc.hasPolicy, left, lc.budget);
  }

  /**
   * Sets the attempt's attributes on its client span, all in one call and
   * once (the response hook and the client both call this), if the span is
   * still recording. Every attempt carries its number, a first attempt that
   * succeeded included, so that a trace shows which calls went through the
   * hooks.
   */
  annotate(): void {
    const span = this.span;
    if (!span || this.annotated || !this.settled || !span.isRecording()) return;
    this.annotated = true;
    const attrs: Attributes = { [ATTR_RETRY_ATTEMPT]: this.n };
    if (this.n > 0 && this.lc.resendCount) attrs[ATTR_HTTP_RESEND_COUNT] = this.n;
    if (this.failed) {
      attrs[ATTR_CLAIM_RECEIVED] = this.received;
      attrs[ATTR_RETRY_DECISION] = this.decision;
    }
    span.setAttributes(attrs);
  }

  /** Ends the logical call in the ledger with this attempt's outcome. */
  end(peerOperation: () => string, inFlight = this.inFlight): void {
    const lc = this.lc;
    if (!lc.ledger) return;
    if (!this.failed) {
      lc.ledger.end(lc.callId, { peerService: lc.peer });
      return;
    }
    lc.ledger.end(lc.callId, {
      peerService: lc.peer,
      peerOperation: safe(peerOperation),
      failed: true,
      received: this.received,
      decision: this.decision,
      inFlight,
    });
  }
}

function safe(f: () => string): string {
  try {
    return f();
  } catch {
    return '';
  }
}

const spanAttempts = new WeakMap<Span, Attempt>();

/** Binds the attempt active in the context (if any) to span, the instrumentation's span for it. */
export function bindActiveAttempt(span: Span): void {
  const a = context.active().getValue(ATTEMPT_KEY);
  if (a instanceof Attempt) bindAttempt(a, span);
}

/** Binds a to span, the instrumentation's span for it, unless a has one already. */
export function bindAttempt(a: Attempt, span: Span): void {
  if (a.span) return;
  a.span = span;
  spanAttempts.set(span, a);
}

/** The attempt bound to span, if any. */
export function attemptOf(span: Span): Attempt | undefined {
  return spanAttempts.get(span);
}

/** The values of header name (lower case) in a raw [name, value, name, value, …] list. */
export function rawValues(raw: readonly (string | Buffer)[] | undefined, name: string): (string | Buffer)[] {
  const out: (string | Buffer)[] = [];
  if (!raw) return out;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const k = raw[i];
    if (k.length !== name.length) continue;
    const ks = typeof k === 'string' ? k : k.toString('latin1');
    if (ks.toLowerCase() === name) out.push(trimOWS(raw[i + 1]));
  }
  return out;
}

/**
 * A field value without its leading and trailing spaces and tabs, which
 * RFC 9110 says are not part of it (Go's net/http strips them on parse; some
 * of Node's parsers do not).
 */
export function trimOWS(v: string | Buffer): string {
  const s = typeof v === 'string' ? v : v.toString('latin1');
  return s.replace(/^[ \t]+|[ \t]+$/g, '');
}

/** What a hooked client does once an attempt is settled: done, with the answer to give the caller. */
export type AttemptEnd<R> = { done: true; res: R } | { done: false };

/**
 * Finishes a settled attempt the same way for every client: annotates its
 * span; ends the logical call and gives back the response (or throws the
 * attempt's error) unless the decision is to retry; else discards the
 * failed response's body and waits out the backoff, within signal.
 */
export async function finishAttempt<R>(
  a: Attempt,
  peerOperation: () => string,
  res: R | undefined,
  err: unknown,
  discardBody: (res: R) => void,
  signal?: AbortSignal | null
): Promise<AttemptEnd<R>> {
  a.annotate();
  if (!a.failed || a.decision !== 'retried') {
    a.end(peerOperation);
    if (res !== undefined) return { done: true, res };
    throw err;
  }
  if (res !== undefined) discardBody(res);
  try {
    await sleep(a.delay, signal);
  } catch (e) {
    a.end(peerOperation, true);
    throw e;
  }
  return { done: false };
}
