// SPDX-License-Identifier: Apache-2.0

// `npm run test:preload` (make test-hooks): the zero-code path as a user
// gets it. npm pack makes the tarball; a project in the system's temp
// directory installs it with @opentelemetry/auto-instrumentations-node and
// express; scripts/preload/app.js, a service that knows nothing of the
// hooks, runs there in child processes under `node --require
// @opentelemetry/auto-instrumentations-node/register --require
// @errorownership/hooks/register` (both orders, the hooks switched off by
// the OTEL_NODE_*_INSTRUMENTATIONS variables, and the hooks alone). Its
// spans come to an OTLP/HTTP JSON receiver here; scripts/preload/count-sets.js
// (test only) writes on each span how often each attribute was set.
import * as assert from 'node:assert/strict';
import { ChildProcess, fork } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { ScriptedCallee, Scripted, listen } from '../test/helpers';
import { load } from '../test/vectors';
import { Client, code as grpcCode, scriptedCallee } from '../test/grpc-helpers';
import * as grpc from '@grpc/grpc-js';
import { ENV_HINTS_ENDPOINT, ENV_MAX_ATTEMPTS, ENV_MIN_RETRIES_PER_SECOND, ENV_RETRY_RATIO } from '../src/vocabulary';
import { installProject, npm, root, run } from './project';

const OTEL = '@opentelemetry/auto-instrumentations-node/register';
const HOOKS = '@errorownership/hooks/register';
const SERVICE = 'preload-test';
const SETS = 'test.errorownership.sets';

let dir = '';
let project = '';

// ---- spans, as OTLP/HTTP JSON delivers them ----

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: OtlpValue }[];
  droppedAttributesCount?: number;
}
type Attr = string | number | boolean | undefined;
interface Span {
  kind: 'server' | 'client' | 'other';
  traceId: string;
  parentSpanId: string;
  start: number;
  attrs: Record<string, Attr>;
  dropped: number;
}

const spans: Span[] = [];

function value(v: OtlpValue): Attr {
  if (v.intValue !== undefined) return Number(v.intValue);
  return v.stringValue ?? v.boolValue ?? v.doubleValue;
}

const receiver = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    try {
      const doc = JSON.parse(Buffer.concat(chunks).toString()) as {
        resourceSpans?: { scopeSpans?: { spans?: (OtlpSpan & { startTimeUnixNano?: string })[] }[] }[];
      };
      for (const rs of doc.resourceSpans ?? [])
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? []) {
            const attrs: Record<string, Attr> = {};
            for (const a of s.attributes ?? []) attrs[a.key] = value(a.value);
            spans.push({
              kind: s.kind === 2 ? 'server' : s.kind === 3 ? 'client' : 'other',
              traceId: s.traceId,
              parentSpanId: s.parentSpanId ?? '',
              start: Number(s.startTimeUnixNano ?? 0),
              attrs,
              dropped: s.droppedAttributesCount ?? 0,
            });
          }
    } catch {
      // a body that is not OTLP JSON is no span
    }
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{}');
  });
});

function portOf(s: Span): string {
  return String(s.attrs['server.port'] ?? s.attrs['net.peer.port'] ?? s.attrs['net.host.port'] ?? '');
}

/** The attributes of ours on s, exactly, having checked each was set once and none dropped (conformance/README.md). */
function oursSetOnce(s: Span): Record<string, unknown> {
  assert.equal(s.dropped, 0, 'dropped attributes');
  const sets = JSON.parse(String(s.attrs[SETS] ?? '{}')) as Record<string, number>;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s.attrs)) {
    if (!k.startsWith('error_ownership.') && k !== 'http.request.resend_count') continue;
    assert.equal(sets[k], 1, `times ${k} was set`);
    out[k] = v;
  }
  return out;
}

/**
 * The spans since index `since` of spans[] that pred accepts, once there are
 * n (or after ms), by start time. A case counts only the spans that came
 * after it began: a closed callee's port is soon another's.
 */
