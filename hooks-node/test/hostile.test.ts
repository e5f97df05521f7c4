// SPDX-License-Identifier: Apache-2.0

// Ported from hooks/hookshttp/hostile_test.go, hooks/hints/hostile_test.go
// and hooks/hooksgrpc/hostile_test.go: whatever a callee or a hints server
// sends, the hooks only ignore or neutralise it; the caller gets what it
// would get without them, and its own claim is one clean value.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as net from 'node:net';
import * as http from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { AddressInfo } from 'node:net';
import { Claim, HintClient, Ledger, createFetch, parseClaim, runWithLedger, wrapRequestListener } from '../src';
import { grpcClientInterceptor } from '../src/grpc';
import { Client, call, startServer, stop } from './grpc-helpers';
import { close, listen, testFetch } from './helpers';

const MIB = 1 << 20;
const S500 = 'HTTP/1.1 500 Internal Server Error\r\n';
const headers = (h: string) => (s: net.Socket) => s.end(S500 + h + 'Content-Length: 4\r\n\r\nboom');
const repeat = (name: string, value: string, n: number): string => `${name}: ${value}\r\n`.repeat(n);

interface Hostile {
  name: string;
  respond: (s: net.Socket) => void;
  want: Claim;
}

const hostiles: Hostile[] = [
  { name: 'claims everything', respond: headers('Error-Claim: claimed\r\n'), want: 'claimed' },
  { name: 'unclaims everything', respond: headers('Error-Claim: unclaimed\r\n'), want: 'unclaimed' },
  { name: 'an invalid value', respond: headers('Error-Claim: yes-please\r\n'), want: 'missing' },
  { name: 'invalid UTF-8', respond: headers('Error-Claim: \xff\xfe\xfd\r\n'), want: 'missing' },
  { name: 'claimed with trailing spaces', respond: headers('Error-Claim: claimed   \r\n'), want: 'claimed' },
  { name: 'a 1 MiB claim', respond: headers('Error-Claim: ' + 'claimed'.repeat(MIB / 7) + '\r\n'), want: 'missing' },
  { name: '1000 repeated claims', respond: headers(repeat('Error-Claim', 'claimed', 1000)), want: 'missing' },
  {
    name: 'claimed and unclaimed',
    respond: headers('Error-Claim: claimed\r\nerror-claim: unclaimed\r\n'),
    want: 'missing',
  },
  { name: 'a comma list', respond: headers('Error-Claim: claimed, unclaimed\r\n'), want: 'missing' },
  { name: 'an empty claim', respond: headers('Error-Claim:\r\n'), want: 'missing' },
  { name: 'an odd letter case', respond: headers('eRRoR-cLaIm: CLAIMED\r\n'), want: 'claimed' },
  {
    name: '10,000 junk headers',
    respond: headers(repeat('X-Junk', 'j', 10000) + 'Error-Claim: claimed\r\n'),
    want: 'claimed',
  },
  {
    name: 'a body that never ends',
    respond: s => s.write(S500 + 'Error-Claim: claimed\r\nContent-Length: 100000\r\n\r\n' + 'x'.repeat(10)),
    want: 'claimed',
  },
  {
    name: 'a body that trickles',
    respond: s => {
      s.write(S500 + 'Error-Claim: claimed\r\nTransfer-Encoding: chunked\r\n\r\n');
      const t = setInterval(() => (s.writable ? s.write('1\r\nx\r\n') : clearInterval(t)), 100);
      s.on('close', () => clearInterval(t));
    },
    want: 'claimed',
  },
  {
    name: 'a 64 MiB body',
    respond: s => {
      s.write(S500 + 'Error-Claim: claimed\r\nContent-Length: 67108864\r\n\r\n');
      const chunk = Buffer.alloc(64 << 10, 'x');
      let n = 0;
      const more = (): void => {
        while (n < 1024 && s.writable) {
          n++;
          if (!s.write(chunk)) return void s.once('drain', more);
        }
      };
      more();
    },
    want: 'claimed',
  },
  {
    name: 'a broken chunked body',
    respond: s => s.end(S500 + 'Error-Claim: claimed\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nnot a chunk\r\n'),
    want: 'claimed',
  },
  {
    name: 'a claim on a 200',
    respond: s => s.end('HTTP/1.1 200 OK\r\nError-Claim: unclaimed\r\nContent-Length: 2\r\n\r\nok'),
    want: 'missing',
  },
  {
    name: 'a garbage status line',
    respond: s => s.end('HTTP/1.1 9999 Nope\r\nError-Claim: claimed\r\n\r\n'),
    want: 'missing',
  },
];

