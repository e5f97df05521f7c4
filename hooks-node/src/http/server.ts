// SPDX-License-Identifier: Apache-2.0

import type { IncomingMessage, ServerResponse, OutgoingHttpHeaders } from 'node:http';
import { Span, context, createContextKey, trace } from '@opentelemetry/api';
import { HintSource, ModeFunc } from '../claim';
import { Ledger, runWithLedger } from '../ledger';
import { ATTR_CLAIM, ATTR_CLAIM_REASON, HTTP_CLAIM_HEADER, claimOfValues } from '../ownership';
import { serverFault } from './common';

/** Options of the HTTP server hooks. */
export interface ServerHooksOptions {
  /** Edge modes; without them every edge is unknown (fail-close). */
  hints?: HintSource;
  /** Which statuses are server faults, to claim (default 500 and above). */
  fault?: (status: number) => boolean;
  /** How to name the inbound operation for hint lookups (default: "METHOD route", else "METHOD /path"). */
  operation?: (req: IncomingMessage) => string;
  /** Whether the request gave up waiting (default: the status is 504). A call still in flight counts too. */
  timedOut?: (req: IncomingMessage, status: number) => boolean;
}

/*
 * @opentelemetry/instrumentation-http puts the server span in the request's
 * context as RPC metadata (the key @opentelemetry/core's getRPCMetadata
 * reads; createContextKey makes the same symbol), so the hooks find the
 * server span even inside a framework instrumentation's middleware span.
 */
const RPC_METADATA_KEY = createContextKey('OpenTelemetry SDK Context Key RPC_METADATA');

function serverSpan(): Span | undefined {
  const ctx = context.active();
  const md = ctx.getValue(RPC_METADATA_KEY) as { span?: Span } | undefined;
  return md?.span ?? trace.getSpan(ctx);
}

interface ExpressLike extends IncomingMessage {
  route?: { path?: unknown };
  baseUrl?: string;
  originalUrl?: string;
}

