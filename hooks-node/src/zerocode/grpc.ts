// SPDX-License-Identifier: Apache-2.0

import type * as grpc from '@grpc/grpc-js';
// eslint-disable-next-line @typescript-eslint/no-require-imports
import Module = require('node:module');
import { Span, context, createContextKey, trace } from '@opentelemetry/api';
import { HintSource } from '../claim';
import { ledgerFrom } from '../ledger';
import { Budgets, Resolved, resolveSettings } from '../retrying';
import { isSuppressed } from '../suppress';
import { Attempt, LogicalCall } from '../http/attempt';
import {
  DEFAULT_FAULT_CODES,
  Handler,
  ServerClaimOptions,
  isMetadata,
  operation,
  serverInterceptor,
  settleStatus,
  targetAddress,
  wrapHandler,
} from '../grpc';
import { GRPC_PREVIOUS_ATTEMPTS_KEY } from '../ownership';
import { Nesting } from './client';

/*
 * @grpc/grpc-js under the preload, with @opentelemetry/instrumentation-grpc
 * or without it. Every copy of grpc-js the service requires is patched:
 *
 * Server: Server.prototype.register (every addService goes through it) puts
 * the hooks' server interceptor (src/grpc.ts) last on the server, where it
 * keeps the ledger and claims the status, and wraps the handler it
 * registers (src/grpc.ts's wrapHandler, what the library's wrapGrpcServer
 * does). The instrumentation wraps that handler in turn, after register,
 * whichever patched first: so the handler's wrapper runs inside the
 * instrumentation's SERVER span (which it starts from the ROOT context: the
 * wrapper puts the call's ledger back) and, for unary and client-streaming
 * calls, decides the claim when the handler answers, before the
 * instrumentation's callback ends its span. Streaming responses are
 * claimed by the interceptor at their status, their span ended already.
 *
 * Client: the instrumentation makes one CLIENT span per call of a client
 * method (the generated methods, and Client.prototype.make*Request), so the
 * hooks' retry wraps those methods outermost, each attempt a call of the
 * instrumented method, and the instrumentation's own factories are made to
 * return their wrappers inside the hooks' (instrumentations.ts), whichever
 * preload ran first. The attempt's span gets its attributes from a patch of
 * Channel.prototype.createCall, which sees the status before the
 * instrumentation's callback ends the span. Unary calls are retried by the
 * rules; streaming calls cannot be retried unseen (their messages are the
 * caller's as they come), so each is recorded, its span annotated, decision
 * no_policy.
 */

interface Hooks {
  budgets: Budgets;
  settings: Resolved;
  once: Resolved;
  claims: ServerClaimOptions;
  interceptor: grpc.ServerInterceptor;
}

let hooks: Hooks | undefined;

const PATCHED = Symbol.for('errorownership.zerocode.grpc');
/** The hooks' method wrappers (not a mark on them: the instrumentation copies a method's own properties onto its wrapper). */
const ours = new WeakSet<object>();
/** The attempt being made, and the span that was active outside it (not the attempt's). */
const ATTEMPT = createContextKey('errorownership grpc attempt');

interface AttemptCtx {
  a: Attempt;
  outer: Span | undefined;
}

type Fn = ((this: unknown, ...args: unknown[]) => unknown) & {
  path?: string;
  requestStream?: boolean;
  responseStream?: boolean;
};

const nesting = new Nesting();
const passThrough = nesting.passThrough;

function replace(obj: object, name: string, value: unknown): void {
  Object.defineProperty(obj, name, { value, writable: true, configurable: true, enumerable: true });
}

// ---- server ----

function patchServer(h: Hooks, Server: { prototype: object }): void {
  const proto = Server.prototype as { register?: Fn };
  const register = proto.register;
  if (typeof register !== 'function') return;
  replace(proto, 'register', function (this: { interceptors?: unknown }, ...args: unknown[]): unknown {
    try {
      const list: unknown = this.interceptors;
      if (Array.isArray(list) && !list.includes(h.interceptor))
        this.interceptors = [...(list as unknown[]), h.interceptor];
      if (typeof args[1] === 'function') args[1] = wrapHandler(args[1] as Handler);
    } catch {
      // the server runs without the hooks
    }
    return register.apply(this, args);
  });
}

// ---- client ----

interface UnaryArgs {
  metadata?: grpc.Metadata;
  options: grpc.CallOptions;
  callback: (err: unknown, value?: unknown) => void;
}

