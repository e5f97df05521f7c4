// SPDX-License-Identifier: Apache-2.0

'use strict';
// Tracing for the Node.js service of the polyglot chain, as
// hooks-node/README.md sets it up with @opentelemetry/auto-instrumentations-node:
// the auto-instrumentations, with the hooks' instrumentation hooks so that
// every attempt's CLIENT span gets the hooks' attributes. Loaded with
// `node --require ./tracing.js`; the exporter and the service name come from
// the standard OTEL_* variables.
const { NodeSDK } = require('@opentelemetry/sdk-node');
const { getNodeAutoInstrumentations } = require('@opentelemetry/auto-instrumentations-node');
const eo = require('@errorownership/hooks');

const sdk = new NodeSDK({
  instrumentations: [getNodeAutoInstrumentations({
    '@opentelemetry/instrumentation-http': eo.httpHooks(),
    '@opentelemetry/instrumentation-undici': eo.undiciHooks(),
  })],
});
sdk.start();
process.on('SIGTERM', () => { sdk.shutdown().finally(() => process.exit(0)); });
