// SPDX-License-Identifier: Apache-2.0

import { context } from '@opentelemetry/api';
import { ledgerFrom } from '../ledger';
import { HTTP_RETRY_ATTEMPT_HEADER } from '../ownership';
import { Budgets, resolveSettings } from '../retrying';
import { Attempt, LogicalCall, finishAttempt, trimOWS } from './attempt';
import { HttpClientOptions, idempotent, operationOf, peerAddress, serverFault } from './common';

export interface FetchHooksOptions extends HttpClientOptions {
  /** The fetch to wrap (default the global fetch, looked up at each call). */
  fetch?: typeof fetch;
}

/** RequestInit, plus an optional absolute deadline (ms since the epoch) no retry may start past. */
export type HookedRequestInit = RequestInit & { deadline?: number };

export type HookedFetch = (input: string | URL | Request, init?: HookedRequestInit) => Promise<Response>;

const MAX_DRAIN = 64 << 10;
const DRAIN_TIMEOUT_MS = 1000;

function replayableBody(body: unknown): boolean {
  if (body === undefined || body === null) return true;
  if (typeof body === 'string' || body instanceof ArrayBuffer || ArrayBuffer.isView(body)) return true;
  if (body instanceof URLSearchParams || body instanceof Blob || body instanceof FormData) return true;
  return false; // a stream or an async iterable is read once
}

/**
 * Reads what is left of a failed attempt's body in the background, at most
 * 64 KiB for at most 1 s, then cancels it: the retry never waits on the
 * callee, and a short body lets the connection carry the retry.
 */
export function discardBody(res: Response): void {
  const body = res.body;
  if (!body) return;
  let reader: ReadableStreamDefaultReader<Uint8Array>;
  try {
    reader = body.getReader();
  } catch {
    return;
  }
  const timer = setTimeout(() => void reader.cancel().catch(() => undefined), DRAIN_TIMEOUT_MS);
  timer.unref();
  void (async () => {
    let n = 0;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        n += value.byteLength;
        if (n > MAX_DRAIN) {
          await reader.cancel();
          break;
        }
      }
    } catch {
      // a broken body is no concern of the retry
    } finally {
      clearTimeout(timer);
    }
  })();
}

/**
 * Returns a fetch that retries server faults only where the decision matrix
 * allows: claimed or unlabelled errors, within a per-peer budget and the
 * attempt limit, with jittered backoff that never sleeps past the abort
 * signal (or init.deadline); never an error the callee unclaimed, never a
 * request without a retry policy. Retries carry Retry-Attempt: N. Each
 * call's outcome is recorded in the active request's Ledger.
 *
 * Under @opentelemetry/instrumentation-undici each attempt is its own
 * CLIENT span; with undiciHooks() in the instrumentation's config the hook
 * sets error_ownership.retry.attempt, http.request.resend_count, error_ownership.claim.received and
 * error_ownership.retry.decision on it.
 */
export function createFetch(options: FetchHooksOptions = {}): HookedFetch {
  const settings = resolveSettings(options);
  const budgets = new Budgets(options.budget, options.hints);
  const policy = options.retryPolicy ?? idempotent;
  const fault = options.fault ?? serverFault;
  const peerOf = options.peerService ?? peerAddress;
  const peerOp = options.peerOperation ?? operationOf;

  return async function hookedFetch(input: string | URL | Request, init?: HookedRequestInit): Promise<Response> {
    const base = options.fetch ?? globalThis.fetch;
    const req = typeof Request !== 'undefined' && input instanceof Request ? input : undefined;
    const url = new URL(req ? req.url : typeof input === 'string' ? input : (input as URL).href);
    const method = (init?.method ?? req?.method ?? 'GET').toUpperCase();
    const headers = new Headers(init?.headers ?? req?.headers);
    const replayable = init?.body !== undefined ? replayableBody(init.body) : true;
    let hasPolicy: boolean;
    try {
      hasPolicy = settings.maxAttempts > 1 && replayable && policy(method, headers);
    } catch {
      hasPolicy = false;
    }
    const signal = init?.signal ?? req?.signal;
    let peer: string;
    try {
      peer = peerOf(url);
    } catch {
      peer = url.host;
    }
    const lc = new LogicalCall(
      settings,
      budgets,
      budgets.for(peer),
      peer,
      hasPolicy,
      fault,
      signal,
      init?.deadline,
      ledgerFrom(),
      true
    );
    const peerOperation = (): string => peerOp(method, url);
    const parent = context.active();
    for (let n = 0; ; n++) {
      const a = new Attempt(lc, n);
      let attemptInput: string | URL | Request = input;
      let attemptInit: RequestInit | undefined = init;
      if (req) attemptInput = req.clone();
      if (n > 0) {
        const h = new Headers(init?.headers ?? req?.headers);
        h.set(HTTP_RETRY_ATTEMPT_HEADER, String(n));
        attemptInit = { ...init, headers: h };
      }
      let res: Response | undefined;
      let err: unknown;
      try {
        res = await context.with(a.context(parent), () => base(attemptInput, attemptInit));
      } catch (e) {
        err = e;
      }
      if (res) {
        const v = res.headers.get('error-claim');
        a.settle(res.status, v === null ? [] : [trimOWS(v)]);
      } else {
        a.settle(undefined, undefined);
      }
      const end = await finishAttempt(a, peerOperation, res, err, discardBody, signal);
      if (end.done) return end.res;
    }
  };
}

let defaultFetch: HookedFetch | undefined;

/** A fetch with the hooks and the default options (no hints: every edge unknown, default budgets). */
export function fetchWithHooks(input: string | URL | Request, init?: HookedRequestInit): Promise<Response> {
  defaultFetch ??= createFetch();
  return defaultFetch(input, init);
}
