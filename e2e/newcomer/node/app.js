// SPDX-License-Identifier: Apache-2.0

'use strict';
// The Node.js service of the newcomer test (e2e/newcomer_test.go),
// written from hooks-node/README.md alone: express, started with
// `node --require ./tracing.js app.js`. GET /work/:id?fail=a,b calls
// MUST_URL, then MAY_URL, when set; answers 500 (503 with no dependencies)
// when its own name is in fail, else 502 when the must call failed, else 200.
// The hooks set Error-Claim; the app never does.
const SERVICE = process.env.OTEL_SERVICE_NAME;
const { MUST_URL, MAY_URL } = process.env;

// region app
const express = require('express');
const eo = require('@errorownership/hooks');

// The hints the collector learned for this service: polled in the
// background, never waited on by a request.
const hints = eo.startHints(process.env.HINTS_URL, process.env.OTEL_SERVICE_NAME);
// One hooked fetch for the service's outbound calls: the calls the hooks see.
const hookedFetch = eo.createFetch({ hints });

const app = express();
app.use(eo.expressMiddleware({ hints })); // first, before the routes
// endregion app

// region call
// true when the dependency answered 2xx (after the hooks' retries).
async function call(url) {
  try {
    const res = await hookedFetch(url);
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false; // refused, reset, timed out: the hooks saw it fail too
  }
}
// endregion call

app.get('/work/:id', async (req, res) => {
  const fail = typeof req.query.fail === 'string' ? req.query.fail : '';
  const path = `/work/${encodeURIComponent(req.params.id)}?fail=${encodeURIComponent(fail)}`;
  const mustOK = MUST_URL ? await call(MUST_URL + path) : true;
  if (MAY_URL) await call(MAY_URL + path); // tolerated when it fails
  if (fail.split(',').includes(SERVICE)) {
    res.status(MUST_URL || MAY_URL ? 500 : 503).send(`${SERVICE} failed\n`);
  } else if (!mustOK) {
    res.status(502).send('must failed\n');
  } else {
    res.send('ok\n');
  }
});

const server = app.listen(0, '127.0.0.1', () => {
  process.stdout.write(`127.0.0.1:${server.address().port}\n`);
});
