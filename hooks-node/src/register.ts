// SPDX-License-Identifier: Apache-2.0

/*
 * The zero-code hooks: `node --require @errorownership/hooks/register app.js`,
 * beside `--require @opentelemetry/auto-instrumentations-node/register` in
 * either order, or alone (claims and retries then work without spans).
 * Configured by the environment only (conformance/vocabulary.yaml, group
 * environment); switched off as the auto-instrumentations are, by
 * OTEL_NODE_DISABLED_INSTRUMENTATIONS (or an OTEL_NODE_ENABLED_INSTRUMENTATIONS
 * without it) naming "errorownership".
 */
// The modules themselves, not an import's namespace copy: the wrappers replace their functions.
// eslint-disable-next-line @typescript-eslint/no-require-imports
import http = require('node:http');
// eslint-disable-next-line @typescript-eslint/no-require-imports
import https = require('node:https');
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';
import { HintSource } from './claim';
import { startHints } from './hints';
import { EnvHints, readEnv, switchedOff } from './zerocode/env';
import { isWrapped, wrapGlobalFetch, wrapHttpClient } from './zerocode/client';
import { patchInstrumentationExports } from './zerocode/instrumentations';
import { wrapServer } from './zerocode/server';
import { hookGrpc } from './zerocode/grpc';

const INSTRUMENTATIONS = [
  '@opentelemetry/instrumentation-http',
  '@opentelemetry/instrumentation-undici',
  '@opentelemetry/instrumentation-grpc',
];

/*
 * The instrumentation classes the OpenTelemetry register uses: the copies its
 * own package resolves, and the service's (a tracing.js of its own). Loading
 * them here is what they cost anyway, and when this preload runs first it
 * puts them in the module cache, where the register then finds them.
 */
function patchInstrumentations(): void {
  const esm = preloadsESM();
  const seen = new Set<string>();
  const bases = [path.join(process.cwd(), 'noop.js')];
  if (process.argv[1]) bases.push(path.resolve(process.argv[1]));
  const requires: NodeJS.Require[] = [];
  for (const b of bases) {
    const r = createRequire(b);
    requires.push(r);
    try {
      requires.push(createRequire(r.resolve('@opentelemetry/auto-instrumentations-node')));
    } catch {
      // no auto-instrumentations here
    }
  }
  for (const r of requires) {
    for (const name of INSTRUMENTATIONS) {
      let file: string;
      try {
        file = r.resolve(name);
      } catch {
        continue;
      }
      if (seen.has(file)) continue;
      seen.add(file);
      try {
        patchInstrumentationExports(r(file));
      } catch {
        // a copy that does not load is one no register uses
      }
      if (esm) patchESMBuild(file);
    }
  }
  // Copies loaded already from elsewhere (a register resolved from its own place).
  for (const [file, m] of Object.entries(require.cache)) {
    if (!seen.has(file) && /[\\/]@opentelemetry[\\/]instrumentation-(http|undici|grpc)[\\/]/.test(file)) {
      patchInstrumentationExports(m?.exports);
    }
  }
}

// The CommonJS build turns import() into require(); this keeps it an ESM import.
// eslint-disable-next-line @typescript-eslint/no-implied-eval
const importESM = new Function('url', 'return import(url)') as (url: string) => Promise<unknown>;

/** The ESM entry point a package.json's exports give "." (import or default, not require), if any. */
function esmTarget(exp: unknown): string | undefined {
  if (typeof exp === 'string') return exp;
  if (typeof exp !== 'object' || exp === null || Array.isArray(exp)) return undefined;
  const e = exp as Record<string, unknown>;
  if ('.' in e) return esmTarget(e['.']);
  for (const k of ['import', 'node', 'default']) if (k in e) return esmTarget(e[k]);
  return undefined;
}

/**
 * Whether the process preloads ES modules (`--import`, or a loader), in its
 * arguments or NODE_OPTIONS: an ESM register can only run before the service
 * that way, so without them the ESM builds are nobody's to patch, and are not
 * loaded.
 */
function preloadsESM(): boolean {
  const args = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  return args.some(a => /^--(import|loader|experimental-loader)(=|$)/.test(a));
}

/*
 * A dual package (instrumentation-http 0.300 and later) has an ESM build
 * beside the CommonJS one: `--import @opentelemetry/auto-instrumentations-node/register`
 * loads the ESM register, whose instrumentation classes are the ESM build's,
 * another class than the one patched above. Node keeps one instance of a
 * module per URL, so importing that file patches the class that register
 * uses, whenever it loads it.
 */
function patchESMBuild(cjsFile: string): void {
  let dir = path.dirname(cjsFile);
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) return;
    dir = up;
  }
  let target: string | undefined;
  try {
    target = esmTarget(
      (JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { exports?: unknown }).exports
    );
  } catch {
    return;
  }
  if (!target) return;
  const file = path.resolve(dir, target);
  if (file === cjsFile || !/\.m?js$/.test(file)) return;
  importESM(pathToFileURL(file).href).then(
    m => patchInstrumentationExports(m),
    () => undefined // no ESM build to patch: only the CommonJS one is used
  );
}

function register(): void {
  const env = process.env;
  if (switchedOff(env) || isWrapped(globalThis.fetch)) return;
  const cfg = readEnv(env, m => process.emitWarning(m, 'ErrorOwnershipWarning'));
  const original = globalThis.fetch;
  let inner: HintSource | undefined;
  // The hint client polls with the fetch it was given, never the hooked one; its polls are untraced.
  if (cfg.hintsEndpoint && cfg.service) inner = startHints(cfg.hintsEndpoint, cfg.service, { fetch: original });
  const hints = new EnvHints(inner, cfg.ratio, cfg.minRetriesPerSecond);
  try {
    patchInstrumentations();
  } catch {
    // without the instrumentations' hooks, the spans lack the attributes; the rest works
  }
  wrapServer(http.Server.prototype, hints);
  wrapServer(https.Server.prototype, hints);
  wrapHttpClient(http, 'http:', hints, cfg.maxAttempts);
  wrapHttpClient(https, 'https:', hints, cfg.maxAttempts);
  if (typeof original === 'function') wrapGlobalFetch(original, hints, cfg.maxAttempts);
  hookGrpc(hints, cfg.maxAttempts);
}

try {
  register();
} catch (e) {
  // A preload that throws stops the service: warn and run without the hooks.
  process.emitWarning(
    `errorownership: the zero-code hooks did not start (${e instanceof Error ? e.message : String(e)}); the service runs without them. Report it at https://github.com/errorownership/errorownership/issues.`,
    'ErrorOwnershipWarning'
  );
}