/** "METHOD route" when a framework (express) matched a route, else "METHOD /concrete/path". */
export function defaultOperation(req: IncomingMessage): string {
  const r = req as ExpressLike;
  const method = req.method ?? 'GET';
  if (r.route && typeof r.route.path === 'string') return `${method} ${r.baseUrl ?? ''}${r.route.path}`;
  const u = r.originalUrl ?? req.url ?? '/';
  const q = u.search(/[?#]/);
  return `${method} ${q >= 0 ? u.slice(0, q) : u}`;
}

function headerValues(v: unknown): string[] {
  if (v === undefined || v === null) return [];
  if (Array.isArray(v)) return v.map(String);
  // Whatever a handler passed, stringified as node:http would send it.
  // eslint-disable-next-line @typescript-eslint/no-base-to-string
  return [String(v)];
}

/** The Error-Claim values in writeHead's headers argument, and the argument without them. */
function splitHeadersArg(arg: unknown): [string[], unknown] {
  const name = HTTP_CLAIM_HEADER.toLowerCase();
  if (Array.isArray(arg)) {
    const vals: string[] = [];
    if (arg.length > 0 && Array.isArray(arg[0])) {
      const rest = (arg as unknown[][]).filter(p => {
        if (String(p[0]).toLowerCase() !== name) return true;
        vals.push(...headerValues(p[1]));
        return false;
      });
      return [vals, rest];
    }
    const rest: unknown[] = [];
    for (let i = 0; i + 1 < arg.length; i += 2) {
      if (String(arg[i]).toLowerCase() === name) vals.push(String(arg[i + 1]));
      else rest.push(arg[i], arg[i + 1]);
    }
    return [vals, rest];
  }
  if (arg && typeof arg === 'object') {
    const vals: string[] = [];
    const rest: OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(arg as OutgoingHttpHeaders)) {
      if (k.toLowerCase() === name) vals.push(...headerValues(v));
      else rest[k] = v;
    }
    return [vals, rest];
  }
  return [[], arg];
}

/**
 * Attaches the server hooks to one request: returns the request's Ledger,
 * and wraps res.writeHead (through which Node writes every status, implicit
 * ones included) so that a server-fault response gets its Error-Claim just
 * before its headers are sent. A handler's own valid claim wins; any other
 * value (a relayed callee's garbage) is replaced. Run the handler with
 * runWithLedger(ledger, …) so its client calls find the ledger.
 */
export function attachServerHooks(req: IncomingMessage, res: ServerResponse, options: ServerHooksOptions = {}): Ledger {
  const ledger = new Ledger();
  const span = serverSpan();
  const fault = options.fault ?? serverFault;
  // Called with the response as this, as Node calls it.
  // eslint-disable-next-line @typescript-eslint/unbound-method
  const original = res.writeHead;
  let decided = false;
  res.writeHead = function writeHead(this: ServerResponse, ...args: unknown[]): ServerResponse {
    const code = Number(args[0]);
    if (!decided && code >= 200) {
      decided = true;
      try {
        if (fault(code) && !res.headersSent) {
          const i = args.length > 1 && typeof args[args.length - 1] === 'object' ? args.length - 1 : -1;
          const replaced = decide(req, res, code, i >= 0 ? args[i] : undefined, ledger, span, options);
          if (i >= 0) args[i] = replaced;
        }
      } catch {
        // the hooks never fail a response
      }
    }
    return (original as (...a: unknown[]) => ServerResponse).apply(this, args);
  };
  return ledger;
}

function decide(
  req: IncomingMessage,
  res: ServerResponse,
  code: number,
  headersArg: unknown,
  ledger: Ledger,
  span: Span | undefined,
  options: ServerHooksOptions
): unknown {
  const [argVals, rest] = splitHeadersArg(headersArg);
  const all = [...headerValues(res.getHeader(HTTP_CLAIM_HEADER)), ...argVals];
  if (all.length > 0) {
    const own = claimOfValues(all);
    if (own !== 'missing') {
      if (span?.isRecording()) span.setAttribute(ATTR_CLAIM, own);
      return headersArg;
    }
    res.removeHeader(HTTP_CLAIM_HEADER);
  }
  let modes: ModeFunc | undefined;
  const src = options.hints;
  if (src) {
    let op = '';
    try {
      op = (options.operation ?? defaultOperation)(req);
    } catch {
      op = '';
    }
    modes = (peer, peerOp) => {
      try {
        return src.mode(op, peer, peerOp);
      } catch {
        return 'unknown';
      }
    };
  }
  const timedOut = options.timedOut ? options.timedOut(req, code) : code === 504;
  const { claim, reason } = ledger.decide(modes, timedOut);
  res.setHeader(HTTP_CLAIM_HEADER, claim);
  if (span?.isRecording()) {
    span.setAttribute(ATTR_CLAIM, claim);
    span.setAttribute(ATTR_CLAIM_REASON, reason);
  }
  return rest;
}

type Next = (err?: unknown) => void;

/**
 * Express (or connect) middleware: put it first, before the routes. The
 * rest of the chain runs with a Ledger in the active context.
 */
export function expressMiddleware(
  options: ServerHooksOptions = {}
): (req: IncomingMessage, res: ServerResponse, next: Next) => void {
  return function errorOwnership(req, res, next) {
    const ledger = attachServerHooks(req, res, options);
    runWithLedger(ledger, () => next());
  };
}

/** Wraps a plain http.Server request listener with the server hooks. */
export function wrapRequestListener<Req extends IncomingMessage, Res extends ServerResponse>(
  listener: (req: Req, res: Res) => void,
  options: ServerHooksOptions = {}
): (req: Req, res: Res) => void {
  return function hooked(req, res) {
    const ledger = attachServerHooks(req, res, options);
    return runWithLedger(ledger, () => listener(req, res));
  };
}
