// SPDX-License-Identifier: Apache-2.0

// The hint client's polls are never spans, under the instrumentations a
// service has at their default settings (test/otel.ts registers
// instrumentation-http and -undici as a service would): a traced poll is a
// root CLIENT span every few seconds, a trace the collector counts as
// unlinked, or, when the poll starts inside a request, a stray span in that
// request's trace.
import { exporter, tracer, spansWhen, context, trace } from './otel';
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as http from 'node:http';
import { ROOT_CONTEXT, SpanKind } from '@opentelemetry/api';
import { isTracingSuppressed } from '@opentelemetry/core';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { load } from './vectors';
import { close, listen, testFetch } from './helpers';
import { HintClient } from '../src';
import { fallbackSuppressTracing } from '../src/suppress';

const sample = load('hints.json').documents.sample as { retry_budget: { ratio: number } };

/** A fetch over node:http, as a service might pass in HintClientOptions.fetch: its calls are instrumentation-http's. */
const fetchOverHttp: typeof fetch = (input, init) =>
  new Promise<Response>((resolve, reject) => {
    const req = http.get(
      typeof input === 'string' ? input : input instanceof URL ? input.href : input.url,
      { headers: init?.headers as Record<string, string>, signal: init?.signal ?? undefined },
      res => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
          resolve(new Response(Buffer.concat(chunks), { status: res.statusCode, headers }));
        });
      }
    );
    req.on('error', reject);
  });

const fetches: [string, typeof fetch | undefined][] = [
  ['the default fetch (instrumentation-undici)', testFetch],
  ['a fetch over node:http (instrumentation-http)', fetchOverHttp],
];

/** How the client is made to poll: the ways a service runs it. */
const polls: [string, (c: HintClient) => Promise<void>][] = [
  [
    'refresh() outside any request',
    async c => {
      assert.equal((await c.refresh()).error, undefined);
    },
  ],
  [
    "refresh() inside a request's span",
    async c => {
      const span = tracer.startSpan('GET /work/:id', { kind: SpanKind.SERVER });
      try {
        const r = await context.with(trace.setSpan(context.active(), span), () => c.refresh());
        assert.equal(r.error, undefined);
      } finally {
        span.end();
      }
    },
  ],
  [
    "start()'s timer",
    async c => {
      c.start();
      try {
        const until = Date.now() + 10_000;
        while (c.budgetLimits().ratio !== sample.retry_budget.ratio) {
          assert.ok(Date.now() < until, 'the first poll never applied the hints');
          await new Promise(r => setTimeout(r, 10));
        }
      } finally {
        c.stop();
      }
    },
  ],
];

test('hint polls are not traced', async t => {
  const served: string[] = [];
  const srv = http.createServer((req, res) => {
    served.push(req.url ?? '');
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(sample));
  });
  const base = await listen(srv);
  const port = new URL(base).port;
  const toHints = (s: ReadableSpan): boolean =>
    s.kind === SpanKind.CLIENT &&
    (JSON.stringify(s.attributes).includes('/v1/hints') ||
      [s.attributes['server.port'], s.attributes['net.peer.port']].some(p => String(p) === port));
  // The hints server's own SERVER span ends when it has answered: once it is
  // there, so is any CLIENT span of the same request.
  const answered = (n: number) => (all: ReadableSpan[]) =>
    all.filter(s => s.kind === SpanKind.SERVER && JSON.stringify(s.attributes).includes('/v1/hints')).length >= n;
  try {
    for (const [fname, f] of fetches) {
      await t.test(`${fname}: traced when called directly`, async () => {
        exporter.reset();
        const res = await (f ?? fetch)(`${base}/v1/hints?service=checkout`);
        await res.arrayBuffer();
        const spans = await spansWhen(all => all.some(toHints) && answered(1)(all));
        assert.equal(spans.filter(toHints).length, 1, 'the direct call is a CLIENT span: the check below can see one');
      });
      for (const [pname, poll] of polls) {
        await t.test(`${fname}: ${pname}`, async () => {
          exporter.reset();
          const before = served.length;
          await poll(new HintClient(base, 'checkout', { fetch: f }));
          assert.ok(served.length > before, 'the client polled');
          const spans = await spansWhen(answered(served.length - before));
          assert.deepEqual(
            spans.filter(toHints).map(s => s.name),
            [],
            'CLIENT spans of the poll'
          );
        });
      }
    }
  } finally {
    await close(srv);
  }
});

test("the fallback suppresses as @opentelemetry/core's suppressTracing does", () => {
  // Where core cannot be loaded the hooks set its key themselves: the SDK's
  // core must read it as suppressed.
  assert.equal(isTracingSuppressed(fallbackSuppressTracing(ROOT_CONTEXT)), true);
  assert.equal(isTracingSuppressed(ROOT_CONTEXT), false);
});
