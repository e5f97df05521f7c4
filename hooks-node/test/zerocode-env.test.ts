// SPDX-License-Identifier: Apache-2.0

import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { EnvConfig, EnvHints, readEnv, switchedOff } from '../src/zerocode/env';
import {
  ENV_HINTS_ENDPOINT,
  ENV_MAX_ATTEMPTS,
  ENV_MIN_RETRIES_PER_SECOND,
  ENV_RETRY_RATIO,
  ENV_SERVICE_NAME,
} from '../src/vocabulary';

const cases: { name: string; env: Record<string, string>; want: EnvConfig; warns: string[] }[] = [
  { name: 'nothing set: the defaults', env: {}, want: { maxAttempts: 3, service: undefined }, warns: [] },
  {
    name: 'every variable valid',
    env: {
      [ENV_HINTS_ENDPOINT]: 'http://collector:4320',
      [ENV_SERVICE_NAME]: 'checkout',
      [ENV_RETRY_RATIO]: '0.2',
      [ENV_MIN_RETRIES_PER_SECOND]: '5',
      [ENV_MAX_ATTEMPTS]: '1',
    },
    want: {
      hintsEndpoint: 'http://collector:4320',
      service: 'checkout',
      ratio: 0.2,
      minRetriesPerSecond: 5,
      maxAttempts: 1,
    },
    warns: [],
  },
  {
    name: 'an endpoint without a service name: no hints, a warning',
    env: { [ENV_HINTS_ENDPOINT]: 'http://collector:4320' },
    want: { maxAttempts: 3, service: undefined },
    warns: [ENV_SERVICE_NAME],
  },
  {
    name: 'an endpoint that is no URL',
    env: { [ENV_HINTS_ENDPOINT]: 'collector:4320:x', [ENV_SERVICE_NAME]: 's' },
    want: { maxAttempts: 3, service: 's' },
    warns: [ENV_HINTS_ENDPOINT],
  },
  {
    name: 'out of range and garbage: the defaults, one warning each',
    env: { [ENV_RETRY_RATIO]: '1.5', [ENV_MIN_RETRIES_PER_SECOND]: 'ten', [ENV_MAX_ATTEMPTS]: '2.5' },
    want: { maxAttempts: 3, service: undefined },
    warns: [ENV_RETRY_RATIO, ENV_MIN_RETRIES_PER_SECOND, ENV_MAX_ATTEMPTS],
  },
  {
    name: 'zero attempts and a negative floor',
    env: { [ENV_MAX_ATTEMPTS]: '0', [ENV_MIN_RETRIES_PER_SECOND]: '-1' },
    want: { maxAttempts: 3, service: undefined },
    warns: [ENV_MIN_RETRIES_PER_SECOND, ENV_MAX_ATTEMPTS],
  },
];

test('readEnv', async t => {
  for (const tc of cases) {
    await t.test(tc.name, () => {
      const warns: string[] = [];
      const got = readEnv(tc.env, m => warns.push(m));
      assert.deepEqual(
        Object.fromEntries(Object.entries(got).filter(([, v]) => v !== undefined)),
        Object.fromEntries(Object.entries(tc.want).filter(([, v]) => v !== undefined))
      );
      assert.equal(warns.length, tc.warns.length, warns.join('\n'));
      for (const [i, name] of tc.warns.entries()) assert.ok(warns[i].includes(name), warns[i]);
    });
  }
});

test('EnvHints: the environment wins where set, the hints elsewhere', () => {
  const inner = { mode: () => 'fail_open' as const, budgetLimits: () => ({ ratio: 0.3, min_retries_per_second: 7 }) };
  assert.deepEqual(new EnvHints(inner, 0, undefined).budgetLimits(), { ratio: 0, min_retries_per_second: 7 });
  assert.deepEqual(new EnvHints(undefined, undefined, 1).budgetLimits(), { ratio: 0.1, min_retries_per_second: 1 });
  assert.equal(new EnvHints(inner, undefined, undefined).mode('GET /', 'p', ''), 'fail_open');
  assert.equal(new EnvHints(undefined, undefined, undefined).mode('GET /', 'p', ''), 'unknown');
});

test('switchedOff', async t => {
  for (const [name, env, want] of [
    ['nothing set', {}, false],
    ['disabled among others', { OTEL_NODE_DISABLED_INSTRUMENTATIONS: 'fs, errorownership' }, true],
    ['disabled: others only', { OTEL_NODE_DISABLED_INSTRUMENTATIONS: 'fs' }, false],
    ['enabled without it', { OTEL_NODE_ENABLED_INSTRUMENTATIONS: 'http,express' }, true],
    ['enabled with it', { OTEL_NODE_ENABLED_INSTRUMENTATIONS: 'http,errorownership' }, false],
  ] as const) {
    await t.test(name, () => assert.equal(switchedOff(env), want));
  }
});
