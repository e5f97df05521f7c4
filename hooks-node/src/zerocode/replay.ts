// SPDX-License-Identifier: Apache-2.0

import type * as http from 'node:http';
import { errorMonitor } from 'node:events';
import { Context, context, propagation } from '@opentelemetry/api';
import { Attempt, LogicalCall, rawValues } from '../http/attempt';
import { idempotent } from '../http/common';
import { discard, toHeaders } from '../http/request';
import { HTTP_RETRY_ATTEMPT_HEADER } from '../ownership';

/** The most request body bytes kept for a replay; a longer body is sent once. */
export const MAX_REPLAY_BYTES = 1 << 20;

type Listener = (...args: unknown[]) => unknown;
type Emit = (event: string | symbol, ...args: unknown[]) => boolean;

/** What a replay needs of the wrapper that made the first attempt. */
export interface ReplayTarget {
  /** http.request (or https's) as the service sees it now: a retry goes through every wrapper, the instrumentation's included. */
  request: () => (...args: unknown[]) => http.ClientRequest;
  /** The arguments of the first call, without its response callback. */
  args: unknown[];
  method: string;
  parent: Context;
  peerOperation: () => string;
  /** Runs fn with the hooks' own wrappers passing calls through. */
  passThrough: <T>(fn: () => T) => T;
}

function abortError(): Error {
  return Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
}

/** The arguments of a retry: the first call's, with headers in place of its own. */
function withHeaders(args: unknown[], headers: http.OutgoingHttpHeaders): unknown[] {
  const [a0, a1] = args;
  if (typeof a0 === 'string' || a0 instanceof URL) {
    const opts = typeof a1 === 'object' && a1 !== null ? a1 : {};
    return [a0, { ...opts, headers }];
  }
  return [{ ...(a0 as http.RequestOptions), headers }];
}

/**
 * Retries an http.request call behind the ClientRequest its caller holds,
 * where that can be done without the caller noticing: the body was written
 * in full and ended before the first attempt's answer came, so it is sent
 * again from what was kept, and the answer is not yet the caller's. The
 * ClientRequest stays the caller's; the first attempt's events reach only
 * the listeners that were on it before the caller got it (the
 * instrumentation's, which end its span), and the final attempt's
 * response, error and close are passed to the caller's listeners as if
 * the first had made them. Each retry is a new http.request through every
 * wrapper, so the instrumentation makes it a CLIENT span of its own.
 */
export class ReplayingRequest {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private overflow = false;
  private readonly internal = new Map<string | symbol, Set<unknown>>();
  private readonly emit: Emit;
  /** The first attempt failed and is retried: the request's own events are no longer the caller's. */
  private detached = false;
  /** The first attempt's outcome went to the caller as it is. */
  private passed = false;
  private aborted = false;
  private timer: NodeJS.Timeout | undefined;
  private current: http.ClientRequest | undefined;
  /** The attempt whose answer the caller got. */
  private final: http.ClientRequest | undefined;
  private last: Attempt;

  constructor(
    private readonly req: http.ClientRequest,
    private readonly lc: LogicalCall,
    first: Attempt,
    private readonly target: ReplayTarget
  ) {
    this.last = first;
    for (const ev of ['response', 'close', 'error', 'timeout', errorMonitor])
      this.internal.set(ev, new Set(req.rawListeners(ev)));
    this.emit = req.emit.bind(req) as Emit;
    this.keepBody();
    req.emit = ((event: string | symbol, ...args: unknown[]): boolean => this.onEvent(event, args)) as typeof req.emit;
    const destroy = req.destroy.bind(req);
    req.destroy = (err?: Error): http.ClientRequest => {
      if (this.detached) this.abort(err);
      return destroy(err);
    };
  }

