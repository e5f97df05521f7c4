// SPDX-License-Identifier: Apache-2.0

/**
 * The @grpc/grpc-js hooks: a client interceptor that retries unary calls by
 * the decision matrix, and a server interceptor (grpc-js 1.10+) that claims
 * server faults in the error-claim trailer. Import from
 * "@errorownership/hooks/grpc".
 */
import type * as grpc from '@grpc/grpc-js';
import { Span, SpanKind, context, trace } from '@opentelemetry/api';
import { HintSource, ModeFunc } from './claim';
import { Ledger, ledgerFrom, runWithLedger } from './ledger';
import {
  ATTR_CLAIM,
  ATTR_CLAIM_REASON,
  GRPC_CLAIM_KEY,
  GRPC_PREVIOUS_ATTEMPTS_KEY,
  GRPC_PUSHBACK_KEY,
  claimOfValues,
} from './ownership';
import { Budgets, RetrySettings, resolveSettings } from './retrying';
import { Attempt, LogicalCall } from './http/attempt';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const g = (): typeof grpc => require('@grpc/grpc-js') as typeof grpc;

/** UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS. */
export const DEFAULT_FAULT_CODES: readonly number[] = [2, 4, 12, 13, 14, 15];

export interface GrpcHooksOptions extends RetrySettings {
  /** The address the client dials ("10.0.0.7:50051", "dns:///stock:443"): names the callee for budgets and hints. */
  target?: string;
  /** Names the callee instead of target (its service.name, say). */
  peerService?: string;
  /** Which methods may be retried (default: every one). */
  retryPolicy?: (path: string) => boolean;
  /** The status codes that are server faults (default DEFAULT_FAULT_CODES). */
  faultCodes?: readonly number[];
  /** Make a CLIENT span per attempt to carry the attempt's attributes (default true). */
  attemptSpans?: boolean;
}

/** The address in a gRPC target: "host:port" as is, the endpoint of "scheme:///host:port". */
export function targetAddress(target: string): string {
  // grpc-js's own form of a plain address (Channel.getTarget()): "dns:10.0.0.7:50051".
  target = target.replace(/^(?:dns|ipv4|ipv6):(?!\/)/i, '');
  if (/^[^/]*:\d+$/.test(target) && !target.includes('://')) return target;
  const m = /^[a-z][a-z0-9+.-]*:(?:\/\/[^/]*)?\/?(.+)$/i.exec(target);
  return m ? m[1] : target;
}