/** grpc-js's optional unary arguments: ([metadata][, options], callback). */
function unaryArgs(a: unknown[]): UnaryArgs | undefined {
  const fn = (x: unknown): x is UnaryArgs['callback'] => typeof x === 'function';
  const [a1, a2, a3] = a;
  if (fn(a1) && !isMetadata(a1)) return { options: {}, callback: a1 };
  if (fn(a2)) return isMetadata(a1) ? { metadata: a1, options: {}, callback: a2 } : { options: a1 ?? {}, callback: a2 };
  if (isMetadata(a1) && typeof a2 === 'object' && a2 !== null && fn(a3))
    return { metadata: a1, options: a2, callback: a3 };
  return undefined;
}

function peerOf(client: unknown): string {
  try {
    return targetAddress((client as grpc.Client).getChannel().getTarget());
  } catch {
    return '';
  }
}

function deadlineOf(o: grpc.CallOptions): number | undefined {
  const d = o.deadline;
  const t = d instanceof Date ? d.getTime() : typeof d === 'number' ? d : undefined;
  return t !== undefined && Number.isFinite(t) ? t : undefined;
}

type UnaryCall = grpc.ClientUnaryCall & { call?: unknown };
type MetadataClass = new () => grpc.Metadata;

/** The call the caller holds, as grpc-js makes it, for the attempts behind it. */
function callLike(first: UnaryCall): UnaryCall {
  try {
    const Ctor = (Object.getPrototypeOf(first) as { constructor: new () => UnaryCall }).constructor;
    return new Ctor();
  } catch {
    return first;
  }
}

function cancelled(Metadata: MetadataClass): { err: Error; status: grpc.StatusObject } {
  const status = { code: 1, details: 'Cancelled on client', metadata: new Metadata() };
  return { err: Object.assign(new Error('1 CANCELLED: Cancelled on client'), status), status };
}

/**
 * One unary call, retried by the rules: each attempt is invoke() (the
 * instrumented method, making its CLIENT span) with the attempt in the
 * context; the caller gets one call object, the final attempt's metadata,
 * callback and status.
 */
function unary(
  h: Hooks,
  client: unknown,
  path: string,
  Metadata: MetadataClass,
  u: UnaryArgs,
  invoke: (md: grpc.Metadata, cb: UnaryArgs['callback']) => UnaryCall
): UnaryCall {
  const parent = context.active();
  const outer = trace.getSpan(parent);
  const peer = peerOf(client);
  const ac = new AbortController();
  const b = h.budgets;
  const lc = new LogicalCall(
    h.settings,
    b,
    b.for(peer),
    peer,
    h.settings.maxAttempts > 1,
    c => h.claims.faults.has(c),
    ac.signal,
    deadlineOf(u.options),
    ledgerFrom(parent),
    false
  );
  const peerOp = (): string => operation(path);
  const base = u.metadata ?? new Metadata();
  // Made from the first attempt's call, which the attempts' closures see before it exists.
  // eslint-disable-next-line prefer-const
  let caller: UnaryCall | undefined;
  let timer: NodeJS.Timeout | undefined;
  let last: Attempt | undefined;

  const attempt = (n: number): UnaryCall => {
    const a = new Attempt(lc, n);
    last = a;
    const md = base.clone();
    if (n > 0) md.set(GRPC_PREVIOUS_ATTEMPTS_KEY, String(n));
    let got: grpc.Metadata | undefined;
    let final = false;
    const cb = (err: unknown, value?: unknown): void => {
      try {
        const e = err as { code?: number; metadata?: grpc.Metadata } | null | undefined;
        settleStatus(a, e ? (e.code ?? 2) : 0, e?.metadata);
        a.annotate();
      } catch {
        // the hooks never fail a call
      }
      if (a.failed && a.decision === 'retried' && !ac.signal.aborted) {
        timer = setTimeout(() => {
          timer = undefined;
          next(n + 1);
        }, a.delay);
        return;
      }
      final = true;
      a.end(peerOp);
      if (got) caller?.emit('metadata', got);
      u.callback(err, value);
    };
    const call = context.with(parent.setValue(ATTEMPT, { a, outer }), () => passThrough(() => invoke(md, cb)));
    call.on('metadata', (m: grpc.Metadata) => (got = m));
    call.on('status', (s: grpc.StatusObject) => {
      if (final) caller?.emit('status', s);
    });
    if (caller) caller.call = call.call;
    return call;
  };

  const next = (n: number): void => {
    try {
      attempt(n);
    } catch (e) {
      last?.end(peerOp);
      u.callback(e);
    }
  };

  let first: UnaryCall;
  try {
    first = attempt(0);
  } catch (e) {
    last?.settle(undefined, undefined);
    last?.end(peerOp);
    throw e;
  }
  caller = callLike(first);
  caller.call = first.call;
  const cancel = caller.cancel.bind(caller);
  caller.cancel = (): void => {
    ac.abort();
    if (!timer) return cancel();
    // Cancelled while waiting for the next attempt: the caller gets what grpc-js gives a cancelled call.
    clearTimeout(timer);
    timer = undefined;
    last?.end(peerOp, true);
    const c = cancelled(Metadata);
    queueMicrotask(() => {
      u.callback(c.err);
      caller?.emit('status', c.status);
    });
  };
  return caller;
}

