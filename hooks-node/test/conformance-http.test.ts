// SPDX-License-Identifier: Apache-2.0

import { exporter, tracer, spansWhen, context, trace, oursSetOnce } from './otel';
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as http from 'node:http';
import express from 'express';
import { SpanKind } from '@opentelemetry/api';
import { load } from './vectors';
import { ScriptedCallee, StaticHints, close, listen, testFetch } from './helpers';
import {
  HintSource,
  Mode,
  RetryBudget,
  createFetch,
  createHttpClient,
  expressMiddleware,
  wrapRequestListener,
} from '../src';

const fast = { backoff: { initialMs: 1, maxMs: 1 } };

type Caller = (opts: {
  maxAttempts?: number;
  budget?: RetryBudget;
}) => (url: string, method: string, headers: Record<string, string>, body?: string) => Promise<number>;

const viaFetch: Caller = opts => {
  const f = createFetch({ ...fast, ...opts, fetch: testFetch });
  return async (url, method, headers, body) => {
    const res = await f(url, { method, headers, body });
    await res.arrayBuffer();
    return res.status;
  };
};

const viaHttpRequest: Caller = opts => {
  const c = createHttpClient({ ...fast, ...opts });
  return async (url, method, headers, body) => {
    const res = await c.request(url, { method, headers, body });
    res.resume();
    await new Promise(r => res.on('end', r));
    return res.statusCode!;
  };
};

const client = load('client.json');

for (const [kind, caller] of [
  ['fetch (instrumentation-undici)', viaFetch],
  ['http.request (instrumentation-http)', viaHttpRequest],
] as const) {
  test(`client.json via ${kind}`, async t => {
    assert.ok(client.cases.length > 0);
    for (const tc of client.cases) {
      await t.test(tc.name, async () => {
        const callee = await new ScriptedCallee(tc.responses).listen();
        try {
          const call = caller({
            maxAttempts: tc.max_attempts,
            budget: tc.budget ? new RetryBudget(tc.budget) : undefined,
          });
          const parent = tracer.startSpan('caller');
          const traceId = parent.spanContext().traceId;
          const status = await context.with(trace.setSpan(context.active(), parent), () =>
            call(callee.url + '/thing', tc.method, tc.headers ?? {}, tc.body)
          );
          parent.end();
          assert.equal(status, tc.want.status, 'status');
          assert.deepEqual(callee.attempts, tc.want.requests, 'Retry-Attempt per attempt');
          if (tc.want.bodies) assert.deepEqual(callee.bodies, tc.want.bodies, 'bodies');
          const isAttempt = (s: {
            kind: SpanKind;
            spanContext(): { traceId: string };
            parentSpanContext?: { spanId: string };
          }): boolean =>
            s.kind === SpanKind.CLIENT &&
            s.spanContext().traceId === traceId &&
            s.parentSpanContext?.spanId === parent.spanContext().spanId;
          const spans = (await spansWhen(all => all.filter(isAttempt).length >= tc.want.spans.length))
            .filter(isAttempt)
            .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
          assert.deepEqual(spans.map(oursSetOnce), tc.want.spans, 'attributes per attempt span');
        } finally {
          await callee.close();
        }
      });
    }
  });
}

const server = load('server.json');

type App = (
  hints: HintSource,
  handler: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>
) => http.Server;

const expressApp: App = (hints, handler) => {
  const app = express();
  app.use(expressMiddleware({ hints }));
  app.get('/case/:id', (req, res, next) => void handler(req, res).catch(next));
  return http.createServer(app);
};

const plainApp: App = (hints, handler) =>
  http.createServer(wrapRequestListener((req, res) => void handler(req, res), { hints }));

for (const [kind, makeApp] of [
  ['express', expressApp],
  ['http.Server', plainApp],
] as const) {
  test(`server.json via ${kind}`, async t => {
    assert.ok(server.cases.length > 0);
    for (const [i, tc] of server.cases.entries()) {
      await t.test(tc.name, async () => {
        const callees: ScriptedCallee[] = [];
        const modes = new Map<string, Mode>();
        for (const c of tc.calls ?? []) {
          const callee = await new ScriptedCallee(c.responses).listen();
          callees.push(callee);
          if (c.mode) modes.set(callee.address, c.mode);
        }
        const f = createFetch({
          ...fast,
          fetch: testFetch,
          budget: new RetryBudget({ ratio: 1, min_retries_per_second: 100 }),
        });
        const app = makeApp(new StaticHints(modes), async (_req, res) => {
          for (const [j, c] of (tc.calls ?? []).entries()) {
            const r = await f(callees[j].url + '/dep', {
              method: c.method,
              body: c.method === 'POST' ? 'x' : undefined,
            });
            await r.arrayBuffer();
          }
          if (tc.set_claim) res.setHeader('Error-Claim', tc.set_claim.length === 1 ? tc.set_claim[0] : tc.set_claim);
          res.statusCode = tc.status;
          res.end('done');
        });
        const base = await listen(app);
        try {
          const port = new URL(base).port;
          exporter.reset();
          const res = await fetch(`${base}/case/${i}`);
          await res.arrayBuffer();
          assert.equal(res.status, tc.status);
          assert.equal(res.headers.get('error-claim'), tc.want.header, 'Error-Claim');
          const isServer = (s: { kind: SpanKind; attributes: Record<string, unknown> }): boolean =>
            s.kind === SpanKind.SERVER && String(s.attributes['net.host.port'] ?? s.attributes['server.port']) === port;
          const spans = (await spansWhen(all => all.some(isServer))).filter(isServer);
          assert.equal(spans.length, 1, 'one SERVER span');
          assert.deepEqual(oursSetOnce(spans[0]), tc.want.span, 'SERVER span attributes');
        } finally {
          await close(app);
          for (const c of callees) await c.close();
        }
      });
    }
  });
}
