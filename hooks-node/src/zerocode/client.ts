// SPDX-License-Identifier: Apache-2.0

import type * as http from 'node:http';
import { context } from '@opentelemetry/api';
import { HintSource } from '../claim';
import { ledgerFrom } from '../ledger';
import { Budgets, resolveSettings } from '../retrying';
import { Attempt, LogicalCall, rawValues } from '../http/attempt';
import { operationOf, peerAddress, serverFault } from '../http/common';
import { createFetch } from '../http/fetch';
import { requestAttempts } from './instrumentations';

const WRAPPED = Symbol.for('errorownership.zerocode.wrapped');

type RequestFn = ((...args: unknown[]) => http.ClientRequest) & { [WRAPPED]?: true };

/** Whether the wrapper is already on the stack: http.get calls request inside, as some instrumentations do too. */
let depth = 0;

interface Target {
  url: URL;
  method: string;
}

/** The URL and method of http.request's arguments: (url[, options][, cb]) or (options[, cb]). */
function targetOf(args: unknown[], defaultProtocol: string): Target {
  let base: URL | undefined;
  let opts: http.RequestOptions = {};
  const [a0, a1] = args;
  if (typeof a0 === 'string') base = new URL(a0);
  else if (a0 instanceof URL) base = a0;
  else if (typeof a0 === 'object' && a0 !== null) opts = a0;
  if (base && typeof a1 === 'object' && a1 !== null) opts = a1;
  const protocol = opts.protocol ?? base?.protocol ?? defaultProtocol;
  let host = opts.hostname ?? (typeof opts.host === 'string' ? opts.host.replace(/:\d+$/, '') : undefined);
  host ??= base?.hostname ?? 'localhost';
  if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`;
  const port = opts.port ?? base?.port ?? opts.defaultPort ?? '';
  const path = opts.path ?? (base ? base.pathname + base.search : '/');
  const url = new URL(`${protocol}//${host}${port === '' ? '' : `:${String(port)}`}${path}`);
  return { url, method: (opts.method ?? 'GET').toUpperCase() };
}

/**
 * Wraps http.request / http.get (and https's) so that every call a request
 * makes through them enters its ledger and has its attempt attributes set on
 * the instrumentation's CLIENT span. These calls are observed, not retried:
 * http.request hands the caller a ClientRequest to write and a 'response'
 * event to wait for, and a retry would have to swap both behind its back
 * (the body already streamed, the listeners already fired), so a failed
 * call's decision is no_policy. By the at-least-once rule (docs/design.md
 * §4.2) the service then passes a claimed or unlabelled failure up claimed,
 * and its caller retries it.
 */
export function wrapHttpClient(
  mod: Pick<typeof http, 'request' | 'get'>,
  defaultProtocol: string,
  hints: HintSource
): void {
  const budgets = new Budgets(undefined, hints);
  const settings = resolveSettings({ maxAttempts: 1 });
  for (const name of ['request', 'get'] as const) {
    const next = mod[name] as unknown as RequestFn;
    if (typeof next !== 'function' || next[WRAPPED]) continue;
    const wrapped: RequestFn = function (this: unknown, ...args: unknown[]): http.ClientRequest {
      if (depth > 0) return next.apply(this, args);
      let t: Target;
      try {
        t = targetOf(args, defaultProtocol);
      } catch {
        return next.apply(this, args); // let http say what is wrong with the arguments
      }
      let peer: string;
      try {
        peer = peerAddress(t.url);
      } catch {
        peer = t.url.host;
      }
      const lc = new LogicalCall(
        settings,
        budgets,
        budgets.for(peer),
        peer,
        false,
        serverFault,
        undefined,
        undefined,
        ledgerFrom(),
        false
      );
      const a = new Attempt(lc, 0);
      const peerOperation = (): string => operationOf(t.method, t.url);
      let req: http.ClientRequest;
      depth++;
      try {
        req = context.with(a.context(), () => next.apply(this, args));
      } catch (e) {
        a.settle(undefined, undefined);
        a.end(peerOperation);
        throw e;
      } finally {
        depth--;
      }
      requestAttempts.set(req, a);
      observe(req, a, peerOperation);
      return req;
    };
    wrapped[WRAPPED] = true;
    Object.defineProperty(wrapped, 'name', { value: name });
    mod[name] = wrapped;
  }
}

/*
 * The outcome is read off the request's own events by wrapping its emit, not
 * by listening: a 'response' listener would keep Node from discarding a
 * response nobody reads, and an 'error' listener would swallow an error the
 * service does not handle.
 */
function observe(req: http.ClientRequest, a: Attempt, peerOperation: () => string): void {
  // eslint-disable-next-line @typescript-eslint/unbound-method
  const emit = req.emit;
  let done = false;
  req.emit = function (this: http.ClientRequest, event: string | symbol, ...args: unknown[]): boolean {
    if (!done && (event === 'response' || event === 'error' || event === 'close')) {
      done = true;
      try {
        if (event === 'response') {
          const res = args[0] as http.IncomingMessage;
          a.settle(res.statusCode ?? 0, rawValues(res.rawHeaders, 'error-claim'));
        } else {
          a.settle(undefined, undefined);
        }
        a.annotate();
        a.end(peerOperation);
      } catch {
        // the hooks never fail a call
      }
    }
    return emit.call(this, event, ...args);
  } as typeof req.emit;
}

/**
 * Replaces the global fetch by the hooks' fetch around it: retries by the
 * decision matrix within the per-peer budget, where the body can be sent
 * again (a stream or an async iterable cannot: such a call is made once,
 * decision no_policy).
 */
export function wrapGlobalFetch(original: typeof fetch, hints: HintSource, maxAttempts: number): void {
  const hooked = createFetch({ hints, maxAttempts, fetch: original });
  const f = function fetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    return hooked(input, init);
  };
  (f as unknown as { [WRAPPED]: true })[WRAPPED] = true;
  globalThis.fetch = f;
}

/** Whether f is the preload's fetch (the preload ran already). */
export function isWrapped(f: unknown): boolean {
  return typeof f === 'function' && (f as { [WRAPPED]?: true })[WRAPPED] === true;
}