/** The operation of a method path: "pkg.Svc/Method". */
export function operation(path: string): string {
  return path.replace(/^\//, '');
}

/** Settles attempt a on its status: the claim read from the trailers of a status other than OK. */
export function settleStatus(a: Attempt, code: number, trailers: grpc.Metadata | undefined): void {
  a.settle(code, code === (g().status.OK as number) ? undefined : trailers?.get(GRPC_CLAIM_KEY));
}

const tracer = () => trace.getTracer('@errorownership/hooks');

/**
 * A client interceptor: pass it in the client's options
 * ({ interceptors: [grpcClientInterceptor({ target })] }). Unary calls are
 * retried where the decision matrix allows, with grpc-previous-rpc-attempts
 * on retries; streaming calls pass through. grpc-js's instrumentation makes
 * one span per call, not per attempt, so the hook makes a CLIENT span per
 * attempt (a child of the active span) and sets error_ownership.retry.attempt,
 * error_ownership.claim.received and error_ownership.retry.decision on it.
 */
export function grpcClientInterceptor(options: GrpcHooksOptions = {}): grpc.Interceptor {
  const settings = resolveSettings(options);
  const budgets = new Budgets(options.budget, options.hints);
  const faults = new Set(options.faultCodes ?? DEFAULT_FAULT_CODES);
  const fault = (code: number): boolean => faults.has(code);
  const peer = options.peerService ?? (options.target ? targetAddress(options.target) : '');
  const spans = options.attemptSpans ?? true;

  return (callOptions, nextCall) => {
    const { InterceptingCall, Metadata } = g();
    const def = callOptions.method_definition;
    if (def.requestStream || def.responseStream) return new InterceptingCall(nextCall(callOptions));
    const path = def.path;
    const parent = context.active();
    let hasPolicy = settings.maxAttempts > 1;
    try {
      if (hasPolicy && options.retryPolicy) hasPolicy = options.retryPolicy(path);
    } catch {
      hasPolicy = false;
    }
    const deadline =
      callOptions.deadline instanceof Date
        ? callOptions.deadline.getTime()
        : typeof callOptions.deadline === 'number'
          ? callOptions.deadline
          : undefined;
    const ac = new AbortController();
    const lc = new LogicalCall(
      settings,
      budgets,
      budgets.for(peer),
      peer,
      hasPolicy,
      fault,
      ac.signal,
      deadline,
      ledgerFrom(parent),
      false
    );
    const peerOp = (): string => operation(path);
    let metadata: grpc.Metadata;
    let message: unknown;
    let upstream: grpc.InterceptingListener;
    let current: ReturnType<typeof nextCall> | undefined;
    let timer: NodeJS.Timeout | undefined;
    let finished = false;

    const startSpan = (n: number): Span | undefined => {
      if (!spans) return undefined;
      const [service, method] = operation(path).split('/');
      return tracer().startSpan(
        `${operation(path)} attempt ${n}`,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            'rpc.system': 'grpc',
            'rpc.service': service ?? '',
            'rpc.method': method ?? '',
            ...(peer ? { 'server.address': peer } : {}),
          },
        },
        parent
      );
    };

    const listenerFor = (a: Attempt): grpc.InterceptingListener => {
      let md: grpc.Metadata | undefined;
      let msg: unknown;
      let gotMsg = false;
      return {
        onReceiveMetadata(m) {
          md = m;
        },
        onReceiveMessage(m) {
          msg = m;
          gotMsg = true;
        },
        onReceiveStatus(status) {
          settleStatus(a, status.code, status.metadata);
          a.annotate();
          a.span?.end();
          const done = (): void => {
            finished = true;
            a.end(peerOp);
            if (md) upstream.onReceiveMetadata(md);
            if (gotMsg) upstream.onReceiveMessage(msg);
            upstream.onReceiveStatus(status);
          };
          if (finished) return;
          if (!a.failed || a.decision !== 'retried' || ac.signal.aborted) return done();
          timer = setTimeout(() => {
            timer = undefined;
            if (ac.signal.aborted) return done();
            attempt(a.n + 1);
          }, a.delay);
        },
      };
    };

    const attempt = (n: number): void => {
      const a = new Attempt(lc, n);
      a.span = startSpan(n);
      const md = metadata.clone();
      md.set(GRPC_PREVIOUS_ATTEMPTS_KEY, String(n));
      current = nextCall(callOptions);
      current.start(md, listenerFor(a));
      current.sendMessage(message);
      current.halfClose();
    };

    let first: Attempt;
    return new InterceptingCall(nextCall(callOptions), {
      start(md, listener, next) {
        metadata = md ?? new Metadata();
        upstream = listener;
        first = new Attempt(lc, 0);
        first.span = startSpan(0);
        next(md, listenerFor(first));
      },
      sendMessage(msg, next) {
        message = msg;
        next(msg);
      },
      cancel(next) {
        ac.abort();
        if (timer) {
          clearTimeout(timer);
          timer = undefined;
        }
        current?.cancelWithStatus(1, 'Cancelled on client');
        next();
      },
    });
  };
}

/** What a server call's claim is decided from: the hints, the fault codes. */
export interface ServerClaimOptions {
  hints?: HintSource;
  faults: ReadonlySet<number>;
}

/**
 * The trailers a server-fault status leaves with (undefined: no fault, the
 * status goes as it is): a handler's own valid claim kept (with
 * grpc-retry-pushback-ms: -1 when unclaimed), any other value replaced by
 * the claim the ledger's calls and the hints decide; error_ownership.claim.sent
 * (and .reason, when decided here) set on span, if it records.
 */
