// SPDX-License-Identifier: Apache-2.0

import { Context, createContextKey } from '@opentelemetry/api';

/**
 * What @opentelemetry/core's suppressTracing does, for where that package
 * cannot be loaded from the hooks: it marks the context with this key, made
 * by the API's createContextKey, a Symbol.for of the description, and so the
 * same key in every copy and version of core (1.x to 3.x) an SDK may bring.
 */
export function fallbackSuppressTracing(ctx: Context): Context {
  return ctx.setValue(SUPPRESS_TRACING_KEY, true);
}

/** Whether ctx is suppressed as core's suppressTracing marks it (an exporter's own requests). */
export function isSuppressed(ctx: Context): boolean {
  return ctx.getValue(SUPPRESS_TRACING_KEY) === true;
}

const SUPPRESS_TRACING_KEY = createContextKey('OpenTelemetry SDK Context Key SUPPRESS_TRACING');

/**
 * suppressTracing of the service's @opentelemetry/core: an optional peer
 * dependency, which every OpenTelemetry SDK depends on, so a traced service
 * has it. Not a required one: npm would install a core of its own choosing
 * for it (it prefers a version whose engines fit the running Node), whose
 * peer range for @opentelemetry/api can conflict with the API the service
 * pins. Without core (no SDK, or a layout that keeps the SDK's dependencies
 * out of reach) the fallback sets the same key.
 */
export const suppressTracing: (ctx: Context) => Context = (() => {
  try {
    // A conditional load: the peer is optional.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return (require('@opentelemetry/core') as { suppressTracing: (ctx: Context) => Context }).suppressTracing;
  } catch {
    return fallbackSuppressTracing;
  }
})();
