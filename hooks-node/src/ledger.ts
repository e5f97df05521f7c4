// SPDX-License-Identifier: Apache-2.0

import { AsyncLocalStorage } from 'node:async_hooks';
import { Context, context, createContextKey } from '@opentelemetry/api';
import { Claim, Reason } from './ownership';
import { ModeFunc, Outcome, decideClaim } from './claim';

/** The context key under which a Ledger travels in the OpenTelemetry context. */
export const LEDGER_KEY = createContextKey('errorownership ledger');

/** Identifies a call begun on a Ledger. */
export type CallId = number;

interface Entry {
  o: Outcome;
  done: boolean;
}

/**
 * Records the outbound logical calls of one inbound request, so the server
 * hook can decide the claim when the request fails. Client hooks find it in
 * the active context (ledgerFrom) and record each call with begin and end.
 * A call not yet ended when the request answers is in flight: the request
 * gave up waiting on it.
 */
export class Ledger {
  private readonly entries: Entry[] = [];

  /** Notes that a call to peerService started; until end, it is in flight. */
  begin(peerService: string): CallId {
    this.entries.push({ o: { peerService }, done: false });
    return this.entries.length - 1;
  }

  /** Records the final outcome of call c. */
  end(c: CallId, o: Outcome): void {
    const e = this.entries[c];
    if (e === undefined) return;
    e.o = o;
    e.done = true;
  }

  /** Records a finished call in one step. */
  record(o: Outcome): void {
    this.end(this.begin(o.peerService), o);
  }

  /** A snapshot of every call so far, in the order they began; unfinished calls are in flight. */
  outcomes(): Outcome[] {
    return this.entries.map(e => (e.done ? e.o : { peerService: e.o.peerService, inFlight: true }));
  }

  /** Applies decideClaim to the snapshot; a call in flight means timed out. */
  decide(
    modes: ModeFunc | undefined,
    timedOut: boolean
  ): { claim: Exclude<Claim, 'missing'>; reason: Exclude<Reason, ''> } {
    const outs = this.outcomes();
    if (outs.some(o => o.inFlight)) timedOut = true;
    return decideClaim(outs, modes, timedOut);
  }
}

/*
 * The ledger travels in the OpenTelemetry context, and so with the
 * AsyncLocalStorage context manager the SDK installs. Without an SDK (the
 * API's no-op context manager) the context does not flow, so the hooks keep
 * the ledger in an AsyncLocalStorage of their own too.
 */
const fallback = new AsyncLocalStorage<Ledger>();

/** A copy of ctx (default: the active context) that carries ledger. */
export function setLedger(ctx: Context, ledger: Ledger): Context {
  return ctx.setValue(LEDGER_KEY, ledger);
}

/** The Ledger ctx carries (default: the active context), or undefined. */
export function ledgerFrom(ctx: Context = context.active()): Ledger | undefined {
  const l = ctx.getValue(LEDGER_KEY);
  if (l instanceof Ledger) return l;
  return fallback.getStore();
}

/** Runs fn with a context carrying ledger active. */
export function runWithLedger<T>(ledger: Ledger, fn: () => T): T {
  const ctx = setLedger(context.active(), ledger);
  return fallback.run(ledger, () => context.with(ctx, fn));
}

/** Returns a copy of ctx (default: active) carrying a new Ledger, and the Ledger. */
export function withLedger(ctx: Context = context.active()): [Context, Ledger] {
  const l = new Ledger();
  return [setLedger(ctx, l), l];
}