/** A streaming call, made once and recorded: decision no_policy on a server fault. */
function streaming(h: Hooks, client: unknown, path: string, invoke: () => unknown): unknown {
  const parent = context.active();
  const peer = peerOf(client);
  const b = h.budgets;
  const lc = new LogicalCall(
    h.once,
    b,
    b.for(peer),
    peer,
    false,
    c => h.claims.faults.has(c),
    undefined,
    undefined,
    ledgerFrom(parent),
    false
  );
  const a = new Attempt(lc, 0);
  const call = context.with(parent.setValue(ATTEMPT, { a, outer: trace.getSpan(parent) }), () => passThrough(invoke));
  (call as grpc.ClientReadableStream<unknown>).on?.('status', (s: grpc.StatusObject) => {
    try {
      settleStatus(a, s.code, s.metadata);
      a.annotate();
      a.end(() => operation(path));
    } catch {
      // the hooks never fail a call
    }
  });
  return call;
}

/**
 * A client method, wrapped: a generated one (`shape` method: (argument,
 * [metadata], [options], callback) for unary ones), or Client.prototype's
 * make*Request (`shape` request: (path, serialize, deserialize, ...the rest)).
 */
function wrapMethod(Metadata: MetadataClass, inner: Fn, shape: 'method' | 'request', kind?: string): Fn {
  if (ours.has(inner)) return inner;
  const w: Fn = function (this: unknown, ...args: unknown[]): unknown {
    const h = hooks;
    if (!h || nesting.depth > 0 || isSuppressed(context.active())) return inner.apply(this, args);
    const pre = shape === 'request' ? args.slice(0, 3) : [];
    const rest = shape === 'request' ? args.slice(3) : args;
    const path = String(shape === 'request' ? args[0] : (inner.path ?? ''));
    const isUnary =
      shape === 'request'
        ? kind === 'makeUnaryRequest'
        : inner.requestStream === false && inner.responseStream === false;
    if (!isUnary) return streaming(h, this, path, () => inner.apply(this, args));
    const u = unaryArgs(rest.slice(1));
    if (!u) return inner.apply(this, args); // grpc-js says what is wrong with them
    return unary(
      h,
      this,
      path,
      Metadata,
      u,
      (md, cb) => inner.call(this, ...pre, rest[0], md, u.options, cb) as UnaryCall
    );
  };
  Object.assign(w, inner);
  ours.add(w);
  return w;
}

/** The hooks' wrapper over the instrumentation's wrapper of a generated method (its factory's result). */
export function outermostMethod(lib: unknown, f: unknown): unknown {
  const Md = metadataOf(lib);
  return typeof f === 'function' && Md ? wrapMethod(Md, f as Fn, 'method') : f;
}

/** The hooks' wrapper over the instrumentation's wrapper of Client.prototype[name]. */
export function outermostRequest(lib: unknown, f: unknown, name: unknown): unknown {
  const Md = metadataOf(lib);
  return typeof f === 'function' && typeof name === 'string' && Md ? wrapMethod(Md, f as Fn, 'request', name) : f;
}

function metadataOf(lib: unknown): MetadataClass | undefined {
  const m = (lib as { Metadata?: unknown } | null)?.Metadata;
  return typeof m === 'function' ? (m as MetadataClass) : undefined;
}

function wrapClass(Metadata: MetadataClass, cls: unknown): void {
  if (typeof cls !== 'function') return;
  const c = cls as { service?: Record<string, { originalName?: string }>; prototype: Record<string, unknown> };
  for (const [name, def] of Object.entries(c.service ?? {})) {
    for (const key of [name, def?.originalName]) {
      if (!key || !Object.prototype.hasOwnProperty.call(c.prototype, key)) continue;
      const m = c.prototype[key];
      if (typeof m === 'function') c.prototype[key] = wrapMethod(Metadata, m as Fn, 'method');
    }
  }
}

function wrapPackage(Metadata: MetadataClass, pkg: unknown, seen = new Set<unknown>()): void {
  if (typeof pkg !== 'object' || pkg === null || seen.has(pkg)) return;
  seen.add(pkg);
  for (const v of Object.values(pkg)) {
    if (typeof v === 'function') wrapClass(Metadata, v);
    else if (typeof (v as { format?: unknown } | null)?.format !== 'string') wrapPackage(Metadata, v, seen);
  }
}

