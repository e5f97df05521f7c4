// SPDX-License-Identifier: Apache-2.0

// The OpenTelemetry SDK as a service would set it up, with the in-memory
// exporter: imported first by the test files that look at spans, before
// express or any client is loaded, so that the instrumentations patch them.
import * as assert from 'node:assert/strict';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { Context } from '@opentelemetry/api';
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  ReadableSpan,
  Span,
  SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { ExpressInstrumentation } from '@opentelemetry/instrumentation-express';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { httpHooks, undiciHooks } from '../src';

/**
 * Counts, per span, how many times each attribute is set once the span has
 * started (the hooks never set one at creation). The SDK keeps the last of
 * several values without a trace of the others (an overwrite is not a dropped
 * attribute), so only counting the calls shows a hook that set one twice.
 */
class CountingProcessor implements SpanProcessor {
  onStart(span: Span, _ctx: Context): void {
    const counts = new Map<string, number>();
    setCounts.set(span, counts);
    const count = (k: string): void => void counts.set(k, (counts.get(k) ?? 0) + 1);
    // The SDK's setAttributes may go through setAttribute: a call counts once.
    let inMany = false;
    const one = span.setAttribute.bind(span);
    const many = span.setAttributes.bind(span);
    span.setAttribute = (k, v) => {
      if (!inMany) count(k);
      return one(k, v);
    };
    span.setAttributes = attrs => {
      for (const k of Object.keys(attrs)) count(k);
      inMany = true;
      try {
        return many(attrs);
      } finally {
        inMany = false;
      }
    };
  }
  onEnd(): void {}
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

const setCounts = new WeakMap<object, Map<string, number>>();

/** The attributes of ours on a span: the error_ownership.* ones and http.request.resend_count, which the hooks set. */
export function ours(span: ReadableSpan): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(span.attributes)) {
    if (k.startsWith('error_ownership.') || k === 'http.request.resend_count') out[k] = v;
  }
  return out;
}

/**
 * The attributes of ours on span, exactly, having checked that each was set
 * once and that the span dropped none: what every runner checks of a want
 * (conformance/README.md).
 */
export function oursSetOnce(span: ReadableSpan): Record<string, unknown> {
  assert.equal(span.droppedAttributesCount, 0, `${span.name}: dropped attributes`);
  const counts = setCounts.get(span);
  assert.ok(counts, `${span.name}: a span the counting processor did not see`);
  const got = ours(span);
  for (const k of Object.keys(got)) assert.equal(counts.get(k), 1, `${span.name}: times ${k} was set`);
  return got;
}

export const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({
  spanProcessors: [new CountingProcessor(), new SimpleSpanProcessor(exporter)],
});
provider.register({ contextManager: new AsyncLocalStorageContextManager() });
registerInstrumentations({
  instrumentations: [
    new HttpInstrumentation(httpHooks({})),
    new ExpressInstrumentation(),
    new UndiciInstrumentation(undiciHooks({})),
  ],
});

export const tracer = trace.getTracer('errorownership-test');
export { context, trace };

/** Waits (bounded) until pred holds over the finished spans, and returns them. */
export async function spansWhen(pred: (s: ReadableSpan[]) => boolean, ms = 3000): Promise<ReadableSpan[]> {
  const until = Date.now() + ms;
  for (;;) {
    const s = exporter.getFinishedSpans();
    if (pred(s) || Date.now() > until) return s;
    await new Promise(r => setTimeout(r, 10));
  }
}