export function claimTrailers(
  code: number,
  trailers: grpc.Metadata | undefined,
  ledger: Ledger,
  path: string,
  options: ServerClaimOptions,
  span: Span | undefined
): grpc.Metadata | undefined {
  if (!options.faults.has(code)) return undefined;
  const md = trailers ? trailers.clone() : new (g().Metadata)();
  const given = md.get(GRPC_CLAIM_KEY);
  const own = given.length > 0 ? claimOfValues(given) : 'missing';
  if (own !== 'missing') {
    if (own === 'unclaimed') md.set(GRPC_PUSHBACK_KEY, '-1');
    if (span?.isRecording()) span.setAttribute(ATTR_CLAIM, own);
    return md;
  }
  md.remove(GRPC_CLAIM_KEY);
  let modes: ModeFunc | undefined;
  const src = options.hints;
  if (src) {
    const op = operation(path);
    modes = (peer, peerOp) => {
      try {
        return src.mode(op, peer, peerOp);
      } catch {
        return 'unknown';
      }
    };
  }
  const { claim, reason } = ledger.decide(modes, code === (g().status.DEADLINE_EXCEEDED as number));
  md.set(GRPC_CLAIM_KEY, claim);
  if (claim === 'unclaimed') md.set(GRPC_PUSHBACK_KEY, '-1');
  if (span?.isRecording()) {
    span.setAttribute(ATTR_CLAIM, claim);
    span.setAttribute(ATTR_CLAIM_REASON, reason);
  }
  return md;
}

/** One server call under the server interceptor: its ledger, and whether its claim was decided already. */
export interface ServerCall {
  readonly ledger: Ledger;
  readonly path: string;
  /** The options of the interceptor that took the call: the handler's wrapper claims by them. */
  readonly options: ServerClaimOptions;
  decided: boolean;
  /** The span the handler ran in, when the active one at the status is not it. */
  span?: Span;
}

/*
 * Each call's ServerCall, by the metadata object the interceptor passes on:
 * grpc-js gives the handler that same object (call.metadata), so the
 * handler's wrapper finds the call through it inside whatever context an
 * instrumentation started for the handler.
 */
const serverCalls = new WeakMap<object, ServerCall>();

/**
 * The server interceptor of the options: the handler runs with the call's
 * ledger, and the status is claimed unless the handler's wrapper (wrapHandler)
 * claimed it already.
 */
export function serverInterceptor(options: ServerClaimOptions): grpc.ServerInterceptor {
  return (methodDescriptor, call) => {
    const { ServerInterceptingCall } = g();
    const sc: ServerCall = { ledger: new Ledger(), path: methodDescriptor.path, options, decided: false };
    const inLedger = <T>(fn: () => T): T => runWithLedger(sc.ledger, fn);
    return new ServerInterceptingCall(call, {
      start(next) {
        next({
          onReceiveMetadata(md, nxt) {
            if (typeof md === 'object' && md !== null) serverCalls.set(md, sc);
            inLedger(() => nxt(md));
          },
          onReceiveMessage(msg, nxt) {
            inLedger(() => nxt(msg));
          },
          onReceiveHalfClose(nxt) {
            inLedger(() => {
              sc.span ??= trace.getSpan(context.active());
              nxt();
            });
          },
        });
      },
      sendStatus(status, next) {
        try {
          if (!sc.decided) {
            sc.decided = true;
            const span = trace.getSpan(context.active()) ?? sc.span;
            const md = claimTrailers(status.code, status.metadata ?? undefined, sc.ledger, sc.path, options, span);
            if (md) return next({ ...status, metadata: md });
          }
        } catch {
          // the hooks never fail a call
        }
        next(status);
      },
    });
  };
}

/**
 * A server interceptor (grpc-js 1.10+: new grpc.Server({ interceptors: [
 * grpcServerInterceptor()] })): the handler runs with a Ledger in the active
 * context, and a server-fault status gets the error-claim trailer (with
 * grpc-retry-pushback-ms: -1 when unclaimed) and error_ownership.claim.sent,
 * error_ownership.claim.reason on the active (SERVER) span. A handler's own valid
 * claim in its trailers wins; any other value is replaced.
 *
 * Under @opentelemetry/instrumentation-grpc the SERVER span is ended before
 * the status reaches any interceptor: wrap the server too (wrapGrpcServer),
 * so that the claim is decided, and its attributes set, when the handler
 * answers.
 */
export function grpcServerInterceptor(
  options: Pick<GrpcHooksOptions, 'hints' | 'faultCodes'> = {}
): grpc.ServerInterceptor {
  return serverInterceptor({ hints: options.hints, faults: new Set(options.faultCodes ?? DEFAULT_FAULT_CODES) });
}

