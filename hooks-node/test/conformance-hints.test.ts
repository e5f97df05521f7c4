// SPDX-License-Identifier: Apache-2.0

import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import { load } from './vectors';
import { HintClient } from '../src';

/** Serves one service's hints as a test sets them, on 127.0.0.1. */
class VectorServer {
  status = 200;
  body = '';
  headers: Record<string, string> = {};
  lastINM = '';
  readonly srv: http.Server;
  url = '';
  constructor() {
    this.srv = http.createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      if (u.pathname !== '/v1/hints' || u.searchParams.get('service') !== 'checkout') {
        res.writeHead(404).end('not found');
        return;
      }
      this.lastINM = String(req.headers['if-none-match'] ?? '');
      res.writeHead(this.status, this.headers);
      res.end(this.status === 304 ? undefined : this.body);
    });
  }
  async listen(): Promise<this> {
    await new Promise<void>(r => this.srv.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.srv.address() as AddressInfo).port}`;
    return this;
  }
  serve(status: number, body: string, headers: Record<string, string> = {}): void {
    this.status = status;
    this.body = body;
    this.headers = headers;
  }
  close(): Promise<void> {
    this.srv.closeAllConnections();
    return new Promise(r => this.srv.close(() => r()));
  }
}

interface Q {
  name: string;
  operation: string;
  peer: string;
  peer_operation: string;
  want: string;
}

function ask(c: HintClient, q: Q): void {
  assert.equal(
    c.mode(q.operation, q.peer, q.peer_operation),
    q.want,
    `${q.name}: mode(${q.operation}, ${q.peer}, ${q.peer_operation})`
  );
}

const v = load('hints.json');
const sample = JSON.stringify(v.documents.sample);

test('hints.json modes', async t => {
  assert.ok(v.modes.length > 0);
  for (const m of v.modes) {
    await t.test(m.document, async () => {
      const s = await new VectorServer().listen();
      try {
        s.serve(200, JSON.stringify(v.documents[m.document]));
        const c = new HintClient(s.url, 'checkout');
        const r = await c.refresh();
        assert.equal(r.error, undefined);
        for (const q of m.queries) ask(c, q);
        assert.deepEqual(c.budgetLimits(), m.budget);
      } finally {
        await s.close();
      }
    });
  }
});

test('hints.json garbage', async t => {
  for (const tc of v.garbage.cases) {
    await t.test(tc.name, async () => {
      const s = await new VectorServer().listen();
      try {
        s.serve(200, sample);
        const c = new HintClient(s.url, 'checkout');
        assert.equal((await c.refresh()).error, undefined);
        s.serve(tc.status, tc.body);
        const r = await c.refresh();
        assert.ok(r.error, 'accepted');
        assert.equal(r.nextMs, 1000);
        ask(c, {
          name: 'the last good hints',
          operation: 'POST /checkout',
          peer: 'recommendations',
          peer_operation: '',
          want: 'fail_open',
        });
      } finally {
        await s.close();
      }
    });
  }
});

test('hints.json accepted', async t => {
  for (const tc of v.accepted.cases) {
    await t.test(tc.name, async () => {
      const s = await new VectorServer().listen();
      try {
        s.serve(200, tc.body);
        const c = new HintClient(s.url, 'checkout');
        assert.equal((await c.refresh()).error, undefined);
        ask(c, tc.query);
        assert.deepEqual(c.budgetLimits(), tc.budget);
      } finally {
        await s.close();
      }
    });
  }
});

test('hints.json poll_after', async t => {
  for (const tc of v.poll_after.cases) {
    await t.test(tc.name, async () => {
      const body = JSON.stringify({ ...v.documents.sample, ttl_seconds: tc.ttl_seconds });
      const s = await new VectorServer().listen();
      try {
        s.serve(200, body, tc.cache_control ? { 'Cache-Control': tc.cache_control } : {});
        const r = await new HintClient(s.url, 'checkout').refresh();
        assert.equal(r.error, undefined);
        assert.equal(r.nextMs, tc.want_seconds * 1000);
      } finally {
        await s.close();
      }
    });
  }
});

test('hints.json backoff', async () => {
  const s = await new VectorServer().listen();
  try {
    const c = new HintClient(s.url, 'checkout');
    const round = async (): Promise<void> => {
      s.serve(503, 'down');
      for (const [i, want] of v.backoff.after_failures_seconds.entries()) {
        const r = await c.refresh();
        assert.ok(r.error, `failure ${i + 1} accepted`);
        assert.equal(r.nextMs, want * 1000, `failure ${i + 1}`);
      }
    };
    await round();
    s.serve(200, sample);
    assert.equal((await c.refresh()).error, undefined);
    await round(); // a good answer started the count again
  } finally {
    await s.close();
  }
});

test('hints.json etag', async t => {
  const max = v.etag.max_etag_bytes as number;
  for (const tc of [
    { name: 'an ETag is sent back', etag: '"v1"', kept: true },
    { name: 'an ETag of the longest length kept', etag: '"' + 'a'.repeat(max - 2) + '"', kept: true },
    { name: 'an ETag one byte longer is not', etag: '"' + 'a'.repeat(max - 1) + '"', kept: false },
  ]) {
    await t.test(tc.name, async () => {
      const s = await new VectorServer().listen();
      try {
        s.serve(200, sample, { ETag: tc.etag });
        const c = new HintClient(s.url, 'checkout');
        assert.equal((await c.refresh()).error, undefined);
        if (!tc.kept) {
          const r = await c.refresh();
          assert.equal(r.error, undefined);
          assert.equal(s.lastINM, '');
          return;
        }
        s.serve(304, '', { 'Cache-Control': 'max-age=9' });
        let r = await c.refresh();
        assert.equal(r.error, undefined);
        assert.equal(s.lastINM, tc.etag);
        assert.equal(r.nextMs, 9000);
        ask(c, {
          name: 'kept by the 304',
          operation: 'POST /checkout',
          peer: 'recommendations',
          peer_operation: '',
          want: 'fail_open',
        });
        s.serve(304, '');
        r = await c.refresh();
        assert.equal(r.error, undefined);
        assert.equal(r.nextMs, 30000, "304 without max-age: the kept document's ttl");
      } finally {
        await s.close();
      }
    });
  }
});

test('hints.json stale', async () => {
  let now = 1_800_000_000_000;
  const s = await new VectorServer().listen();
  try {
    const c = new HintClient(s.url, 'checkout', { now: () => now });
    const q = { operation: 'POST /checkout', peer: 'recommendations', peer_operation: '' };
    ask(c, { ...q, name: 'before the first answer', want: 'unknown' });
    assert.deepEqual(c.budgetLimits(), v.stale.default_budget);
    s.serve(200, sample);
    assert.equal((await c.refresh()).error, undefined);
    s.serve(503, 'down');
    now += v.stale.max_stale_seconds * 1000 - 1000;
    await c.refresh();
    ask(c, { ...q, name: 'just before max_stale', want: 'fail_open' });
    now += 2000;
    ask(c, { ...q, name: 'past max_stale', want: 'unknown' });
    assert.deepEqual(c.budgetLimits(), v.stale.default_budget);
  } finally {
    await s.close();
  }
});
