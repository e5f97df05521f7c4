// SPDX-License-Identifier: Apache-2.0

// Run by scripts/test-artifact.ts inside a fresh project that installed the
// packed tarball: a service behind the hooks' express middleware, and a client
// through the hooks' fetch, as README.md sets them up. No SDK is registered,
// as in a service that has not set up tracing yet: the hooks keep the
// request's ledger themselves.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const express = require('express');
const eo = require('@errorownership/hooks');
const { grpcClientInterceptor } = require('@errorownership/hooks/grpc');

/** Starts server on 127.0.0.1, port 0, and resolves to its base URL. */
function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`));
  });
}

async function main() {
  // The hooks must come from the installed tarball, not a link to a checkout.
  const installed = fs.realpathSync(require.resolve('@errorownership/hooks'));
  assert.ok(installed.startsWith(fs.realpathSync(path.join(__dirname, 'node_modules'))), installed);
  assert.equal(typeof grpcClientInterceptor, 'function');

  const hits = new Map();
  const count = name => hits.set(name, (hits.get(name) ?? 0) + 1);

  // A dependency without the hooks: fails, and says nothing about whose fault it was.
  const dependency = http.createServer((req, res) => {
    count('dependency');
    res.statusCode = 503;
    res.end('down');
  });
  const dependencyURL = await listen(dependency);

  const hookedFetch = eo.createFetch({ backoff: { initialMs: 1, maxMs: 2 } });
  const app = express();
  app.use(eo.expressMiddleware());
  // Fails on its own: the hooks claim the error, and a caller may retry it.
  app.get('/own', (req, res) => {
    count('own');
    res.status(500).send('broken here');
  });
  // Fails because its dependency did (without a claim, after the retries the
  // hooks allow): the hooks unclaim it, and callers must not retry.
  app.get('/passes-on', async (req, res) => {
    count('passes-on');
    const r = await hookedFetch(`${dependencyURL}/stock`);
    await r.arrayBuffer();
    res.status(502).send('dependency failed');
  });
  const service = http.createServer(app);
  const serviceURL = await listen(service);

  try {
    const own = await hookedFetch(`${serviceURL}/own`);
    await own.arrayBuffer();
    assert.equal(own.status, 500);
    assert.equal(own.headers.get('error-claim'), 'claimed');
    assert.equal(hits.get('own'), 3, 'a claimed error is retried up to the 3 attempts');

    const passesOn = await hookedFetch(`${serviceURL}/passes-on`);
    await passesOn.arrayBuffer();
    assert.equal(passesOn.status, 502);
    assert.equal(passesOn.headers.get('error-claim'), 'unclaimed');
    assert.equal(hits.get('passes-on'), 1, 'an unclaimed error is not retried');
    assert.equal(hits.get('dependency'), 3, 'an unlabelled error is retried');

    // Read off the files: @opentelemetry/api exports no ./package.json.
    const versionOf = name =>
      JSON.parse(fs.readFileSync(path.join(__dirname, 'node_modules', name, 'package.json'), 'utf8')).version;
    console.log(
      `consumer: @errorownership/hooks ${versionOf('@errorownership/hooks')} from ${path.dirname(installed)}`
    );
    console.log(`consumer: express ${versionOf('express')}, @opentelemetry/api ${versionOf('@opentelemetry/api')}`);
    console.log(`consumer: GET /own -> ${own.status} Error-Claim: claimed, ${hits.get('own')} attempts`);
    console.log(
      `consumer: GET /passes-on -> ${passesOn.status} Error-Claim: unclaimed, 1 attempt (dependency tried ${hits.get('dependency')} times)`
    );
  } finally {
    service.close();
    dependency.close();
  }
}

main().catch(err => {
  console.error(err);
  process.exit(1);
});
