// SPDX-License-Identifier: Apache-2.0

'use strict';
// app.js with the errorownership hooks as a library, as hooks-node/README.md
// sets them up for express and fetch (TestPolyglotChain; run with
// `node --require ./tracing.js library.js`).
const eo = require('@errorownership/hooks');
const { start } = require('./app');

const hints = eo.startHints(process.env.HINTS_URL, process.env.OTEL_SERVICE_NAME);
start({ fetch: eo.createFetch({ hints }), middleware: eo.expressMiddleware({ hints }) });
