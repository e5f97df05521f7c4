// SPDX-License-Identifier: Apache-2.0

import * as http from 'node:http';
import * as https from 'node:https';
import { context } from '@opentelemetry/api';
import { ledgerFrom } from '../ledger';
import { HTTP_RETRY_ATTEMPT_HEADER } from '../ownership';
import { Budgets, resolveSettings } from '../retrying';
import { Attempt, LogicalCall, finishAttempt, rawValues } from './attempt';
import { HttpClientOptions, idempotent, operationOf, peerAddress, serverFault } from './common';

/** http.request's options, plus the body to send (sent again on each retry) and an optional deadline. */
export interface HookedRequestOptions extends http.RequestOptions {
  /** The request body; a string or bytes, so that a retry can send it again. */
  body?: string | Uint8Array;
  /** An absolute deadline (ms since the epoch) no retry may start past. */
  deadline?: number;
}

export interface HttpRequestClient {
  /**
   * Performs a request with node:http or node:https, with the hooks'
   * retries, and resolves with the final response (its body unread), or
   * rejects with the last attempt's error.
   */
  request(url: string | URL, options?: HookedRequestOptions): Promise<http.IncomingMessage>;
}

const MAX_DRAIN = 64 << 10;
const DRAIN_TIMEOUT_MS = 1000;

/** Reads what is left of a failed attempt's body in the background (64 KiB, 1 s at most), then drops it. */
export function discard(res: http.IncomingMessage): void {
  let n = 0;
  const timer = setTimeout(() => res.destroy(), DRAIN_TIMEOUT_MS);
  timer.unref();
  res.on('data', (c: Buffer) => {
    n += c.length;
    if (n > MAX_DRAIN) {
      clearTimeout(timer);
      res.destroy();
    }
  });
  res.on('end', () => clearTimeout(timer));
  res.on('close', () => clearTimeout(timer));
  res.on('error', () => clearTimeout(timer));
}

export function toHeaders(h: http.OutgoingHttpHeaders | readonly string[] | undefined): Headers {
  const out = new Headers();
  if (!h) return out;
  if (Array.isArray(h)) {
    for (let i = 0; i + 1 < h.length; i += 2) out.append(String(h[i]), String(h[i + 1]));
    return out;
  }
  for (const [k, v] of Object.entries(h as http.OutgoingHttpHeaders)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) v.forEach(x => out.append(k, String(x)));
    else out.set(k, String(v));
  }
  return out;
}

/**
 * Returns a client whose request() performs http.request-style calls with
 * the hooks: retries by the decision matrix within a per-peer budget,
 * Retry-Attempt on retries, the outcome recorded in the active request's
 * Ledger. Under @opentelemetry/instrumentation-http each attempt is its own
 * CLIENT span; with httpHooks() in the instrumentation's config the hook
 * sets the attempt's attributes on it.
 */
export function createHttpClient(options: HttpClientOptions = {}): HttpRequestClient {
  const settings = resolveSettings(options);
  const budgets = new Budgets(options.budget, options.hints);
  const policy = options.retryPolicy ?? idempotent;
  const fault = options.fault ?? serverFault;
  const peerOf = options.peerService ?? peerAddress;
  const peerOp = options.peerOperation ?? operationOf;

  async function request(target: string | URL, opts: HookedRequestOptions = {}): Promise<http.IncomingMessage> {
    const url = new URL(String(target));
    const { body, deadline, ...reqOpts } = opts;
    const method = (reqOpts.method ?? 'GET').toUpperCase();
    let hasPolicy: boolean;
    try {
      hasPolicy = settings.maxAttempts > 1 && policy(method, toHeaders(reqOpts.headers));
    } catch {
      hasPolicy = false;
    }
    let peer: string;
    try {
      peer = peerOf(url);
    } catch {
      peer = url.host;
    }
    const signal = reqOpts.signal;
    const lc = new LogicalCall(
      settings,
      budgets,
      budgets.for(peer),
      peer,
      hasPolicy,
      fault,
      signal,
      deadline,
      ledgerFrom(),
      true
    );
    const peerOperation = (): string => peerOp(method, url);
    const mod = url.protocol === 'https:' ? https : http;
    const parent = context.active();
    for (let n = 0; ; n++) {
      const a = new Attempt(lc, n);
      let headers = reqOpts.headers;
      if (n > 0) {
        if (Array.isArray(headers)) headers = [...(headers as readonly string[]), HTTP_RETRY_ATTEMPT_HEADER, String(n)];
        else headers = { ...(headers as http.OutgoingHttpHeaders | undefined), [HTTP_RETRY_ATTEMPT_HEADER]: String(n) };
      }
      let res: http.IncomingMessage | undefined;
      let err: unknown;
      try {
        res = await context.with(
          a.context(parent),
          () =>
            new Promise<http.IncomingMessage>((resolve, reject) => {
              const r = mod.request(url, { ...reqOpts, method, headers: headers }, resolve);
              r.on('error', reject);
              r.end(body);
            })
        );
      } catch (e) {
        err = e;
      }
      if (res) a.settle(res.statusCode ?? 0, rawValues(res.rawHeaders, 'error-claim'));
      else a.settle(undefined, undefined);
      const end = await finishAttempt(a, peerOperation, res, err, discard, signal);
      if (end.done) return end.res;
    }
  }
  return { request };
}
