// SPDX-License-Identifier: Apache-2.0

import type { Span } from '@opentelemetry/api';
import { Attempt, bindActiveAttempt, bindAttempt } from '../http/attempt';
import { httpResponseHook, undiciRequestHook, undiciResponseHook } from '../http/instrumentation';

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

/** The attempts the zero-code http.request wrapper made, by the ClientRequest it got. */
export const requestAttempts = new WeakMap<object, Attempt>();

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

/** Patches the instrumentation classes a module's exports hold (HttpInstrumentation, UndiciInstrumentation). */
export function patchInstrumentationExports(exports: unknown): number {
  if (typeof exports !== 'object' || exports === null) return 0;
  const e = exports as { HttpInstrumentation?: unknown; UndiciInstrumentation?: unknown };
  let n = 0;
  if (patch(e.HttpInstrumentation, zeroCodeHttpRequestHook, httpResponseHook)) n++;
  if (patch(e.UndiciInstrumentation, undiciRequestHook, undiciResponseHook)) n++;
  return n;
}