async function spansWhen(pred: (s: Span) => boolean, n: number, since = 0, ms = 5000): Promise<Span[]> {
  const until = Date.now() + ms;
  for (;;) {
    const got = spans.slice(since).filter(pred);
    if (got.length >= n || Date.now() > until) return got.sort((a, b) => a.start - b.start);
    await new Promise(r => setTimeout(r, 20));
  }
}

// ---- the hints the collector would serve ----

let hintsDoc: Record<string, unknown> = { version: 1, service: SERVICE, edges: [] };
let polled: () => void = () => undefined;
const firstPoll = new Promise<void>(r => (polled = r));
const hintsServer = http.createServer((req, res) => {
  polled();
  res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'max-age=1' });
  res.end(JSON.stringify(hintsDoc));
});

// ---- the service, in a child process ----

/** How the service is started: node's flags and its main module. */
interface Launch {
  execArgv: string[];
  script: string;
}

/** app.js under `--require` of each preload (count-sets.js after the register, when there is one). */
function requiring(...preloads: string[]): Launch {
  const execArgv = preloads.flatMap(p => ['--require', p]);
  if (preloads.includes(OTEL)) execArgv.push('--require', './count-sets.js');
  return { execArgv, script: 'app.js' };
}

/**
 * app.mjs, an ES module service, as OpenTelemetry's ESM set-up runs it:
 * import-in-the-middle's loader and `--import` of the register, the hooks
 * by `--require` (which runs before any `--import`).
 */
const esm: Launch = {
  execArgv: [
    '--experimental-loader=@opentelemetry/instrumentation/hook.mjs',
    '--no-warnings=ExperimentalWarning',
    '--require',
    HOOKS,
    '--import',
    OTEL,
    '--import',
    './count-sets.js',
  ],
  script: 'app.mjs',
};

class Service {
  readonly child: ChildProcess;
  private next = 0;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  stderr = '';

  constructor(launch: Launch, env: Record<string, string>) {
    this.child = fork(launch.script, [], {
      cwd: project,
      execArgv: launch.execArgv,
      env: { ...baseEnv(), ...env },
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    });
    this.child.stderr?.on('data', (c: Buffer) => (this.stderr += c.toString()));
    this.child.on('message', (m: { id: number; result?: unknown; error?: string }) => {
      const w = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      if (m.error !== undefined) w?.reject(new Error(m.error));
      else w?.resolve(m.result);
    });
    this.child.on('exit', code => {
      for (const w of this.waiting.values()) w.reject(new Error(`service exited ${code}: ${this.stderr}`));
      this.waiting.clear();
    });
  }

  ask<T>(op: string, args: Record<string, unknown> = {}): Promise<T> {
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.child.send({ id, op, ...args });
    });
  }

  stop(): Promise<void> {
    return new Promise(r => {
      if (this.child.exitCode !== null) return r();
      this.child.once('exit', () => r());
      this.child.disconnect();
    });
  }
}

let receiverURL = '';
let hintsURL = '';

