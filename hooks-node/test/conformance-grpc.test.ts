// SPDX-License-Identifier: Apache-2.0

import { exporter, tracer, spansWhen, context, trace, oursSetOnce } from './otel';
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { SpanKind } from '@opentelemetry/api';
import { load } from './vectors';
import { Client, call, code, fast, scriptedCallee, scriptedDependencies, startServer, stop } from './grpc-helpers';
import { StaticHints } from './helpers';
import { RetryBudget } from '../src';
import { grpcClientInterceptor, grpcServerInterceptor } from '../src/grpc';

const v = load('grpc.json');

test('grpc.json client', async t => {
  assert.ok(v.client.cases.length > 0);
  for (const tc of v.client.cases) {
    await t.test(tc.name, async () => {
      const callee = await scriptedCallee(tc.responses);
      const client = new Client(callee.address, grpc.credentials.createInsecure(), {
        interceptors: [
          grpcClientInterceptor({
            ...fast,
            target: callee.address,
            maxAttempts: tc.max_attempts,
            budget: tc.budget ? new RetryBudget(tc.budget) : undefined,
          }),
        ],
      });
      try {
        const parent = tracer.startSpan('caller');
        const res = await context.with(trace.setSpan(context.active(), parent), () => call(client));
        parent.end();
        assert.equal(res.code, code(tc.want.code), 'code');
        assert.deepEqual(callee.attempts, tc.want.requests, 'grpc-previous-rpc-attempts per attempt');
        const mine = (s: { kind: SpanKind; parentSpanContext?: { spanId: string } }): boolean =>
          s.kind === SpanKind.CLIENT && s.parentSpanContext?.spanId === parent.spanContext().spanId;
        const spans = (await spansWhen(all => all.filter(mine).length >= tc.want.spans.length))
          .filter(mine)
          .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
        assert.deepEqual(spans.map(oursSetOnce), tc.want.spans, 'attributes per attempt span');
      } finally {
        client.close();
        stop(callee.server);
      }
    });
  }
});

test('grpc.json server', async t => {
  assert.ok(v.server.cases.length > 0);
  for (const tc of v.server.cases) {
    await t.test(tc.name, async () => {
      const { callees, clients, modes } = await scriptedDependencies(tc.calls ?? []);
      let serverSpanId = '';
      const { server, address } = await startServer(
        (_call, cb) => {
          void tracer.startActiveSpan('test.Svc/Call', { kind: SpanKind.SERVER }, async span => {
            serverSpanId = span.spanContext().spanId;
            for (const c of clients) await call(c);
            const md = new grpc.Metadata();
            if (tc.set_claim !== undefined) md.set('error-claim', tc.set_claim);
            if (tc.code === 'OK') cb(null, Buffer.from('ok'), md);
            else cb({ code: code(tc.code), details: 'answer', metadata: md });
            span.end();
          });
        },
        { interceptors: [grpcServerInterceptor({ hints: new StaticHints(modes) })] }
      );
      const caller = new Client(address, grpc.credentials.createInsecure());
      try {
        const res = await call(caller);
        assert.equal(res.code, code(tc.code), 'code');
        const claim = res.trailers.get('error-claim');
        const pushback = res.trailers.get('grpc-retry-pushback-ms');
        assert.equal(claim.length ? String(claim[0]) : null, tc.want.claim, 'error-claim trailer');
        assert.equal(pushback.length ? String(pushback[0]) : null, tc.want.pushback, 'grpc-retry-pushback-ms trailer');
        const spans = await spansWhen(all => all.some(s => s.spanContext().spanId === serverSpanId));
        const span = spans.find(s => s.spanContext().spanId === serverSpanId);
        assert.ok(span, 'the SERVER span');
        assert.deepEqual(oursSetOnce(span), tc.want.span, 'SERVER span attributes');
      } finally {
        caller.close();
        clients.forEach(c => c.close());
        stop(server);
        callees.forEach(c => stop(c.server));
        exporter.reset();
      }
    });
  }
});
