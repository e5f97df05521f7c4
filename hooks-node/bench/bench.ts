// SPDX-License-Identifier: Apache-2.0

// Per-request overhead of the server hooks plus the client hooks against
// the bare path. No OpenTelemetry SDK is registered (the API's no-op), so
// the figures are the hooks' own cost. Run: npm run bench.
import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Ledger, createFetch, runWithLedger, wrapRequestListener, attachServerHooks } from '../src';

async function listen(srv: http.Server): Promise<string> {
  await new Promise<void>(r => srv.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
}

async function timeIt(n: number, f: () => Promise<void>): Promise<number> {
  for (let i = 0; i < Math.min(200, n); i++) await f(); // warm up
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await f();
  return Number(process.hrtime.bigint() - t0) / 1000 / n;
}

function fmt(x: number): string {
  return x.toFixed(2).padStart(9) + ' µs/op';
}

async function main(): Promise<void> {
  // 1. In process: the hooks around a fetch that answers at once, and the
  //    server hooks around a response that is written to nowhere.
  const stub = async (): Promise<Response> => new Response('ok', { status: 200 });
  const hooked = createFetch({ fetch: stub as unknown as typeof fetch });
  const N = 50_000;
  const bareClient = await timeIt(N, async () => void (await stub()));
  const hookedClient = await timeIt(N, () =>
    runWithLedger(new Ledger(), async () => void (await hooked('http://10.0.0.7:8080/x')))
  );
  const fakeRes = (): ServerResponse => {
    const req = new IncomingMessage(null as never);
    const res = new ServerResponse(req);
    res.writeHead = function (this: ServerResponse) {
      return this;
    };
    return res;
  };
  const bareServer = await timeIt(N, async () => {
    const res = fakeRes();
    res.statusCode = 500;
    res.writeHead(500);
  });
  const hookedServer = await timeIt(N, async () => {
    const res = fakeRes();
    const l = attachServerHooks(res.req, res);
    runWithLedger(l, () => {
      res.statusCode = 500;
      res.writeHead(500);
    });
  });
  console.log('in process (no network):');
  console.log(
    `  client, success     bare ${fmt(bareClient)}   hooks ${fmt(hookedClient)}   overhead ${fmt(hookedClient - bareClient)}`
  );
  console.log(
    `  server, 500 claimed bare ${fmt(bareServer)}   hooks ${fmt(hookedServer)}   overhead ${fmt(hookedServer - bareServer)}`
  );

  // 2. End to end on 127.0.0.1: a service whose handler calls a callee.
  const callee = http.createServer((_q, r) => r.end('ok'));
  const calleeURL = await listen(callee);
  const bareSvc = http.createServer(async (_q, r) => {
    const res = await fetch(calleeURL);
    await res.arrayBuffer();
    r.end('done');
  });
  const f = createFetch();
  const hookedSvc = http.createServer(
    wrapRequestListener(async (_q, r) => {
      const res = await f(calleeURL);
      await res.arrayBuffer();
      r.end('done');
    })
  );
  const bareURL = await listen(bareSvc);
  const hookedURL = await listen(hookedSvc);
  const M = 3000;
  const get = (u: string) => async (): Promise<void> => {
    const res = await fetch(u);
    await res.arrayBuffer();
  };
  // interleave the runs so that machine load weighs on both alike
  let bare = 0;
  let hook = 0;
  for (let k = 0; k < 3; k++) {
    bare += await timeIt(M, get(bareURL));
    hook += await timeIt(M, get(hookedURL));
  }
  bare /= 3;
  hook /= 3;
  console.log('end to end on 127.0.0.1 (caller → service → callee, sequential):');
  console.log(`  request             bare ${fmt(bare)}   hooks ${fmt(hook)}   overhead ${fmt(hook - bare)}`);
  for (const s of [callee, bareSvc, hookedSvc]) {
    s.closeAllConnections();
    s.close();
  }
}

void main();
