// SPDX-License-Identifier: Apache-2.0

import { context } from '@opentelemetry/api';
import { suppressTracing } from './suppress';
import { HintSource } from './claim';
import { HINTS_PATH, HintEdge, Hints, Mode, RetryBudgetLimits, decodeHints, defaultRetryBudget } from './ownership';
import { matchOperation } from './routes';

/** How long hints stay fresh when neither the response nor the document says. */
export const DEFAULT_TTL_MS = 30_000;
/** How long the last good hints are used after the collector last confirmed them. */
export const DEFAULT_MAX_STALE_MS = 5 * 60_000;
/** The fetch timeout. */
export const DEFAULT_FETCH_TIMEOUT_MS = 5_000;
const MIN_POLL_MS = 1_000;
const MAX_POLL_MS = 10 * 60_000;
const MAX_ERROR_BACKOFF_MS = 60_000;
/** At most this much of a hints body is read. */
export const MAX_HINTS_BODY = 1 << 20;
/** An ETag longer than this is not kept. */
export const MAX_ETAG = 1 << 10;

export interface HintClientOptions {
  /** Extra request headers, such as Authorization. */
  headers?: Record<string, string>;
  /** Per-fetch timeout, ms (default 5 s). */
  fetchTimeoutMs?: number;
  /** The clock, ms (default Date.now). */
  now?: () => number;
  /** How long the last good hints are kept without confirmation, ms (default 5 min). */
  maxStaleMs?: number;
  /** The fetch to use (default the global fetch). */
  fetch?: typeof fetch;
}

/** What one fetch did: when to fetch again, and the error if it failed. */
export interface RefreshResult {
  nextMs: number;
  error?: Error;
}

interface State {
  hints: Hints;
  index: Index;
  limits: RetryBudgetLimits;
  checked: number;
}

/**
 * Polls a collector for one service's ownership hints (docs/design.md §9.3)
 * at GET {baseURL}/v1/hints?service=NAME, and answers the hooks' questions
 * from the last good answer. mode() and budgetLimits() never wait on a
 * fetch: before the first good answer, and once the last good one is more
 * than maxStale old, every edge is unknown and the budget is the default.
 */
export class HintClient implements HintSource {
  readonly url: string;
  private readonly service: string;
  private readonly headers: Record<string, string>;
  private readonly now: () => number;
  private readonly maxStale: number;
  private readonly timeout: number;
  private readonly fetchImpl: typeof fetch | undefined;
  private state: State | undefined;
  private etag = '';
  private failures = 0;
  private chain: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(baseURL: string, service: string, options: HintClientOptions = {}) {
    this.url = baseURL.replace(/\/$/, '') + HINTS_PATH + '?service=' + encodeURIComponent(service);
    this.service = service;
    this.headers = { ...(options.headers ?? {}) };
    this.now = options.now ?? Date.now;
    this.maxStale = options.maxStaleMs ?? DEFAULT_MAX_STALE_MS;
    this.timeout = options.fetchTimeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS;
    this.fetchImpl = options.fetch;
  }

  /** Starts polling: now, then as each answer says. The timer never keeps the process alive. */
  start(): this {
    this.stopped = false;
    this.schedule(0);
    return this;
  }

