// SPDX-License-Identifier: Apache-2.0

// The library's gRPC server hooks under @opentelemetry/instrumentation-grpc,
// which wraps each handler in its SERVER span (started from the root
// context) and ends that span in the handler's callback, before the status
// reaches any server interceptor.
import { exporter, spansWhen, context, trace, oursSetOnce } from './otel-grpc';
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { SpanKind } from '@opentelemetry/api';
import { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { load } from './vectors';
import { Client, Handler, call, code, scriptedDependencies, startServer, stop } from './grpc-helpers';
import { StaticHints } from './helpers';
import { HintSource, ledgerFrom } from '../src';
import { grpcServerInterceptor, wrapGrpcServer } from '../src/grpc';

const v = load('grpc.json');
const SCOPE = '@opentelemetry/instrumentation-grpc';

type ServerCase = (typeof v.server.cases)[number];

/** What the handler saw: the span active in it, and the calls its ledger recorded by the time it answered. */
interface Seen {
  spanId?: string;
  ledgerCalls?: number;
}

/**
 * The span the handler ran in, once it ended, having checked that it is
 * the instrumentation's SERVER span (the callees serve the same method, so
 * the span is told from theirs by its id).
 */
async function serverSpan(spanId: string | undefined): Promise<ReadableSpan> {
  assert.ok(spanId, 'the handler ran in a span');
  const mine = (s: ReadableSpan): boolean => s.spanContext().spanId === spanId;
  const span = (await spansWhen(all => all.some(mine))).find(mine);
  assert.ok(span, 'the span the handler ran in ended');
  assert.equal(span.kind, SpanKind.SERVER, 'a SERVER span');
  assert.equal(span.instrumentationScope.name, SCOPE, "the instrumentation's");
  assert.equal(span.name, 'grpc.test.Svc/Call');
  return span;
}

/**
 * Serves grpc.json server case tc (its calls through clients with the client
 * interceptor, to scripted callees) from a server set up by `serve`, and
 * returns what the caller got and the handler saw, with the SERVER span.
 */
async function runCase(
  tc: ServerCase,
  serve: (handler: Handler, hints: HintSource) => Promise<{ server: grpc.Server; address: string }>
): Promise<{ code: number; claim: string | null; pushback: string | null; seen: Seen; span: ReadableSpan }> {
  const { callees, clients, modes } = await scriptedDependencies(tc.calls ?? []);
  const seen: Seen = {};
  const handler: Handler = (_call, cb) => {
    seen.spanId = trace.getSpan(context.active())?.spanContext().spanId;
    void (async () => {
      for (const c of clients) await call(c);
      seen.ledgerCalls = ledgerFrom()?.outcomes().length;
      const md = new grpc.Metadata();
      if (tc.set_claim !== undefined) md.set('error-claim', tc.set_claim);
      if (tc.code === 'OK') cb(null, Buffer.from('ok'), md);
      else cb({ code: code(tc.code), details: 'answer', metadata: md });
    })();
  };
  const { server, address } = await serve(handler, new StaticHints(modes));
  const caller = new Client(address, grpc.credentials.createInsecure());
  try {
    const res = await call(caller);
    const first = (k: string): string | null => {
      const got = res.trailers.get(k);
      return got.length ? String(got[0]) : null;
    };
    const span = await serverSpan(seen.spanId);
    return { code: res.code, claim: first('error-claim'), pushback: first('grpc-retry-pushback-ms'), seen, span };
  } finally {
    caller.close();
    clients.forEach(c => c.close());
    stop(server);
    callees.forEach(c => stop(c.server));
  }
}

test('grpc.json server under instrumentation-grpc: wrapGrpcServer with grpcServerInterceptor', async t => {
  assert.ok(v.server.cases.length > 0);
  for (const tc of v.server.cases) {
    await t.test(tc.name, async () => {
      try {
        const got = await runCase(tc, (handler, hints) => {
          const server = wrapGrpcServer(new grpc.Server({ interceptors: [grpcServerInterceptor({ hints })] }));
          return startServer(handler, undefined, server);
        });
        assert.equal(got.code, code(tc.code), 'code');
        assert.equal(got.claim, tc.want.claim, 'error-claim trailer');
        assert.equal(got.pushback, tc.want.pushback, 'grpc-retry-pushback-ms trailer');
        assert.equal(got.seen.ledgerCalls, (tc.calls ?? []).length, "the handler's calls, in the call's ledger");
        assert.deepEqual(oursSetOnce(got.span), tc.want.span, "the instrumentation's SERVER span attributes");
      } finally {
        exporter.reset();
      }
    });
  }
});

// What the README says of the interceptor alone under the instrumentation:
// the claim is right, but the SERVER span ended before the status reached
// the interceptor, without the claim's attributes.
test('grpcServerInterceptor alone under instrumentation-grpc: the trailers, not the span attributes', async t => {
  const claimedCases = v.server.cases.filter((tc: ServerCase) => Object.keys(tc.want.span).length > 0);
  assert.ok(claimedCases.length > 0);
  for (const tc of claimedCases) {
    await t.test(tc.name, async () => {
      try {
        const got = await runCase(tc, (handler, hints) =>
          startServer(handler, { interceptors: [grpcServerInterceptor({ hints })] })
        );
        assert.equal(got.claim, tc.want.claim, 'error-claim trailer');
        assert.equal(got.pushback, tc.want.pushback, 'grpc-retry-pushback-ms trailer');
        assert.deepEqual(oursSetOnce(got.span), {}, 'no attributes of ours on the ended SERVER span');
      } finally {
        exporter.reset();
      }
    });
  }
});

test('wrapGrpcServer: a server without the hooks interceptor runs its handlers as they are', async () => {
  try {
    let ledger: unknown = 'unset';
    let spanId: string | undefined;
    const server = wrapGrpcServer(new grpc.Server());
    assert.equal(wrapGrpcServer(server), server, 'wrapping twice is wrapping once');
    const { address } = await startServer(
      (_call, cb) => {
        ledger = ledgerFrom();
        spanId = trace.getSpan(context.active())?.spanContext().spanId;
        cb({ code: grpc.status.UNAVAILABLE, details: 'down' });
      },
      undefined,
      server
    );
    const caller = new Client(address, grpc.credentials.createInsecure());
    try {
      const res = await call(caller);
      assert.equal(res.code, grpc.status.UNAVAILABLE);
      assert.deepEqual(res.trailers.get('error-claim'), [], 'no claim without the interceptor');
      assert.equal(ledger, undefined, 'no ledger');
      assert.deepEqual(oursSetOnce(await serverSpan(spanId)), {});
    } finally {
      caller.close();
      stop(server);
    }
  } finally {
    exporter.reset();
  }
});
