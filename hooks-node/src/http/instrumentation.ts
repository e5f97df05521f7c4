// SPDX-License-Identifier: Apache-2.0

import type { Span } from '@opentelemetry/api';
import { attemptOf, bindActiveAttempt, rawValues } from './attempt';

/*
 * The OpenTelemetry HTTP client instrumentations make a CLIENT span per
 * attempt but keep it to themselves. Their requestHook runs in the context
 * the attempt was made in, where the client hook left the attempt, so it
 * binds the attempt to the span; their responseHook runs when the response's
 * headers arrive, before the span ends, so it settles the attempt (claim
 * received, retry decision) and sets the attributes on the span.
 */

type AnyHook = (span: Span, arg: never) => void;

function chain<H extends AnyHook>(ours: H, theirs: H | undefined): H {
  if (!theirs) return ours;
  return ((span: Span, arg: never) => {
    ours(span, arg);
    theirs(span, arg);
  }) as H;
}

interface UndiciResponseLike {
  statusCode: number;
  headers: readonly (string | Buffer)[];
}

/** requestHook for @opentelemetry/instrumentation-undici. */
export function undiciRequestHook(span: Span, _request: unknown): void {
  bindActiveAttempt(span);
}

/** responseHook for @opentelemetry/instrumentation-undici. */
export function undiciResponseHook(span: Span, info: { response: UndiciResponseLike }): void {
  const a = attemptOf(span);
  if (!a) return;
  a.settle(info.response.statusCode, rawValues(info.response.headers, 'error-claim'));
  a.annotate();
}

/** requestHook for @opentelemetry/instrumentation-http (outgoing requests; incoming ones are left alone). */
export function httpRequestHook(span: Span, _request: unknown): void {
  bindActiveAttempt(span);
}

/** responseHook for @opentelemetry/instrumentation-http. */
export function httpResponseHook(span: Span, response: unknown): void {
  const a = attemptOf(span);
  if (!a) return;
  const r = response as { statusCode?: number; rawHeaders?: string[] };
  if (!Array.isArray(r.rawHeaders)) return; // a ServerResponse: not ours
  a.settle(r.statusCode ?? 0, rawValues(r.rawHeaders, 'error-claim'));
  a.annotate();
}

/**
 * The UndiciInstrumentation config with the hooks' requestHook and
 * responseHook added (yours, if any, run after them):
 *
 *     new UndiciInstrumentation(undiciHooks({ ... }))
 */
export function undiciHooks<C extends { requestHook?: unknown; responseHook?: unknown }>(config: C = {} as C): C {
  return {
    ...config,
    requestHook: chain(undiciRequestHook as AnyHook, config.requestHook as AnyHook | undefined),
    responseHook: chain(undiciResponseHook as AnyHook, config.responseHook as AnyHook | undefined),
  };
}

/**
 * The HttpInstrumentation config with the hooks' requestHook and
 * responseHook added (yours, if any, run after them):
 *
 *     new HttpInstrumentation(httpHooks({ ... }))
 */
export function httpHooks<C extends { requestHook?: unknown; responseHook?: unknown }>(config: C = {} as C): C {
  return {
    ...config,
    requestHook: chain(httpRequestHook as AnyHook, config.requestHook as AnyHook | undefined),
    responseHook: chain(httpResponseHook as AnyHook, config.responseHook as AnyHook | undefined),
  };
}
