// SPDX-License-Identifier: Apache-2.0

'use strict';
// tracing.js: loaded before the app, `node --require ./tracing.js app.js`.
// @opentelemetry/auto-instrumentations-node/register takes no configuration,
// so the service starts the SDK itself, with the hooks' instrumentation hooks.
// The exporter and the service name come from the OTEL_* variables.
const { NodeSDK } = require('@opentelemetry/sdk-node');
const { getNodeAutoInstrumentations } = require('@opentelemetry/auto-instrumentations-node');
const eo = require('@errorownership/hooks');

const sdk = new NodeSDK({
  instrumentations: [
    getNodeAutoInstrumentations({
      '@opentelemetry/instrumentation-http': eo.httpHooks(),
      '@opentelemetry/instrumentation-undici': eo.undiciHooks(),
    }),
  ],
});
sdk.start();

// The SDK exports in batches: shut it down before exiting, or the last
// spans are lost.
process.on('SIGTERM', () => {
  sdk.shutdown().finally(() => process.exit(0));
});
