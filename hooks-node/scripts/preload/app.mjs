// SPDX-License-Identifier: Apache-2.0

// app.js as an ES module service: node:http imported, not required, so the
// ESM loader hooks (import-in-the-middle) instrument it. No express: a
// CommonJS package requiring node:http beside this import makes
// instrumentation-http 0.300 patch it twice (two CLIENT spans per call,
// with or without the hooks), which is not what this test is about.
import http from 'node:http';
import run from './app.js';

run(http, undefined);
