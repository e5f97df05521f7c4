// SPDX-License-Identifier: Apache-2.0

import type { Span } from '@opentelemetry/api';
import { bindActiveAttempt, bindAttempt } from '../http/attempt';
import { httpResponseHook, undiciRequestHook, undiciResponseHook } from '../http/instrumentation';
import { outermost, protocolOf, requestAttempts } from './client';
import { outermostMethod, outermostRequest } from './grpc';

/*
 * @opentelemetry/auto-instrumentations-node/register builds its
 * instrumentations without a config the hooks could add to, and keeps them to
 * itself. Both HTTP instrumentations read their hooks through getConfig() at
 * each request, so the preload overrides getConfig on their classes: every
 * instance, made before or after the preload ran, then hands out its config
 * with the hooks' requestHook and responseHook first (the service's own, if
 * any, run after them). The result is cached per config object, which
 * setConfig replaces, so a request costs a WeakMap lookup.
 */

const OURS = Symbol.for('errorownership.zerocode.hook');

/**
 * requestHook for instrumentation-http under the preload: the attempt is in
 * the active context when the preload's http.request wrapper runs outside
 * the instrumentation's, or found by its ClientRequest when inside it (the
 * instrumentation calls the hook after the wrapped request returned).
 */
export function zeroCodeHttpRequestHook(span: Span, request: unknown): void {
  const a = typeof request === 'object' && request !== null ? requestAttempts.get(request) : undefined;
  if (a) bindAttempt(a, span);
  else bindActiveAttempt(span);
}

type Hook = ((span: Span, arg: never) => void) & { [OURS]?: true };

interface HookConfig {
  requestHook?: unknown;
  responseHook?: unknown;
}

function chain(ours: Hook, theirs: unknown): Hook {
  const t = typeof theirs === 'function' ? (theirs as Hook) : undefined;
  const h: Hook = t
    ? (span: Span, arg: never): void => {
        ours(span, arg);
        t(span, arg);
      }
    : ours;
  const marked: Hook = (span, arg) => h(span, arg);
  marked[OURS] = true;
  return marked;
}

function withHooks(c: HookConfig, req: Hook, res: Hook): HookConfig {
  if ((c.requestHook as Hook | undefined)?.[OURS]) return c;
  return { ...c, requestHook: chain(req, c.requestHook), responseHook: chain(res, c.responseHook) };
}

interface InstrumentationClass {
  prototype: { getConfig?: () => HookConfig; [OURS]?: true };
}

function patch(cls: unknown, req: Hook, res: Hook): boolean {
  if (typeof cls !== 'function') return false;
  const proto = (cls as InstrumentationClass).prototype;
  if (proto[OURS]) return true;
  const get = proto.getConfig;
  if (typeof get !== 'function') return false;
  const cache = new WeakMap<HookConfig, HookConfig>();
  proto.getConfig = function getConfig(this: unknown): HookConfig {
    const c = get.call(this);
    if (typeof c !== 'object' || c === null) return c;
    let h = cache.get(c);
    if (!h) {
      h = withHooks(c, req, res);
      cache.set(c, h);
    }
    return h;
  };
  proto[OURS] = true;
  return true;
}

type Factory = (this: unknown, arg: unknown) => (original: unknown, name?: string) => unknown;

const OUTER = Symbol.for('errorownership.zerocode.outermost');

/**
 * Makes HttpInstrumentation's patches of http(s).request and get come
 * wrapped in the hooks' (outermost), whenever it patches: the hooks must
 * see a request before the instrumentation's listeners and the caller's are
 * on it, to tell them apart when a retry replaces the answer. Its https
 * patches call the http factories at each request: those calls are left
 * alone (only a module's own factory is wrapped).
 */
function keepOutermost(cls: unknown): void {
  const proto = (cls as { prototype?: Record<string | symbol, unknown> }).prototype;
  if (!proto || proto[OUTER]) return;
  const wrap = (key: string, name: 'request' | 'get', protocol: (arg: unknown) => string | undefined): void => {
    const make = proto[key];
    if (typeof make !== 'function') return;
    proto[key] = function (this: unknown, arg: unknown) {
      const inner = (make as Factory).call(this, arg);
      const p = protocol(arg);
      if (typeof inner !== 'function' || p === undefined) return inner;
      return (original: unknown, n?: string) => outermost(inner(original, n), p, name);
    };
  };
  wrap('_getPatchOutgoingRequestFunction', 'request', c => (c === 'http' ? 'http:' : undefined));
  wrap('_getPatchOutgoingGetFunction', 'get', r => (protocolOf(r) === 'http:' ? 'http:' : undefined));
  wrap('_getPatchHttpsOutgoingRequestFunction', 'request', () => 'https:');
  wrap('_getPatchHttpsOutgoingGetFunction', 'get', r => (protocolOf(r) === 'https:' ? 'https:' : undefined));
  proto[OUTER] = true;
}

/**
 * Makes GrpcInstrumentation's wrappers of the client methods (generated
 * ones, and Client.prototype's make*Request) come inside the hooks' retry,
 * whenever it wraps: each attempt is then a call of its wrapper, a CLIENT
 * span of its own.
 */
function grpcOutermost(cls: unknown): boolean {
  const proto = (cls as { prototype?: Record<string | symbol, unknown> } | undefined)?.prototype;
  if (!proto) return false;
  if (proto[OUTER]) return true;
  const methods = proto._getPatchedClientMethods;
  const requests = proto._patchClientRequestMethod;
  if (typeof methods !== 'function' || typeof requests !== 'function') return false;
  proto._getPatchedClientMethods = function (this: unknown, lib: unknown) {
    const f = (methods as (l: unknown) => unknown).call(this, lib);
    return typeof f === 'function' ? (o: unknown) => outermostMethod(lib, (f as (o: unknown) => unknown)(o)) : f;
  };
  proto._patchClientRequestMethod = function (this: unknown, lib: unknown, stream: unknown, name: unknown) {
    const f = (requests as (...a: unknown[]) => unknown).call(this, lib, stream, name);
    return typeof f === 'function' ? (o: unknown) => outermostRequest(lib, (f as (o: unknown) => unknown)(o), name) : f;
  };
  proto[OUTER] = true;
  return true;
}

/** Patches the instrumentation classes a module's exports hold (HttpInstrumentation, UndiciInstrumentation, GrpcInstrumentation). */
export function patchInstrumentationExports(exports: unknown): number {
  if (typeof exports !== 'object' || exports === null) return 0;
  const e = exports as {
    HttpInstrumentation?: unknown;
    UndiciInstrumentation?: unknown;
    GrpcInstrumentation?: unknown;
  };
  let n = 0;
  if (grpcOutermost(e.GrpcInstrumentation)) n++;
  if (patch(e.HttpInstrumentation, zeroCodeHttpRequestHook, httpResponseHook)) {
    keepOutermost(e.HttpInstrumentation);
    n++;
  }
  if (patch(e.UndiciInstrumentation, undiciRequestHook, undiciResponseHook)) n++;
  return n;
}