/** Whether m is a grpc-js Metadata (of any copy of grpc-js). */
export function isMetadata(m: unknown): m is grpc.Metadata {
  return (
    typeof m === 'object' &&
    m !== null &&
    typeof (m as grpc.Metadata).clone === 'function' &&
    typeof (m as grpc.Metadata).getMap === 'function'
  );
}

/** A handler as grpc-js's Server.register takes it: (call[, callback]). */
export type Handler = (this: unknown, call: { metadata?: unknown }, callback?: unknown) => unknown;

/** The handler's error with the claim decided (on its trailers, or the callback's trailer that overrides them). */
function claimed(sc: ServerCall, span: Span | undefined, args: unknown[]): void {
  const err = args[0] as { code?: unknown; metadata?: unknown };
  const code = typeof err.code === 'number' && Number.isInteger(err.code) ? err.code : 2; // grpc-js: UNKNOWN
  const override = isMetadata(args[2]);
  const given = override ? args[2] : err.metadata;
  const md = claimTrailers(code, isMetadata(given) ? given : undefined, sc.ledger, sc.path, sc.options, span);
  sc.decided = true;
  if (!md) return;
  if (override) {
    args[2] = md;
    return;
  }
  // A copy: the service may answer with the same error object again.
  const copy = Object.create(Object.getPrototypeOf(err) as object, Object.getOwnPropertyDescriptors(err)) as {
    metadata?: unknown;
  };
  copy.metadata = md;
  args[0] = copy;
}

const wrappedHandlers = new WeakSet<object>();

/**
 * A handler that runs with its call's ledger in the active context and,
 * for unary and client-streaming calls, decides the claim when it answers,
 * on the span active in it: an instrumentation that wraps the handler
 * (instrumentation-grpc starts its SERVER span from the root context and
 * ends it in the handler's callback, before the status reaches an
 * interceptor) then has the ledger inside its span and the attributes on it.
 * A call no server interceptor of the hooks took runs the handler as it is.
 */
export function wrapHandler(handler: Handler): Handler {
  if (wrappedHandlers.has(handler)) return handler;
  const w: Handler = function (this: unknown, call, callback) {
    const md = call && typeof call === 'object' ? call.metadata : undefined;
    const sc = typeof md === 'object' && md !== null ? serverCalls.get(md) : undefined;
    if (!sc) return handler.call(this, call, callback);
    const span = trace.getSpan(context.active());
    if (span) sc.span = span;
    let cb = callback;
    if (typeof callback === 'function')
      cb = function (this: unknown, ...args: unknown[]): unknown {
        if (args[0] && !sc.decided) {
          try {
            claimed(sc, span, args);
          } catch {
            // the interceptor claims at the status instead
          }
        }
        return (callback as (...a: unknown[]) => unknown).apply(this, args);
      };
    return runWithLedger(sc.ledger, () => handler.call(this, call, cb));
  };
  wrappedHandlers.add(w);
  return w;
}

const wrappedServers = new WeakSet<object>();

type Register = (this: unknown, ...args: unknown[]) => unknown;

/**
 * Wraps the handlers of every service added to server from now on
 * (addService, register) with the hooks', and returns server. Use it with
 * grpcServerInterceptor, which takes the calls:
 *
 *   const server = wrapGrpcServer(new grpc.Server({ interceptors: [grpcServerInterceptor({ hints })] }));
 *
 * Under @opentelemetry/instrumentation-grpc, which wraps each handler in its
 * SERVER span, this is what puts the claim's attributes on that span; without
 * an instrumentation the interceptor alone does the same.
 */
export function wrapGrpcServer<S extends grpc.Server>(server: S): S {
  if (wrappedServers.has(server)) return server;
  const s = server as unknown as Record<string, unknown>;
  // An own register (someone's instance patch) or, looked up at each call, the class's: an
  // instrumentation that patches the prototype later still wraps the hooks' handler.
  const own = Object.prototype.hasOwnProperty.call(s, 'register') ? (s.register as Register) : undefined;
  Object.defineProperty(s, 'register', {
    value: function register(this: unknown, ...args: unknown[]): unknown {
      const inner = own ?? (Object.getPrototypeOf(server) as { register: Register }).register;
      if (typeof args[1] === 'function') args[1] = wrapHandler(args[1] as Handler);
      return inner.apply(this, args);
    },
    writable: true,
    configurable: true,
  });
  wrappedServers.add(server);
  return server;
}