/** A callee that writes its answers byte for byte, and counts requests. */
async function rawCallee(
  respond: (s: net.Socket) => void
): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  let requests = 0;
  const sockets = new Set<net.Socket>();
  const srv = net.createServer(s => {
    sockets.add(s);
    s.on('error', () => undefined);
    let buf = '';
    s.on('data', d => {
      buf += d.toString('latin1');
      while (buf.includes('\r\n\r\n')) {
        buf = buf.slice(buf.indexOf('\r\n\r\n') + 4);
        requests++;
        respond(s);
      }
    });
  });
  await new Promise<void>(r => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/`,
    requests: () => requests,
    close: () => {
      sockets.forEach(s => s.destroy());
      return new Promise(r => srv.close(() => r()));
    },
  };
}

interface Result {
  status: number;
  err: unknown;
}

async function roundTrip(f: typeof fetch, url: string): Promise<Result> {
  try {
    // the signal only keeps a hook that hangs from hanging the test
    const res = await f(url, { signal: AbortSignal.timeout(10_000) });
    void res.body?.cancel().catch(() => undefined);
    return { status: res.status, err: undefined };
  } catch (e) {
    return { status: 0, err: e };
  }
}

test('hostile callee (HTTP)', async t => {
  for (const tc of hostiles) {
    await t.test(tc.name, async () => {
      const callee = await rawCallee(tc.respond);
      try {
        const hooked = createFetch({ backoff: { initialMs: 1, maxMs: 2 }, maxAttempts: 2, fetch: testFetch });
        const without = await roundTrip(fetch, callee.url);
        const ledger = new Ledger();
        const withHooks = await runWithLedger(ledger, () => roundTrip(hooked, callee.url));
        assert.equal(
          withHooks.err === undefined,
          without.err === undefined,
          `with the hooks: ${String(withHooks.err)}; without: ${String(without.err)}`
        );
        assert.equal(withHooks.status, without.status);
        const [o] = ledger.outcomes();
        assert.ok(o, 'the call is in the ledger');
        if (without.err === undefined && without.status >= 500) assert.equal(o.received, tc.want, 'claim read');
        if (without.err === undefined) {
          const want = without.status < 500 || tc.want === 'unclaimed' ? 2 : 3; // bare, then one or two attempts
          assert.equal(callee.requests(), want, 'requests the callee served');
        }

        // A caller service with the server hooks, relaying the failure:
        // its own claim is exactly one clean value.
        const app = http.createServer(
          wrapRequestListener(async (_req, res) => {
            const r = await roundTrip(hooked, callee.url);
            res.statusCode = r.err ? 502 : r.status >= 100 && r.status < 600 ? r.status : 502;
            res.end();
          })
        );
        const base = await listen(app);
        try {
          const res = await fetch(base, { signal: AbortSignal.timeout(10_000) });
          await res.arrayBuffer();
          const claim = res.headers.get('error-claim');
          if (res.status < 500) assert.equal(claim, null);
          else assert.notEqual(parseClaim(claim ?? ''), 'missing', `Error-Claim ${claim}`);
        } finally {
          await close(app);
        }
      } finally {
        await callee.close();
      }
    });
  }
});

test('hostile callee (gRPC): garbage trailers read as missing', async t => {
  for (const [name, value, want] of [
    ['a 1 KiB claim', 'claimed'.repeat(150), 'missing'],
    ['an odd case', 'ClAiMeD', 'claimed'],
    ['a list', 'claimed,unclaimed', 'missing'],
    ['unclaimed', 'unclaimed', 'unclaimed'],
  ] as const) {
    await t.test(name, async () => {
      const { server, address } = await startServer((_c, cb) => {
        const md = new grpc.Metadata();
        md.set('error-claim', value);
        cb({ code: grpc.status.UNAVAILABLE, details: 'x', metadata: md });
      });
      const client = new Client(address, grpc.credentials.createInsecure(), {
        interceptors: [grpcClientInterceptor({ target: address, backoff: { initialMs: 1, maxMs: 1 } })],
      });
      try {
        const ledger = new Ledger();
        const res = await runWithLedger(ledger, () => call(client));
        assert.equal(res.code, grpc.status.UNAVAILABLE);
        assert.equal(ledger.outcomes()[0]?.received, want);
      } finally {
        client.close();
        stop(server);
      }
    });
  }
});

const sample = JSON.stringify({
  version: 1,
  service: 'checkout',
  ttl_seconds: 30,
  edges: [{ operation: 'POST /checkout', peer_service: 'recs', peer_operation: 'GET /r', mode: 'fail_open' }],
});

test('hostile hints server', async t => {
  const cases: [string, (req: http.IncomingMessage, res: http.ServerResponse) => void][] = [
    ['a body over 1 MiB', (_q, r) => r.end('{"version":1,"edges":[' + ' '.repeat(2 * MIB) + ']}')],
    [
      'a budget floor of 1e308',
      (_q, r) => r.end('{"version":1,"retry_budget":{"ratio":0.1,"min_retries_per_second":1e308},"edges":[]}'),
    ],
    ['a redirect loop', (q, r) => r.writeHead(302, { Location: q.url }).end()],
    ['slower than the fetch timeout', (_q, r) => setTimeout(() => r.end(sample), 2000).unref()],
    ['a body that stalls', (_q, r) => r.writeHead(200, { 'Content-Length': '100000' }).write('{"version":1')],
    ['edges of the wrong type', (_q, r) => r.end('{"version":1,"edges":"all"}')],
    ['a JSON null', (_q, r) => r.end('null')],
  ];
  for (const [name, bad] of cases) {
    await t.test(name, async () => {
      let good = true;
      const srv = http.createServer((q, r) => (good ? r.end(sample) : bad(q, r)));
      const base = await listen(srv);
      try {
        const c = new HintClient(base, 'checkout', { fetchTimeoutMs: 300 });
        assert.equal((await c.refresh()).error, undefined);
        good = false;
        const r = await c.refresh();
        assert.ok(r.error, 'accepted');
        assert.equal(r.nextMs, 1000);
        assert.equal(c.mode('POST /checkout', 'recs', ''), 'fail_open', 'the last good hints are kept');
        assert.deepEqual(c.budgetLimits(), { ratio: 0.1, min_retries_per_second: 10 });
      } finally {
        await close(srv);
      }
    });
  }
});

test('hints server down: safe defaults, and mode() answers while a fetch hangs', async () => {
  const srv = http.createServer(() => undefined); // never answers
  const base = await listen(srv);
  try {
    const c = new HintClient(base, 'checkout', { fetchTimeoutMs: 200 });
    const pending = c.refresh();
    assert.equal(c.mode('POST /checkout', 'recs', ''), 'unknown'); // synchronous: never waits on the fetch
    assert.deepEqual(c.budgetLimits(), { ratio: 0.1, min_retries_per_second: 10 });
    const r = await pending;
    assert.ok(r.error);
    const down = new HintClient('http://127.0.0.1:1', 'checkout');
    const r2 = await down.refresh();
    assert.ok(r2.error);
    assert.equal(r2.nextMs, 1000);
  } finally {
    await close(srv);
  }
});

test('the hint poller does not keep the process alive, and stops', async () => {
  const srv = http.createServer((_q, r) => r.end(sample));
  const base = await listen(srv);
  try {
    const c = new HintClient(base, 'checkout').start();
    for (let i = 0; i < 100 && c.mode('POST /checkout', 'recs', '') !== 'fail_open'; i++)
      await new Promise(r => setTimeout(r, 20));
    assert.equal(c.mode('POST /checkout', 'recs', ''), 'fail_open');
    c.stop();
  } finally {
    await close(srv);
  }
});
