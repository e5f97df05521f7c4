// SPDX-License-Identifier: Apache-2.0

// The OpenTelemetry SDK as a service would set it up, with the in-memory
// exporter: imported first by the test files that look at spans, before
// express or any client is loaded, so that the instrumentations patch them.
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, SimpleSpanProcessor, ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { ExpressInstrumentation } from '@opentelemetry/instrumentation-express';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { httpHooks, undiciHooks } from '../src';

export const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
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