function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith('OTEL_') && !k.startsWith('ERROROWNERSHIP_') && k !== 'NODE_OPTIONS')
      env[k] = v;
  }
  return {
    ...env,
    OTEL_SERVICE_NAME: SERVICE,
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiverURL}/v1/traces`,
    OTEL_BSP_SCHEDULE_DELAY: '20',
    OTEL_METRICS_EXPORTER: 'none',
    OTEL_LOGS_EXPORTER: 'none',
    OTEL_NODE_RESOURCE_DETECTORS: 'none',
  };
}

before(async () => {
  receiverURL = await listen(receiver);
  hintsURL = await listen(hintsServer);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'errorownership-hooks-preload-'));
  const [packed] = JSON.parse(run(npm, ['pack', '--json', '--pack-destination', dir], root)) as { filename: string }[];
  // The versions of the newcomer test's service (e2e/newcomer/node), whose cache CI has warm.
  const packages = [
    '@opentelemetry/auto-instrumentations-node@0.82.0',
    '@opentelemetry/api@1.10.0',
    'express@5.3.0',
    '@grpc/grpc-js@1.14.7',
  ];
  project = installProject(dir, 'preload-service', [path.join(dir, packed.filename), ...packages], 'preload', [
    'app.js',
    'app.mjs',
    'count-sets.js',
  ]);
});

after(() => {
  receiver.close();
  hintsServer.close();
  if (dir && !process.env.EO_KEEP_ARTIFACT_DIR) fs.rmSync(dir, { recursive: true, force: true });
});

// ---- the conformance vectors ----

const client = load('client.json');
const server = load('server.json');

const orders: [string, Launch][] = [
  ['auto-instrumentations register, then the hooks', requiring(OTEL, HOOKS)],
  ['the hooks, then the auto-instrumentations register', requiring(HOOKS, OTEL)],
  ['ESM: an ES module app, the register by --import', esm],
];

/** The environment a client case's settings need: each group gets a service of its own. */
function envOf(tc: {
  max_attempts?: number;
  budget?: { ratio: number; min_retries_per_second: number };
}): Record<string, string> {
  const env: Record<string, string> = {};
  if (tc.max_attempts !== undefined) env[ENV_MAX_ATTEMPTS] = String(tc.max_attempts);
  if (tc.budget) {
    env[ENV_RETRY_RATIO] = String(tc.budget.ratio);
    env[ENV_MIN_RETRIES_PER_SECOND] = String(tc.budget.min_retries_per_second);
  }
  return env;
}

/** How app.js makes a call: the global fetch, or http.request (then ended with the body). */
type Via = 'fetch' | 'request';

/** Runs client case tc through svc's client `via`; the spans are checked when `spans` is set (a register loaded). */
async function clientCase(svc: Service, via: Via, tc: (typeof client.cases)[number], spansToo: boolean): Promise<void> {
  const callee = await new ScriptedCallee(tc.responses as Scripted[]).listen();
  const seen = spans.length;
  try {
    const status = await svc.ask<number>('call', {
      via,
      url: callee.url + '/thing',
      method: tc.method,
      headers: tc.headers ?? {},
      body: tc.body,
    });
    assert.equal(status, tc.want.status, 'status');
    assert.deepEqual(callee.attempts, tc.want.requests, 'Retry-Attempt per attempt');
    if (tc.want.bodies) assert.deepEqual(callee.bodies, tc.want.bodies, 'bodies');
    if (!spansToo) return;
    const port = new URL(callee.url).port;
    const got = await spansWhen(sp => sp.kind === 'client' && portOf(sp) === port, tc.want.spans.length, seen);
    assert.deepEqual(got.map(oursSetOnce), tc.want.spans, 'attributes per attempt span');
  } finally {
    await callee.close();
  }
}

/**
 * server.json's cases as app.js serves them, with a scripted callee per
 * call (made through `via`: fetch, or http.get / http.request by method)
 * and the hints edges of the calls with a mode.
 */
class ServerCases {
  readonly callees: ScriptedCallee[][] = [];
  readonly edges: Record<string, string>[] = [];
  readonly cases: unknown[] = [];

  static async make(operation: (i: number) => string, via: Via): Promise<ServerCases> {
    const sc = new ServerCases();
    for (const [i, tc] of server.cases.entries()) {
      const cs: ScriptedCallee[] = [];
      for (const c of tc.calls ?? []) {
        const callee = await new ScriptedCallee(c.responses as Scripted[]).listen();
        cs.push(callee);
        if (c.mode)
          sc.edges.push({
            operation: operation(i),
            peer_service: callee.address,
            peer_operation: `${c.method} /dep`,
            mode: c.mode,
          });
      }
      sc.callees.push(cs);
      sc.cases.push({
        status: tc.status,
        set_claim: tc.set_claim,
        calls: (tc.calls ?? []).map((c: { method: string }, j: number) => ({
          url: cs[j].url + '/dep',
          method: c.method,
          via: via === 'fetch' ? 'fetch' : c.method === 'GET' ? 'get' : 'request',
        })),
      });
    }
    return sc;
  }

  async close(): Promise<void> {
    for (const cs of this.callees) for (const c of cs) await c.close();
  }
}

/** GET /case/i of a service, its status and Error-Claim. */
async function getCase(base: string, i: number): Promise<{ status: number; claim: string | null }> {
  const res = await fetch(`${base}/case/${i}`);
  await res.arrayBuffer();
  return { status: res.status, claim: res.headers.get('error-claim') };
}

for (const [order, launch] of orders) {
  for (const via of ['fetch', 'request'] as const) {
    test(`client.json via ${via === 'fetch' ? 'fetch' : 'http.request'}, ${order}`, async t => {
      assert.ok(client.cases.length > 0);
      const services = new Map<string, Service>();
      try {
        for (const tc of client.cases) {
          const env = envOf(tc);
          const key = JSON.stringify(env);
          let svc = services.get(key);
          if (!svc) {
            svc = new Service(launch, env);
            services.set(key, svc);
          }
          const s = svc;
          await t.test(tc.name, () => clientCase(s, via, tc, true));
        }
      } finally {
        for (const s of services.values()) await s.stop();
      }
    });
  }

  const kinds = [
    ['express', 'fetch'],
    ['http.Server', 'fetch'],
    ['http.Server', 'request'],
  ] as const;
  for (const [kind, via] of kinds) {
    // ESM: http.Server, its calls through http.get (app.mjs has no express; fetch is client.json's above).
    if (launch === esm && via === 'fetch') continue;
    const calls = via === 'fetch' ? '' : ', its calls through plain http.get / http.request';
    test(`server.json via ${kind}${calls}, ${order}`, async t => {
      assert.ok(server.cases.length > 0);
      const sc = await ServerCases.make(i => (kind === 'express' ? 'GET /case/:id' : `GET /case/${i}`), via);
      try {
        hintsDoc = { version: 1, service: SERVICE, edges: sc.edges };
        const svc = new Service(launch, { [ENV_HINTS_ENDPOINT]: hintsURL });
        try {
          await svc.ask('ping');
          await firstPoll;
          // The first poll of this service: its hints hold these callees' edges.
          await new Promise(r => setTimeout(r, 300));
          const base = await svc.ask<string>('serve', {
            kind: kind === 'express' ? 'express' : 'http',
            cases: sc.cases,
          });
          const port = new URL(base).port;
          for (const [i, tc] of server.cases.entries()) {
            await t.test(tc.name, async () => {
              const seen = spans.length;
              const got = await getCase(base, i);
              assert.equal(got.status, tc.status);
              assert.equal(got.claim, tc.want.header, 'Error-Claim');
              const isServer = (s: Span): boolean => s.kind === 'server' && portOf(s) === port;
              const [ss, ...more] = await spansWhen(isServer, 1, seen);
              assert.equal(more.length, 0, 'one SERVER span');
              assert.deepEqual(oursSetOnce(ss), tc.want.span, 'SERVER span attributes');
              // Each attempt of each call: instrumentation-http's own CLIENT span, numbered.
              for (const callee of sc.callees[i]) {
                const depPort = new URL(callee.url).port;
                const cs = await spansWhen(
                  s => s.kind === 'client' && portOf(s) === depPort,
                  callee.attempts.length,
                  seen
                );
                assert.deepEqual(
                  cs.map(s => [s.traceId, oursSetOnce(s)['error_ownership.retry.attempt']]),
                  callee.attempts.map((_, n) => [ss.traceId, n]),
                  'one CLIENT span per attempt, in the request trace'
                );
              }
            });
          }
        } finally {
          await svc.stop();
        }
      } finally {
        await sc.close();
      }
    });
  }
}

// ---- @grpc/grpc-js: grpc.json through app.js's client and server ----

const grpcVectors = load('grpc.json');
type GrpcClientCase = (typeof grpcVectors.client.cases)[number];
type GrpcServerCase = (typeof grpcVectors.server.cases)[number];

/** Runs grpc.json client case tc through svc's generated client; the spans are checked when spansToo (a register loaded). */
async function grpcClientCase(svc: Service, tc: GrpcClientCase, spansToo: boolean): Promise<void> {
  const callee = await scriptedCallee(tc.responses);
  const seen = spans.length;
  try {
    assert.equal(await svc.ask<number>('grpcCall', { address: callee.address }), grpcCode(tc.want.code), 'code');
    assert.deepEqual(callee.attempts, tc.want.requests, 'grpc-previous-rpc-attempts per attempt');
    if (!spansToo) return;
    const port = callee.address.split(':')[1];
    const got = await spansWhen(sp => sp.kind === 'client' && portOf(sp) === port, tc.want.spans.length, seen);
    assert.deepEqual(got.map(oursSetOnce), tc.want.spans, "attributes per attempt span (the instrumentation's)");
  } finally {
    callee.server.forceShutdown();
  }
}

/** grpc.json's server cases as app.js serves them: a scripted callee per call, and the hints edges of those with a mode. */
async function grpcServerCases(): Promise<{
  cases: unknown[];
  edges: Record<string, string>[];
  callees: Awaited<ReturnType<typeof scriptedCallee>>[][];
}> {
  const out = {
    cases: [] as unknown[],
    edges: [] as Record<string, string>[],
    callees: [] as Awaited<ReturnType<typeof scriptedCallee>>[][],
  };
  for (const tc of grpcVectors.server.cases as GrpcServerCase[]) {
    const cs = [];
    for (const c of tc.calls ?? []) {
      const callee = await scriptedCallee(c.responses);
      cs.push(callee);
      if (c.mode)
        out.edges.push({
          operation: 'test.Svc/Call',
          peer_service: callee.address,
          peer_operation: 'test.Svc/Call',
          mode: c.mode,
        });
    }
    out.callees.push(cs);
    out.cases.push({ code: grpcCode(tc.code), set_claim: tc.set_claim, calls: cs.map(c => c.address) });
  }
  return out;
}

/** Case i of the gRPC server at address: its code and trailers. */
function grpcCase(
  address: string,
  i: number
): Promise<{ code: number; claim: string | null; pushback: string | null }> {
  const c = new Client(address, grpc.credentials.createInsecure());
  const first = (md: grpc.Metadata, k: string): string | null => (md.get(k).length ? String(md.get(k)[0]) : null);
  return new Promise(resolve => {
    const call = (c as unknown as { Call: (...a: unknown[]) => grpc.ClientUnaryCall }).Call(
      Buffer.from(String(i)),
      () => undefined
    );
    call.on('status', (s: grpc.StatusObject) => {
      c.close();
      resolve({
        code: s.code,
        claim: first(s.metadata, 'error-claim'),
        pushback: first(s.metadata, 'grpc-retry-pushback-ms'),
      });
    });
  });
}

type GrpcCases = Awaited<ReturnType<typeof grpcServerCases>>;

/** Serves grpc.json's server cases sc from svc and checks each (its spans too, when spansToo). */
async function grpcServerVectors(
  t: { test: (name: string, fn: () => Promise<void>) => Promise<unknown> },
  svc: Service,
  sc: GrpcCases,
  spansToo: boolean,
  skip: (tc: GrpcServerCase) => boolean = () => false
): Promise<void> {
  const address = await svc.ask<string>('grpcServe', { cases: sc.cases });
  for (const [i, tc] of (grpcVectors.server.cases as GrpcServerCase[]).entries()) {
    if (skip(tc)) continue;
    await t.test(`server: ${tc.name}`, async () => {
      const seen = spans.length;
      const got = await grpcCase(address, i);
      assert.deepEqual(
        got,
        { code: grpcCode(tc.code), claim: tc.want.claim, pushback: tc.want.pushback },
        'code and trailers'
      );
      if (!spansToo) return;
      const isServer = (s: Span): boolean => s.kind === 'server' && s.attrs['rpc.system'] === 'grpc';
      const [ss, ...more] = await spansWhen(isServer, 1, seen);
      assert.equal(more.length, 0, 'one SERVER span');
      assert.deepEqual(oursSetOnce(ss), tc.want.span, 'SERVER span attributes');
      for (const callee of sc.callees[i]) {
        const port = callee.address.split(':')[1];
        const cs = await spansWhen(s => s.kind === 'client' && portOf(s) === port, callee.attempts.length, seen);
        assert.deepEqual(
          cs.map(s => [s.traceId, oursSetOnce(s)['error_ownership.retry.attempt']]),
          callee.attempts.map((_, n) => [ss.traceId, n]),
          "one CLIENT span per attempt (the instrumentation's), in the request trace"
        );
      }
    });
  }
}

function closeGrpc(sc: GrpcCases): void {
  for (const cs of sc.callees) for (const c of cs) c.server.forceShutdown();
}

for (const [order, launch] of orders) {
  if (launch === esm) continue; // grpc-js under --import: not covered (README)
  test(`grpc.json through @grpc/grpc-js, ${order}`, async t => {
    assert.ok(grpcVectors.client.cases.length > 0 && grpcVectors.server.cases.length > 0);
    const services = new Map<string, Service>();
    const sc = await grpcServerCases();
    try {
      for (const tc of grpcVectors.client.cases as GrpcClientCase[]) {
        const env = envOf(tc);
        const key = JSON.stringify(env);
        let svc = services.get(key);
        if (!svc) services.set(key, (svc = new Service(launch, env)));
        const s = svc;
        await t.test(`client: ${tc.name}`, () => grpcClientCase(s, tc, true));
      }
      hintsDoc = { version: 1, service: SERVICE, edges: sc.edges };
      const svc = new Service(launch, { [ENV_HINTS_ENDPOINT]: hintsURL });
      services.set('hints', svc);
      await svc.ask('ping');
      await firstPoll;
      // The first poll of this service: its hints hold these callees' edges.
      await new Promise(r => setTimeout(r, 300));
      await grpcServerVectors(t, svc, sc, true);
    } finally {
      for (const s of services.values()) await s.stop();
      closeGrpc(sc);
    }
  });
}

// ---- what http.request cannot retry unseen ----

test('http.request: a body still being written when the answer comes is sent once', async () => {
  let attempts = 0;
  // Answers at the request's headers, before its body.
  const early = http.createServer((req, res) => {
    attempts++;
    req.resume();
    res.writeHead(503, { 'Error-Claim': 'claimed' });
    res.end('early');
  });
  const url = await listen(early);
  const seen = spans.length;
  const svc = new Service(requiring(OTEL, HOOKS), {});
  try {
    const status = await svc.ask<number>('call', { via: 'streaming', url: url + '/thing', method: 'PUT', headers: {} });
    assert.equal(status, 503);
    assert.equal(attempts, 1, 'not retried');
    const port = new URL(url).port;
    const [cs] = await spansWhen(s => s.kind === 'client' && portOf(s) === port, 1, seen);
    assert.deepEqual(oursSetOnce(cs), {
      'error_ownership.retry.attempt': 0,
      'error_ownership.claim.received': 'claimed',
      'error_ownership.retry.decision': 'no_policy',
    });
  } finally {
    await svc.stop();
    early.close();
  }
});

// ---- without the OpenTelemetry register: claims and retries, no spans ----

test('the hooks alone, without the OpenTelemetry register', async t => {
  const svc = new Service(requiring(HOOKS), {});
  try {
    for (const via of ['fetch', 'request'] as const)
      for (const tc of client.cases.filter((c: object) => Object.keys(envOf(c)).length === 0))
        await t.test(`client.json via ${via}: ${tc.name}`, () => clientCase(svc, via, tc, false));
    const sc = await ServerCases.make(() => '', 'fetch');
    try {
      const base = await svc.ask<string>('serve', { kind: 'express', cases: sc.cases });
      for (const [i, tc] of server.cases.entries()) {
        // No hints here: a fail-open edge is unknown, so those cases are left to the runs above.
        if ((tc.calls ?? []).some((c: { mode?: string }) => c.mode === 'fail_open')) continue;
        await t.test(`server.json: ${tc.name}`, async () => {
          assert.deepEqual(await getCase(base, i), { status: tc.status, claim: tc.want.header });
        });
      }
    } finally {
      await sc.close();
    }
    for (const tc of (grpcVectors.client.cases as GrpcClientCase[]).filter(c => Object.keys(envOf(c)).length === 0))
      await t.test(`grpc.json client: ${tc.name}`, () => grpcClientCase(svc, tc, false));
    const gc = await grpcServerCases();
    try {
      const failOpen = (tc: GrpcServerCase): boolean =>
        ((tc.calls ?? []) as { mode?: string }[]).some(c => c.mode === 'fail_open');
      await grpcServerVectors(t, svc, gc, false, failOpen);
    } finally {
      closeGrpc(gc);
    }
    assert.equal(svc.stderr.includes('Error'), false, svc.stderr);
  } finally {
    await svc.stop();
  }
});

// ---- switched off like an instrumentation ----

/** An attribute of ours (conformance/README.md): what a span of a service with the hooks off never carries. */
function isOurs(k: string): boolean {
  return k.startsWith('error_ownership.') || k === 'http.request.resend_count';
}

const offSwitches: [string, Record<string, string>][] = [
  ['OTEL_NODE_DISABLED_INSTRUMENTATIONS=errorownership', { OTEL_NODE_DISABLED_INSTRUMENTATIONS: 'errorownership' }],
  [
    'OTEL_NODE_ENABLED_INSTRUMENTATIONS without errorownership',
    { OTEL_NODE_ENABLED_INSTRUMENTATIONS: 'http,express,undici,grpc' },
  ],
];

for (const [name, off] of offSwitches) {
  for (const [order, launch] of orders) {
    if (launch === esm) continue; // the switch is read by the preload, however the register is loaded
    test(`switched off by ${name}, ${order}`, async () => {
      let polls = 0;
      const hints = http.createServer((_req, res) => {
        polls++;
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ version: 1, service: SERVICE, edges: [] }));
      });
      const hintsAt = await listen(hints);
      // Callees whose claimed faults the hooks would retry, up to ERROROWNERSHIP_MAX_ATTEMPTS.
      const callee = await new ScriptedCallee([{ status: 503, claim: 'claimed' }]).listen();
      const grpcCallee = await scriptedCallee([{ code: 'UNAVAILABLE', claim: 'claimed' }]);
      const seen = spans.length;
      const svc = new Service(launch, { ...off, [ENV_HINTS_ENDPOINT]: hintsAt, [ENV_MAX_ATTEMPTS]: '3' });
      try {
        for (const via of ['fetch', 'request'] as const) {
          const had = callee.attempts.length;
          const status = await svc.ask<number>('call', { via, url: callee.url + '/thing', method: 'GET', headers: {} });
          assert.equal(status, 503, via);
          assert.equal(callee.attempts.length - had, 1, `${via}: one attempt`);
        }
        assert.equal(await svc.ask<number>('grpcCall', { address: grpcCallee.address }), grpcCode('UNAVAILABLE'));
        assert.equal(grpcCallee.attempts.length, 1, 'gRPC: one attempt');

        // Faults the hooks would claim: own, and after a dependency's claimed failure.
        const cases = [
          { status: 503, calls: [] },
          { status: 502, calls: [{ url: callee.url + '/dep', method: 'GET', via: 'fetch' }] },
        ];
        const base = await svc.ask<string>('serve', { kind: 'express', cases });
        for (const [i, c] of cases.entries())
          assert.deepEqual(await getCase(base, i), { status: c.status, claim: null }, `case ${i}: no Error-Claim`);
        assert.equal(callee.attempts.length, 3, "the served request's call: one attempt");
        const address = await svc.ask<string>('grpcServe', {
          cases: [
            { code: grpcCode('UNAVAILABLE'), calls: [] },
            { code: grpcCode('INTERNAL'), calls: [grpcCallee.address] },
          ],
        });
        for (const [i, c] of ['UNAVAILABLE', 'INTERNAL'].entries())
          assert.deepEqual(
            await grpcCase(address, i),
            { code: grpcCode(c), claim: null, pushback: null },
            `gRPC case ${i}: no error-claim`
          );
        assert.equal(grpcCallee.attempts.length, 2, "the served call's call: one attempt");

        // The instrumentations still trace: their spans came, none with an attribute of ours.
        const port = new URL(base).port;
        const calleePort = new URL(callee.url).port;
        const grpcPort = grpcCallee.address.split(':')[1];
        const want: [string, (s: Span) => boolean, number][] = [
          ['express SERVER spans', s => s.kind === 'server' && portOf(s) === port, 2],
          ['CLIENT spans to the HTTP callee', s => s.kind === 'client' && portOf(s) === calleePort, 3],
          ['gRPC SERVER spans', s => s.kind === 'server' && s.attrs['rpc.system'] === 'grpc', 2],
          ['gRPC CLIENT spans to the callee', s => s.kind === 'client' && portOf(s) === grpcPort, 2],
        ];
        for (const [what, pred, n] of want) assert.equal((await spansWhen(pred, n, seen)).length, n, what);
        const tagged = spans
          .slice(seen)
          .filter(s => Object.keys(s.attrs).some(isOurs))
          .map(s => Object.keys(s.attrs).filter(isOurs));
        assert.deepEqual(tagged, [], 'spans with attributes of ours');
        assert.equal(polls, 0, 'hint polls');
      } finally {
        await svc.stop();
        await callee.close();
        grpcCallee.server.forceShutdown();
        hints.close();
      }
    });
  }
}

// ---- overhead against the register alone ----

/** The p-quantile of xs, interpolated between the nearest ranks. */
function quantile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const i = (s.length - 1) * p;
  const lo = Math.floor(i);
  return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (i - lo);
}

test('overhead: the register with the hooks against the register alone', async () => {
  const dep = http.createServer((_req, res) => res.end('ok'));
  const depURL = await listen(dep);
  const env = { OTEL_TRACES_EXPORTER: 'none' };
  const bare = new Service(requiring(OTEL), env);
  const hooked = new Service(requiring(OTEL, HOOKS), env);
  try {
    const cases = [{ status: 200, calls: [{ url: depURL + '/ok', method: 'GET' }] }];
    const urls = [
      (await bare.ask<string>('serve', { kind: 'express', cases })) + '/case/0',
      (await hooked.ask<string>('serve', { kind: 'express', cases })) + '/case/0',
    ];
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = (u: string): Promise<void> =>
      new Promise((resolve, reject) => {
        http
          .get(u, { agent }, res => {
            res.resume();
            res.on('end', resolve);
          })
          .on('error', reject);
      });
    // Short rounds in ABBA order, both services warm and alive throughout, so
    // that each round's ratio sees the same machine load on both sides; the
    // median of the rounds' ratios, with its interquartile range, is the figure.
    const N = 150;
    const rounds = 16;
    const spent = [0, 0];
    const ratios: number[] = [];
    for (const u of urls) for (let i = 0; i < 200; i++) await get(u); // warm-up
    for (let r = 0; r < rounds; r++) {
      const round = [0, 0];
      for (const k of r % 2 === 0 ? [0, 1, 1, 0] : [1, 0, 0, 1]) {
        const t0 = process.hrtime.bigint();
        for (let i = 0; i < N / 2; i++) await get(urls[k]);
        round[k] += Number(process.hrtime.bigint() - t0) / 1e3;
      }
      spent[0] += round[0];
      spent[1] += round[1];
      ratios.push(round[1] / round[0]);
    }
    agent.destroy();
    const per = spent.map(s => s / (N * rounds));
    const [q1, median, q3] = [0.25, 0.5, 0.75].map(p => quantile(ratios, p));
    console.log(
      `overhead (express, one fetch to a dependency per request, sequential, ${rounds} ABBA rounds of ${N} requests each): ` +
        `register alone ${per[0].toFixed(1)} µs/request, register + hooks ${per[1].toFixed(1)} µs/request, ` +
        `ratio median ${median.toFixed(3)} (IQR ${q1.toFixed(3)}–${q3.toFixed(3)})`
    );
    for (const f of [...per, q1, median, q3]) assert.ok(Number.isFinite(f) && f > 0);
  } finally {
    await bare.stop();
    await hooked.stop();
    dep.close();
  }
});
