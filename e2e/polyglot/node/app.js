// SPDX-License-Identifier: Apache-2.0

'use strict';
// The Node.js service of the polyglot chain (catalog): express, run under
// @opentelemetry/auto-instrumentations-node. It has no hooks code: run alone
// (`node app.js`), the zero-code chain's `--require @errorownership/hooks/register`
// does their work; library.js starts it with the hooks as a library.
const express = require('express');

const SERVICE = process.env.OTEL_SERVICE_NAME;
const ROUTE = process.env.ROUTE || SERVICE;
const NEXT = process.env.NEXT;         // stock: catalog fails without it
const OPTIONAL = process.env.OPTIONAL; // reviews: catalog does without it
let rate = Number(process.env.RATE || '0');
const counters = { served: 0, own: 0, propagated: 0, coincidental: 0 };

function fails(item, attempt) {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(`${item}/${SERVICE}/${attempt || '0'}`)) {
    h = Math.imul(h ^ b, 0x01000193) >>> 0;
  }
  return h / 2 ** 32 < rate;
}

// start serves with fetch (the global one, looked up per call, by default:
// a preload may wrap it) and behind middleware, when there is one.
function start({ fetch = (...args) => globalThis.fetch(...args), middleware } = {}) {
  async function ok(url) {
    try {
      const res = await fetch(url);
      await res.arrayBuffer();
      return res.status < 500;
    } catch {
      return false;
    }
  }

  const app = express();
  if (middleware) app.use(middleware);
  app.get(`/${ROUTE}/:item`, async (req, res) => {
    const { item } = req.params;
    counters.served++;
    const [stockOk, reviewsOk] = await Promise.all([ok(`${NEXT}/${item}`), ok(`${OPTIONAL}/${item}`)]);
    if (!stockOk) {
      counters.propagated++;
      res.status(502).send('stock failed\n');
      return;
    }
    if (fails(item, req.get('Retry-Attempt'))) {
      if (reviewsOk) counters.own++; else counters.coincidental++;
      res.status(500).send('catalog failed\n');
      return;
    }
    res.send('ok\n');
  });
  app.post('/admin/rate', (req, res) => {
    rate = Number(req.query.value);
    res.send('ok\n');
  });
  app.get('/admin/counters', (req, res) => res.json(counters));

  const server = app.listen(0, '127.0.0.1', () => {
    process.stdout.write(`127.0.0.1:${server.address().port}\n`);
  });
  // The tracing preload exports what is left and exits.
  process.on('SIGTERM', () => server.close());
}

module.exports = { start };
if (require.main === module) start();
