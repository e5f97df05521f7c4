// SPDX-License-Identifier: Apache-2.0

import type * as http from 'node:http';
import { context } from '@opentelemetry/api';
import { HintSource } from '../claim';
import { ledgerFrom } from '../ledger';
import { Budgets, Resolved, resolveSettings } from '../retrying';
import { isSuppressed } from '../suppress';
import { Attempt, LogicalCall, rawValues } from '../http/attempt';
import { operationOf, peerAddress, serverFault } from '../http/common';
import { createFetch } from '../http/fetch';
import { ReplayingRequest } from './replay';

const WRAPPED = Symbol.for('errorownership.zerocode.wrapped');

type RequestFn = ((...args: unknown[]) => http.ClientRequest) & { [WRAPPED]?: true };

/**
 * Whether one of a kind of the hooks' wrappers is on the stack: one called
 * inside another (http.get calls request inside, as some instrumentations
 * do too; the hooks' gRPC method wrapper under the instrumentation's, under
 * the hooks') passes the call through.
 */
export class Nesting {
  depth = 0;

  /** Runs fn with the wrappers of this kind passing calls through. */
  readonly passThrough = <T>(fn: () => T): T => {
    this.depth++;
    try {
      return fn();
    } finally {
      this.depth--;
    }
  };
}

const nesting = new Nesting();
const passThrough = nesting.passThrough;

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

/** The attempts the zero-code http.request wrapper observed, by the ClientRequest it got. */
export const requestAttempts = new WeakMap<object, Attempt>();

interface ClientHooks {
  mod: Pick<typeof http, 'request' | 'get'>;
  defaultProtocol: string;
  budgets: Budgets;
  settings: Resolved;
  /** The hooks' outermost wrapper of each function, so far. */
  outer: Partial<Record<'request' | 'get', RequestFn>>;
}

/** The hooks of each wrapper made: which module's, which function's. */
const wrappers = new WeakMap<RequestFn, [ClientHooks, 'request' | 'get']>();
const byProtocol = new Map<string, ClientHooks>();

/** The observe-only calls' settings: one attempt, decision no_policy. */
const once = resolveSettings({ maxAttempts: 1 });

/**
 * Wraps http.request / http.get (and https's) so that every call enters its
 * ledger, has its attempt attributes set on the instrumentation's CLIENT
 * span, and is retried by the rules where ReplayingRequest can do it
 * unseen. That needs the hooks' wrapper outside the instrumentation's: it
 * must see the request before the caller does. When the instrumentation
 * patches after the hooks (their preload first), the hooks wrap again over
 * it, on the next turn of the event loop and at the first call that finds
 * itself inside another wrapper (that call is observed, not retried).
 */
export function wrapHttpClient(
  mod: Pick<typeof http, 'request' | 'get'>,
  defaultProtocol: string,
  hints: HintSource,
  maxAttempts: number
): void {
  const budgets = new Budgets(undefined, hints);
  const h: ClientHooks = { mod, defaultProtocol, budgets, settings: resolveSettings({ maxAttempts }), outer: {} };
  byProtocol.set(defaultProtocol, h);
  install(h);
  setImmediate(() => install(h)).unref();
}

/** Puts the hooks' wrapper outermost on request and get, unless it is there (or another copy's is). */
function install(h: ClientHooks): void {
  for (const name of ['request', 'get'] as const) {
    const next = h.mod[name] as unknown as RequestFn;
    if (typeof next !== 'function') continue;
    const w = wrappers.get(next);
    if (w?.[0] === h)
      h.outer[name] = next; // back on top: an instrumentation unwrapped itself
    else if (!next[WRAPPED]) h.mod[name] = wrapper(h, name, next);
  }
}