  /** Stops polling. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.refresh().then(r => this.schedule(r.nextMs));
    }, ms);
    this.timer.unref();
  }

  /** Fetches once (serialised with other refreshes) and says when to fetch again. Never rejects. */
  refresh(): Promise<RefreshResult> {
    const run = this.chain.then(() => this.refreshOnce());
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async refreshOnce(): Promise<RefreshResult> {
    try {
      const nextMs = await this.fetchOnce();
      this.failures = 0;
      return { nextMs };
    } catch (e) {
      this.failures++;
      const nextMs = Math.min(1000 * 2 ** Math.min(this.failures - 1, 6), MAX_ERROR_BACKOFF_MS);
      return { nextMs, error: e instanceof Error ? e : new Error(String(e)) };
    }
  }

  private async fetchOnce(): Promise<number> {
    const f = this.fetchImpl ?? globalThis.fetch;
    const headers: Record<string, string> = { ...this.headers, Accept: 'application/json' };
    const old = this.state;
    const revalidate = old !== undefined && this.etag !== '';
    if (revalidate) headers['If-None-Match'] = this.etag;
    const ac = new AbortController();
    const timer =
      this.timeout > 0
        ? setTimeout(() => ac.abort(new Error(`hints: fetch timed out after ${this.timeout} ms`)), this.timeout)
        : undefined;
    timer?.unref();
    try {
      let res: Response;
      try {
        // Untraced: under instrumentation-undici (or -http, for a fetch of
        // the caller's) each poll would otherwise be a root CLIENT span, a
        // trace of its own that the collector would count as unlinked, and a
        // poll started from inside a request would join that request's trace.
        res = await context.with(suppressTracing(context.active()), () => f(this.url, { headers, signal: ac.signal }));
      } catch (e) {
        throw new Error(`hints: ${this.shown()}: ${ac.signal.aborted ? String(ac.signal.reason) : describe(e)}`, {
          cause: e,
        });
      }
      if (res.status === 304 && revalidate && old) {
        void res.body?.cancel().catch(() => undefined);
        this.state = { ...old, checked: this.now() };
        return pollAfter(res.headers.get('cache-control'), old.hints);
      }
      if (res.status !== 200) {
        void res.body?.cancel().catch(() => undefined);
        throw new Error(`hints: ${this.shown()}: ${res.status} ${res.statusText}`);
      }
      const body = await readLimited(res, MAX_HINTS_BODY);
      let doc: unknown;
      try {
        doc = JSON.parse(body);
      } catch (e) {
        throw new Error(`hints: ${this.shown()}: ${describe(e)}`, { cause: e });
      }
      const h = decodeHints(doc, this.service);
      this.state = {
        hints: h,
        index: new Index(h.edges),
        limits: h.retry_budget ?? defaultRetryBudget(),
        checked: this.now(),
      };
      const etag = res.headers.get('etag') ?? '';
      this.etag = etag.length > MAX_ETAG ? '' : etag;
      return pollAfter(res.headers.get('cache-control'), h);
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  /** The URL without its credentials, for messages. */
  private shown(): string {
    try {
      const u = new URL(this.url);
      if (u.password) u.password = 'xxxxx';
      return u.toString();
    } catch {
      return '(a URL that cannot be parsed)';
    }
  }

  private current(): State | undefined {
    const st = this.state;
    if (!st || this.now() - st.checked > this.maxStale) return undefined;
    return st;
  }

  /** The mode of the edge (operation → peer, peerOperation); "unknown" when nothing says. Never throws. */
  mode(operation: string, peer: string, peerOperation: string): Mode {
    const st = this.current();
    if (!st) return 'unknown';
    return st.index.mode(operation ?? '', peer ?? '', peerOperation ?? '');
  }

  /** The retry budget's limits the hints give, or the defaults. */
  budgetLimits(): RetryBudgetLimits {
    const st = this.current();
    return st ? { ...st.limits } : defaultRetryBudget();
  }

  /** The last good hints, while not stale. */
  hints(): Hints | undefined {
    return this.current()?.hints;
  }
}

/** Starts a HintClient polling baseURL for service. */
export function startHints(baseURL: string, service: string, options?: HintClientOptions): HintClient {
  return new HintClient(baseURL, service, options).start();
}

function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

async function readLimited(res: Response, limit: number): Promise<string> {
  if (!res.body) return '';
  const reader: ReadableStreamDefaultReader<Uint8Array> = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > limit) {
      void reader.cancel().catch(() => undefined);
      throw new Error(`hints: body over ${limit} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function secondsMs(n: number): number {
  return n > MAX_POLL_MS / 1000 ? MAX_POLL_MS + 1000 : n * 1000;
}

function maxAge(cc: string | null): number | undefined {
  if (!cc) return undefined;
  for (const part of cc.split(',')) {
    const p = part.trim();
    const i = p.indexOf('=');
    if (i < 0) continue;
    // Only ASCII may spell max-age: toLowerCase folds some non-ASCII letters into it.
    // eslint-disable-next-line no-control-regex
    if (p.slice(0, i).toLowerCase() !== 'max-age' || /[^\x00-\x7f]/.test(p.slice(0, i))) continue;
    const v = p.slice(i + 1).replace(/^"+|"+$/g, '');
    if (!/^[+-]?[0-9]+$/.test(v)) return undefined;
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 0) return undefined;
    return secondsMs(n);
  }
  return undefined;
}

/** When to fetch again after a good answer: max-age, else ttl_seconds, else 30 s; within [1 s, 10 min]. */
export function pollAfter(cacheControl: string | null, h: Hints | undefined): number {
  let d = DEFAULT_TTL_MS;
  const age = maxAge(cacheControl);
  if (age !== undefined) d = age;
  else if (h && h.ttl_seconds > 0) d = secondsMs(h.ttl_seconds);
  return Math.min(Math.max(d, MIN_POLL_MS), MAX_POLL_MS);
}

/** Go's net.SplitHostPort, reduced to what the index needs: the host, and whether a port was there. */
export function splitPort(addr: string): [string, boolean] {
  if (addr.startsWith('[')) {
    const end = addr.indexOf(']');
    if (end < 0 || addr[end + 1] !== ':') return [addr, false];
    const port = addr.slice(end + 2);
    if (port === '' || port.includes(':')) return [addr, false];
    return [addr.slice(1, end), true];
  }
  const i = addr.lastIndexOf(':');
  if (i < 0 || addr.indexOf(':') !== i) return [addr, false];
  if (i === addr.length - 1) return [addr, false];
  return [addr.slice(0, i), true];
}

class Index {
  private readonly byPeer = new Map<string, number[]>();
  private readonly portless = new Map<string, number[]>();
  private readonly ported = new Map<string, number[]>();

  constructor(private readonly edges: readonly HintEdge[]) {
    edges.forEach((e, n) => {
      add(this.byPeer, e.peer_service, n);
      for (const a of e.peer_addresses ?? []) {
        if (a === e.peer_service) continue;
        add(this.byPeer, a, n);
        const [host, ok] = splitPort(a);
        add(ok ? this.ported : this.portless, ok ? host : a, n);
      }
    });
  }

  mode(operation: string, peer: string, peerOperation: string): Mode {
    let cands = this.byPeer.get(peer) ?? [];
    if (cands.length === 0) {
      const [host, ok] = splitPort(peer);
      cands = (ok ? this.portless.get(host) : this.ported.get(peer)) ?? [];
    }
    let mine = false;
    if (operation !== '') {
      mine = cands.some(i => matchOperation(this.edges[i].operation, operation));
    }
    let open = 0;
    let close = 0;
    let unknown = 0;
    for (const i of cands) {
      const e = this.edges[i];
      if (
        (mine && !matchOperation(e.operation, operation)) ||
        (peerOperation !== '' && !matchOperation(e.peer_operation, peerOperation))
      ) {
        continue;
      }
      if (e.mode === 'fail_open') open++;
      else if (e.mode === 'fail_close') close++;
      else unknown++;
    }
    if (close > 0) return 'fail_close';
    if (open > 0 && unknown === 0) return 'fail_open';
    return 'unknown';
  }
}

function add(m: Map<string, number[]>, k: string, n: number): void {
  const l = m.get(k);
  if (!l) {
    m.set(k, [n]);
    return;
  }
  if (l[l.length - 1] !== n) l.push(n);
}