  private keepBody(): void {
    const req = this.req;
    // eslint-disable-next-line @typescript-eslint/unbound-method
    const write = req.write;
    // eslint-disable-next-line @typescript-eslint/unbound-method
    const end = req.end;
    const keep = (chunk: unknown, encoding: unknown): void => {
      if (this.overflow || chunk === undefined || chunk === null || typeof chunk === 'function') return;
      let b: Buffer;
      if (typeof chunk === 'string')
        b = Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
      else if (chunk instanceof Uint8Array) b = Buffer.from(chunk);
      else {
        this.overflow = true; // not bytes: http will say so
        return;
      }
      this.size += b.length;
      if (this.size > MAX_REPLAY_BYTES) {
        this.overflow = true;
        this.chunks.length = 0;
      } else this.chunks.push(b);
    };
    req.write = function (this: http.ClientRequest, chunk: unknown, ...rest: unknown[]): boolean {
      keep(chunk, rest[0]);
      return (write as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
    } as typeof req.write;
    req.end = function (this: http.ClientRequest, ...args: unknown[]): http.ClientRequest {
      if (!this.writableEnded) keep(args[0], args[1]);
      return (end as (...a: unknown[]) => http.ClientRequest).apply(this, args);
    } as typeof req.end;
  }

  /** Whether the first attempt may be sent again: its body complete, kept, and of a method the rules retry. */
  private replayable(): boolean {
    const req = this.req;
    if (!req.writableEnded || this.overflow || this.target.method === 'CONNECT' || req.hasHeader('upgrade'))
      return false;
    try {
      return this.lc.settings.maxAttempts > 1 && idempotent(this.target.method, toHeaders(req.getHeaders()));
    } catch {
      return false;
    }
  }

  private onEvent(event: string | symbol, args: unknown[]): boolean {
    if (this.detached) {
      this.toInternal(event, args);
      return true;
    }
    if (!this.passed && (event === 'response' || event === 'error' || event === 'close' || event === 'upgrade')) {
      const a = this.last;
      try {
        if (this.decide(a, event, args[0])) return true;
        a.annotate();
        a.end(this.target.peerOperation);
      } catch {
        // the hooks never fail a call
      }
      this.passed = true;
      this.chunks.length = 0;
    }
    return this.emit(event, ...args);
  }

  /**
   * Settles the first attempt on its answer; true when it is retried, its
   * answer then given to the instrumentation's listeners only.
   */
  private decide(a: Attempt, event: string | symbol, arg: unknown): boolean {
    if (event === 'close') {
      a.settle(undefined, undefined); // aborted before any answer
      return false;
    }
    if (event === 'upgrade') {
      a.settle(101, undefined); // a protocol switch: nothing to replay
      return false;
    }
    this.lc.hasPolicy = this.replayable();
    const res = event === 'response' ? (arg as http.IncomingMessage) : undefined;
    if (res) a.settle(res.statusCode ?? 0, rawValues(res.rawHeaders, 'error-claim'));
    else a.settle(undefined, undefined);
    if (!a.failed || a.decision !== 'retried') return false;
    this.detached = true;
    a.annotate();
    if (res) {
      this.toInternal('response', [res]);
      discard(res);
    } else {
      this.toInternal(errorMonitor, [arg]);
      this.toInternal('error', [arg]);
    }
    this.schedule(a);
    return true;
  }

  /** Calls only the listeners the request had before its caller got it (the instrumentation's). */
  private toInternal(event: string | symbol, args: unknown[]): void {
    const own = this.internal.get(event);
    if (!own) return;
    for (const l of this.req.rawListeners(event)) if (own.has(l)) (l as Listener).apply(this.req, args);
  }

  /** Calls only the caller's listeners; true if there were any. */
  private toCaller(event: string | symbol, args: unknown[]): boolean {
    const own = this.internal.get(event);
    let n = 0;
    for (const l of this.req.rawListeners(event)) {
      if (own?.has(l)) continue;
      n++;
      (l as Listener).apply(this.req, args);
    }
    return n > 0;
  }

  private schedule(a: Attempt): void {
    this.current = undefined;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.attempt(a.n + 1);
    }, a.delay);
  }

  private attempt(n: number): void {
    if (this.aborted) return;
    const a = new Attempt(this.lc, n);
    this.last = a;
    const headers: http.OutgoingHttpHeaders = { ...this.req.getHeaders() };
    // The instrumentation injects the retry's own trace context.
    for (const f of propagation.fields()) delete headers[f.toLowerCase()];
    headers[HTTP_RETRY_ATTEMPT_HEADER.toLowerCase()] = String(n);
    const args = withHeaders(this.target.args, headers);
    let r: http.ClientRequest;
    try {
      r = this.target.passThrough(() =>
        context.with(a.context(this.target.parent), () => this.target.request()(...args))
      );
    } catch (e) {
      a.settle(undefined, undefined);
      this.current = undefined;
      this.finish(a, undefined, e);
      return;
    }
    this.current = r;
    let answered = false;
    r.on('response', (res: http.IncomingMessage) => {
      answered = true;
      a.settle(res.statusCode ?? 0, rawValues(res.rawHeaders, 'error-claim'));
      a.annotate();
      if (a.failed && a.decision === 'retried' && !this.aborted) {
        discard(res);
        this.schedule(a);
        return;
      }
      this.finish(a, res, undefined);
    });
    r.on('error', (err: Error) => {
      if (answered) {
        if (this.final === r) this.toCallerError(err);
        return;
      }
      answered = true;
      a.settle(undefined, undefined);
      a.annotate();
      if (a.failed && a.decision === 'retried' && !this.aborted) {
        this.schedule(a);
        return;
      }
      this.finish(a, undefined, err);
    });
    r.on('timeout', () => {
      if (this.current === r) this.toCaller('timeout', []);
    });
    r.on('close', () => {
      if (this.final === r) this.toCaller('close', []);
    });
    r.end(this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks));
  }

  /** The last attempt's answer (or error) goes to the caller. */
  private finish(a: Attempt, res: http.IncomingMessage | undefined, err: unknown): void {
    a.end(this.target.peerOperation);
    this.chunks.length = 0;
    this.final = this.current;
    if (res) {
      if (!this.toCaller('response', [res])) res.resume();
      return;
    }
    if (!this.final) queueMicrotask(() => this.toCaller('close', [])); // no request was made: no close will come
    this.toCallerError(err);
  }

  private toCallerError(err: unknown): void {
    this.toCaller(errorMonitor, [err]);
    // With no listener of the caller's, the error is thrown, as Node's emit would.
    if (!this.toCaller('error', [err])) throw err;
  }

  /** The caller destroyed the request while a retry was waiting or under way. */
  private abort(err: Error | undefined): void {
    if (this.aborted) return;
    this.aborted = true;
    if (this.current) {
      this.current.destroy(err);
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.last.end(this.target.peerOperation, true);
    const e = err ?? abortError();
    queueMicrotask(() => {
      this.toCaller(errorMonitor, [e]);
      this.toCaller('error', [e]);
      this.toCaller('close', []);
    });
  }
}