function wrapper(h: ClientHooks, name: 'request' | 'get', next: RequestFn): RequestFn {
  const wrapped: RequestFn = function (this: unknown, ...args: unknown[]): http.ClientRequest {
    if (nesting.depth > 0 || isSuppressed(context.active())) return next.apply(this, args);
    if (h.outer[name] !== wrapped || (h.mod[name] as unknown) !== wrapped) {
      // Another wrapper came over this one, and its listeners are on the request already.
      install(h);
      return observed(h, next, this, args);
    }
    return replaying(h, next, this, args);
  };
  wrapped[WRAPPED] = true;
  Object.defineProperty(wrapped, 'name', { value: name });
  wrappers.set(wrapped, [h, name]);
  h.outer[name] = wrapped;
  return wrapped;
}

/**
 * instrumentation-http's patch of http(s).request or get, f, inside the
 * hooks' wrapper: the preload makes the instrumentation's patch factories
 * return this, so the hooks stay outermost however late it patches.
 */
export function outermost(f: unknown, protocol: string | undefined, name: 'request' | 'get'): unknown {
  const h = protocol === undefined ? undefined : byProtocol.get(protocol);
  return h && typeof f === 'function' ? wrapper(h, name, f as RequestFn) : f;
}

/** The module of a request wrapper of the hooks ("http:"), if r is one. */
export function protocolOf(r: unknown): string | undefined {
  return typeof r === 'function' ? wrappers.get(r as RequestFn)?.[0].defaultProtocol : undefined;
}

interface Call {
  t: Target;
  lc: LogicalCall;
  a: Attempt;
  peerOperation: () => string;
}

function begin(h: ClientHooks, settings: Resolved, args: unknown[]): Call | undefined {
  let t: Target;
  try {
    t = targetOf(args, h.defaultProtocol);
  } catch {
    return undefined; // let http say what is wrong with the arguments
  }
  let peer: string;
  try {
    peer = peerAddress(t.url);
  } catch {
    peer = t.url.host;
  }
  const b = h.budgets;
  // hasPolicy is decided at the first answer, when the body is known complete (or not).
  const lc = new LogicalCall(
    settings,
    b,
    b.for(peer),
    peer,
    false,
    serverFault,
    undefined,
    undefined,
    ledgerFrom(),
    true
  );
  return { t, lc, a: new Attempt(lc, 0), peerOperation: () => operationOf(t.method, t.url) };
}

/** Makes the first attempt with c's attempt in the context, for the instrumentation's requestHook. */
function first(c: Call, next: RequestFn, self: unknown, args: unknown[]): http.ClientRequest {
  try {
    return passThrough(() => context.with(c.a.context(), () => next.apply(self, args)));
  } catch (e) {
    c.a.settle(undefined, undefined);
    c.a.end(c.peerOperation);
    throw e;
  }
}

function replaying(h: ClientHooks, next: RequestFn, self: unknown, args: unknown[]): http.ClientRequest {
  const c = begin(h, h.settings, args);
  if (!c) return next.apply(self, args);
  // The response callback is kept off the request until the instrumentation's listeners are known.
  const cb =
    typeof args[args.length - 1] === 'function' ? (args[args.length - 1] as (...a: unknown[]) => void) : undefined;
  const callArgs = cb ? args.slice(0, -1) : args;
  const parent = context.active();
  const req = first(c, next, self, callArgs);
  try {
    new ReplayingRequest(req, c.lc, c.a, {
      request: () => h.mod.request as unknown as (...a: unknown[]) => http.ClientRequest,
      args: callArgs,
      method: c.t.method,
      parent,
      peerOperation: c.peerOperation,
      passThrough,
    });
  } catch {
    observe(req, c.a, c.peerOperation);
  }
  if (cb) req.once('response', context.bind(parent, cb));
  return req;
}

function observed(h: ClientHooks, next: RequestFn, self: unknown, args: unknown[]): http.ClientRequest {
  const c = begin(h, once, args);
  if (!c) return next.apply(self, args);
  const req = first(c, next, self, args);
  requestAttempts.set(req, c.a);
  observe(req, c.a, c.peerOperation);
  return req;
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
