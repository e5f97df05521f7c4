// SPDX-License-Identifier: Apache-2.0

// The service scripts/test-preload.ts runs, in a project that installed the
// packed tarball, with `node --require
// @opentelemetry/auto-instrumentations-node/register --require
// @errorownership/hooks/register app.js` (in either order, or the hooks
// alone). Its code knows nothing of the hooks: plain express, http.Server,
// fetch and http.get. The test drives it over the IPC channel, which no
// instrumentation sees.
'use strict';

// http and express are the caller's: app.mjs passes those it imported (ESM).
let http;
let express;
const servers = [];

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      servers.push(server);
      resolve(`http://127.0.0.1:${server.address().port}`);
    });
  });
}

/** One call through a plain client; resolves to the status, or 0 when the call threw. */
async function call(via, url, method, headers, body) {
  try {
    if (via === 'fetch') {
      const r = await fetch(url, { method, headers, body });
      await r.arrayBuffer();
      return r.status;
    }
    return await new Promise((resolve, reject) => {
      const done = res => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      };
      const req = via === 'get' ? http.get(url, { headers }, done) : http.request(url, { method, headers }, done);
      req.on('error', reject);
      if (via === 'streaming') {
        // The body ends only once the answer came: too late to send it again.
        req.write('part, ');
        req.once('response', () => req.end('rest'));
      } else if (via !== 'get') req.end(body);
    });
  } catch {
    return 0;
  }
}

/** The handler of case c: its calls, in order, then its answer. */
async function handle(c, res) {
  for (const k of c.calls ?? [])
    await call(k.via ?? 'fetch', k.url, k.method, {}, k.method === 'POST' ? 'x' : undefined);
  if (c.set_claim) res.setHeader('Error-Claim', c.set_claim.length === 1 ? c.set_claim[0] : c.set_claim);
  res.statusCode = c.status;
  res.end('done');
}

async function serve({ kind, cases }) {
  if (kind === 'express') {
    const app = express();
    app.get('/case/:id', (req, res, next) => void handle(cases[Number(req.params.id)], res).catch(next));
    return listen(http.createServer(app));
  }
  return listen(
    http.createServer((req, res) => {
      const m = /^\/case\/(\d+)$/.exec(req.url ?? '');
      if (!m) {
        res.statusCode = 404;
        res.end();
        return;
      }
      void handle(cases[Number(m[1])], res);
    })
  );
}

// ---- @grpc/grpc-js: a unary method whose messages are bytes ----

let grpcKit;
function grpcjs() {
  if (grpcKit) return grpcKit;
  const grpc = require('@grpc/grpc-js');
  const id = b => b;
  const service = {
    Call: {
      path: '/test.Svc/Call',
      requestStream: false,
      responseStream: false,
      requestSerialize: id,
      requestDeserialize: id,
      responseSerialize: id,
      responseDeserialize: id,
    },
  };
  grpcKit = { grpc, service, Client: grpc.makeGenericClientConstructor(service, 'Svc'), clients: new Map() };
  return grpcKit;
}

/** One unary call to address; resolves to the status code. */
function grpcCall(address, body = 'hi') {
  const { grpc, Client, clients } = grpcjs();
  let c = clients.get(address);
  if (!c) clients.set(address, (c = new Client(address, grpc.credentials.createInsecure())));
  return new Promise(resolve => {
    c.Call(Buffer.from(body), new grpc.Metadata(), { deadline: Date.now() + 10_000 }, err =>
      resolve(err ? err.code : 0)
    );
  });
}

/** A gRPC server answering case i (the request's body) as grpc.json's server cases say. */
function grpcServe({ cases }) {
  const { grpc, service } = grpcjs();
  const server = new grpc.Server();
  server.addService(service, {
    Call: (rpc, cb) => {
      const c = cases[Number(rpc.request.toString())];
      void (async () => {
        for (const address of c.calls ?? []) await grpcCall(address);
        const md = new grpc.Metadata();
        if (c.set_claim !== undefined) md.set('error-claim', c.set_claim);
        if (c.code === 0) cb(null, Buffer.from('ok'), md);
        else cb({ code: c.code, details: 'answer', metadata: md });
      })();
    },
  });
  return new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
      if (err) return reject(err);
      servers.push({ close: () => server.forceShutdown() });
      resolve(`127.0.0.1:${port}`);
    })
  );
}

const ops = {
  call: m => call(m.via, m.url, m.method, m.headers ?? {}, m.body),
  grpcCall: m => grpcCall(m.address),
  grpcServe,
  serve,
  ping: () => 'pong',
};

function run(httpModule, expressModule) {
  http = httpModule;
  express = expressModule;
  process.on('message', m => {
    Promise.resolve()
      .then(() => ops[m.op](m))
      .then(
        result => process.send({ id: m.id, result }),
        err => process.send({ id: m.id, error: String(err?.stack ?? err) })
      );
  });
  process.on('disconnect', () => {
    for (const s of servers) s.close();
    for (const c of grpcKit?.clients.values() ?? []) c.close();
    setTimeout(() => process.exit(0), 200).unref();
  });
}

module.exports = run;
if (require.main === module) run(require('node:http'), require('express'));
