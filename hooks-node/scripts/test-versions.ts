// SPDX-License-Identifier: Apache-2.0

// `npm test`: the compiled tests once per set of peer versions, so that every
// wrapped library runs at the oldest and the newest version package.json
// declares. The newest are the devDependencies themselves; the oldest are
// installed next to them under npm aliases (floor-express, floor-grpc-js, ...).
//
// An alias cannot simply be required in place of the real name: the
// OpenTelemetry instrumentations recognise a module by the directory it was
// loaded from (node_modules/express), so express loaded from
// node_modules/floor-express would run unpatched, and the hooks would never
// meet the express spans a service has. So the oldest run gets a copy of the
// compiled code, build/oldest/{src,test}, and the floor packages are copied
// under their own names where Node's resolution finds them first, as a
// service's own node_modules would hold them: express, @grpc/grpc-js and
// undici beside the tests (the service's code), and @opentelemetry/api beside
// the hooks only (and @opentelemetry/core, which the hooks' hint client uses
// and which must meet that API), since the SDK in node_modules declares a newer API floor
// (the API's global registry lets a 1.3 API use a 1.9 SDK, which is how a
// library that pins an old API meets a service's SDK). build/oldest stays
// inside hooks-node so that the floor packages' dependencies resolve as npm
// installed them for the aliases.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.resolve(__dirname, '..', '..');
const build = path.join(root, 'build');
const modules = path.join(root, 'node_modules');

interface Expectation {
  name: string;
  from: 'test' | 'hooks';
  version: string;
}

interface Run {
  name: string;
  /** The compiled tree this run executes: build, or a copy of it. */
  tree: string;
  /** Test files, relative to the tree's test directory; every one when absent. */
  files?: string[];
  env: Record<string, string>;
  expect: Expectation[];
}

function versionIn(dir: string): string {
  return (JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }).version;
}

/** Package `name` at the version installed under the npm alias `alias`, in the tree's node_modules (from 'test') or its src's (from 'hooks'). */
interface Floor {
  name: string;
  alias: string;
  from: Array<'test' | 'hooks'>;
}

const floors: Floor[] = [
  { name: 'express', alias: 'floor-express', from: ['test'] },
  { name: '@grpc/grpc-js', alias: 'floor-grpc-js', from: ['test', 'hooks'] },
  { name: 'undici', alias: 'floor-undici', from: ['test'] },
  { name: '@opentelemetry/api', alias: 'floor-otel-api', from: ['hooks'] },
  { name: '@opentelemetry/core', alias: 'floor-otel-core', from: ['hooks'] },
];

function oldestTree(): string {
  const tree = path.join(build, 'oldest');
  fs.rmSync(tree, { recursive: true, force: true });
  for (const d of ['src', 'test']) fs.cpSync(path.join(build, d), path.join(tree, d), { recursive: true });
  for (const f of floors) {
    // Only the test side needs the copy outside src: the hooks resolve up
    // through the tree too, so a package both use is copied once, beside both.
    const where = f.from.includes('test') ? tree : path.join(tree, 'src');
    fs.cpSync(path.join(modules, f.alias), path.join(where, 'node_modules', f.name), { recursive: true });
  }
  return tree;
}

function newest(name: string, from: 'test' | 'hooks'): Expectation {
  return { name, from, version: versionIn(path.join(modules, name)) };
}

const runs: Run[] = [
  {
    name: 'newest (the devDependencies), global fetch',
    tree: build,
    env: {},
    expect: [
      newest('express', 'test'),
      newest('@grpc/grpc-js', 'test'),
      newest('@grpc/grpc-js', 'hooks'),
      newest('@opentelemetry/api', 'hooks'),
      newest('@opentelemetry/core', 'hooks'),
    ],
  },
  {
    name: 'newest undici (its fetch wrapped)',
    tree: build,
    files: ['conformance-http.test.js', 'hints-untraced.test.js', 'hostile.test.js', 'versions.test.js'],
    env: { EO_TEST_FETCH: 'undici' },
    expect: [newest('undici', 'test')],
  },
  {
    name: 'oldest',
    tree: path.join(build, 'oldest'),
    env: { EO_TEST_FETCH: 'undici' },
    expect: floors.flatMap(f =>
      f.from.map(from => ({ name: f.name, from, version: versionIn(path.join(modules, f.alias)) }))
    ),
  },
];

oldestTree();
const failed: string[] = [];
for (const r of runs) {
  const versions = r.expect.map(e => `${e.name}@${e.version} (${e.from})`).join(', ');
  console.log(`\n=== ${r.name}: ${versions}`);
  const testDir = path.join(r.tree, 'test');
  const targets = r.files ? r.files.map(f => path.join(testDir, f)) : [testDir];
  const res = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...targets], {
    stdio: 'inherit',
    env: {
      ...process.env,
      // The copied tree sits one level deeper than build/test.
      CONFORMANCE_DIR: process.env.CONFORMANCE_DIR ?? path.resolve(root, '..', 'conformance'),
      EO_TEST_EXPECT: JSON.stringify(r.expect),
      ...r.env,
    },
  });
  if (res.status !== 0) failed.push(r.name);
}
if (failed.length > 0) {
  console.error(`\nfailed: ${failed.join('; ')}`);
  process.exit(1);
}
console.log(`\nall ${runs.length} version runs passed`);
