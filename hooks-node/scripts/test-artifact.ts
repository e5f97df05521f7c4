// SPDX-License-Identifier: Apache-2.0

// `npm run test:artifact`: what a user installs, tried as a user would. npm
// pack makes the tarball (its prepack compiles src), a fresh project in the
// system's temp directory, outside this checkout, installs it with the peers
// a service brings, and scripts/artifact/consumer.js runs requests through
// the installed hooks. Set EO_KEEP_ARTIFACT_DIR=1 to keep the project.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { installProject, npm, root, run } from './project';

interface PackResult {
  filename: string;
  files: { path: string }[];
}

// What the tarball holds, before anything is written: the compiled code with
// its declarations, the licence and the README, and nothing else (no tests,
// no bench, no TypeScript sources, no other build output).
const [dry] = JSON.parse(run(npm, ['pack', '--dry-run', '--json'], root)) as PackResult[];
assert.ok(dry, 'npm pack --dry-run --json printed no package');
const files = dry.files.map(f => f.path).sort();
const required = [
  'LICENSE',
  'README.md',
  'package.json',
  'build/src/index.js',
  'build/src/index.d.ts',
  'build/src/grpc.js',
  'build/src/grpc.d.ts',
  'build/src/http/fetch.js',
  'build/src/http/fetch.d.ts',
  'build/src/register.js',
];
for (const f of required) assert.ok(files.includes(f), `the tarball lacks ${f}: ${files.join(' ')}`);
const allowed = /^(LICENSE|README\.md|package\.json|build\/src\/.+\.(js|d\.ts|js\.map))$/;
const stray = files.filter(f => !allowed.test(f) || /(^|\/)(test|bench|scripts|oldest)\//.test(f));
assert.deepEqual(stray, [], 'files the tarball must not hold');
assert.equal(
  fs.readFileSync(path.join(root, 'LICENSE'), 'utf8'),
  fs.readFileSync(path.join(root, '..', 'LICENSE'), 'utf8'),
  "hooks-node/LICENSE differs from the repository's LICENSE"
);
console.log(
  `artifact: npm pack --dry-run: ${files.length} files, ${files.filter(f => f.endsWith('.js')).length} .js, ${files.filter(f => f.endsWith('.d.ts')).length} .d.ts, LICENSE, README.md`
);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'errorownership-hooks-artifact-'));
try {
  assert.ok(path.relative(path.resolve(root, '..'), dir).startsWith('..'), `${dir} is inside the checkout`);
  // The dry run's prepack has just compiled: the tarball is packed from that.
  const [packed] = JSON.parse(
    run(npm, ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], root)
  ) as PackResult[];
  assert.ok(packed);
  assert.deepEqual(packed.files.map(f => f.path).sort(), files, 'the tarball differs from the dry run');
  const tarball = path.join(dir, packed.filename);
  console.log(`artifact: ${tarball}`);

  const project = installProject(dir, 'artifact-consumer', [tarball, 'express', '@opentelemetry/api'], 'artifact', [
    'consumer.js',
  ]);
  process.stdout.write(run(process.execPath, ['consumer.js'], project));
  // The README promises ESM services can import the CommonJS build by name.
  const esm =
    "import { createFetch, expressMiddleware } from '@errorownership/hooks'; import { grpcServerInterceptor } from '@errorownership/hooks/grpc'; if (typeof createFetch !== 'function' || typeof expressMiddleware !== 'function' || typeof grpcServerInterceptor !== 'function') process.exit(1); console.log('consumer: ESM named imports resolve');";
  process.stdout.write(run(process.execPath, ['--input-type=module', '-e', esm], project));
  console.log('artifact: pass');
} finally {
  if (process.env.EO_KEEP_ARTIFACT_DIR) console.log(`artifact: kept ${dir}`);
  else fs.rmSync(dir, { recursive: true, force: true });
}