const REQUESTS = ['makeUnaryRequest', 'makeClientStreamRequest', 'makeServerStreamRequest', 'makeBidiStreamRequest'];

function patchClient(g: Record<string, unknown>): void {
  const Metadata = metadataOf(g);
  if (!Metadata) return;
  for (const name of ['makeClientConstructor', 'makeGenericClientConstructor']) {
    const make = g[name];
    if (typeof make !== 'function') continue;
    replace(g, name, function (this: unknown, ...args: unknown[]): unknown {
      const cls = (make as Fn).apply(this, args);
      wrapClass(Metadata, cls);
      return cls;
    });
  }
  const load = g.loadPackageDefinition;
  if (typeof load === 'function')
    replace(g, 'loadPackageDefinition', function (this: unknown, ...args: unknown[]): unknown {
      const pkg = (load as Fn).apply(this, args);
      wrapPackage(Metadata, pkg);
      return pkg;
    });
  const proto = (g.Client as { prototype?: Record<string, unknown> } | undefined)?.prototype;
  if (proto)
    for (const name of REQUESTS)
      if (typeof proto[name] === 'function')
        replace(proto, name, wrapMethod(Metadata, proto[name] as Fn, 'request', name));
  const channel = (g.Channel as { prototype?: { createCall?: Fn } } | undefined)?.prototype;
  const createCall = channel?.createCall;
  if (channel && typeof createCall === 'function') replace(channel, 'createCall', annotating(createCall));
}

type Listener = { onReceiveStatus?: (s: grpc.StatusObject) => void };

/**
 * Channel.prototype.createCall, seeing each attempt's status before the
 * listeners above it: the instrumentation's callback ends its span, so the
 * attempt is settled and its attributes set here, on the span active when
 * the call was made if it is not the one outside the attempt.
 */
function annotating(createCall: Fn): Fn {
  return function (this: unknown, ...args: unknown[]): unknown {
    const call = createCall.apply(this, args) as { start?: (md: unknown, l: Listener) => unknown };
    try {
      const at = context.active().getValue(ATTEMPT) as AttemptCtx | undefined;
      const start = call?.start;
      if (!at || typeof start !== 'function') return call;
      const span = trace.getSpan(context.active());
      if (span && span !== at.outer && !at.a.span) at.a.span = span;
      call.start = function (this: unknown, md: unknown, listener: Listener): unknown {
        const l = Object.create(listener) as Listener;
        l.onReceiveStatus = (s: grpc.StatusObject): void => {
          try {
            settleStatus(at.a, s.code, s.metadata);
            at.a.annotate();
          } catch {
            // the hooks never fail a call
          }
          listener.onReceiveStatus?.(s);
        };
        return start.call(this, md, l);
      };
    } catch {
      // the call goes unannotated
    }
    return call;
  };
}

function patchGrpc(exports: unknown): void {
  const h = hooks;
  const g = exports as Record<string | symbol, unknown> | undefined;
  if (!h || typeof g !== 'object' || g === null || g[PATCHED]) return;
  g[PATCHED] = true;
  try {
    if (g.Server) patchServer(h, g.Server as { prototype: object });
    patchClient(g);
  } catch {
    // a grpc-js the hooks do not know: it runs without them
  }
}

/**
 * Patches every copy of @grpc/grpc-js the service requires (and those
 * loaded already): the hooks' server interceptor and handler wrapper, the
 * client retry (see above).
 */
export function hookGrpc(hints: HintSource, maxAttempts: number): void {
  if (hooks) return;
  const claims: ServerClaimOptions = { hints, faults: new Set(DEFAULT_FAULT_CODES) };
  hooks = {
    budgets: new Budgets(undefined, hints),
    settings: resolveSettings({ maxAttempts }),
    once: resolveSettings({ maxAttempts: 1 }),
    claims,
    interceptor: serverInterceptor(claims),
  };
  const proto = Module.prototype as unknown as { require: (this: unknown, id: string) => unknown };
  const req = proto.require;
  proto.require = function (this: unknown, id: string): unknown {
    // eslint-disable-next-line prefer-rest-params
    const m = req.apply(this, arguments as unknown as [string]);
    if (id === '@grpc/grpc-js') patchGrpc(m);
    return m;
  };
  for (const [file, m] of Object.entries(require.cache))
    if (/[\\/]@grpc[\\/]grpc-js[\\/]build[\\/]src[\\/]index\.js$/.test(file)) patchGrpc(m?.exports);
}
