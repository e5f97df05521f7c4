// SPDX-License-Identifier: Apache-2.0

// Which versions of the peer packages this run really loads, checked against
// what scripts/test-versions.ts meant it to load: without this check a run
// that silently fell back to the default node_modules would pass as the run
// of the oldest versions.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The version of the package that `name` resolves to from dir, read off its package.json. */
function resolvedVersion(name: string, dir: string): string {
  let d = path.dirname(require.resolve(name, { paths: [dir] }));
  for (;;) {
    const f = path.join(d, 'package.json');
    if (fs.existsSync(f)) {
      const p = JSON.parse(fs.readFileSync(f, 'utf8')) as { name?: string; version: string };
      if (p.name === name) return p.version;
    }
    const up = path.dirname(d);
    if (up === d) throw new Error(`no package.json of ${name} above ${dir}`);
    d = up;
  }
}

interface Expectation {
  name: string;
  /** Whose resolution: the tests' (standing for the service's own code) or the hooks' (build/src). */
  from: 'test' | 'hooks';
  version: string;
}

const raw = process.env.EO_TEST_EXPECT;

test(
  'the run loads the versions it is meant to test',
  { skip: raw ? false : 'EO_TEST_EXPECT unset: run through npm test' },
  async t => {
    const want = JSON.parse(raw!) as Expectation[];
    assert.ok(want.length > 0);
    const dirs = { test: __dirname, hooks: path.join(__dirname, '..', 'src') };
    for (const e of want) {
      await t.test(`${e.name} from ${e.from}`, () => {
        assert.equal(resolvedVersion(e.name, dirs[e.from]), e.version);
      });
    }
  }
);
