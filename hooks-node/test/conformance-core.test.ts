// SPDX-License-Identifier: Apache-2.0

import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { load } from './vectors';
import { Ledger, RetryBudget, claimOfValues, decideRetry, matchOperation, parseMode, Claim } from '../src';

test('claim.json', async t => {
  const v = load('claim.json');
  assert.ok(v.cases.length > 0);
  for (const tc of v.cases) {
    await t.test(tc.name, () => {
      const l = new Ledger();
      for (const c of tc.calls) {
        const id = l.begin(c.peer_service);
        if (c.in_flight) continue;
        l.end(id, {
          peerService: c.peer_service,
          failed: !!c.failed,
          received: (c.received ?? 'missing') as Claim,
          decision: c.decision ?? '',
          inFlight: !!c.cut_short,
        });
      }
      const modes = (tc.modes ?? {}) as Record<string, string>;
      const got = l.decide(peer => parseMode(modes[peer] ?? 'unknown'), !!tc.timed_out);
      assert.deepEqual(got, { claim: tc.want.claim, reason: tc.want.reason });
    });
  }
});

test('retry.json', async t => {
  const v = load('retry.json');
  assert.ok(v.cases.length > 0);
  for (const tc of v.cases) {
    await t.test(tc.name, () => {
      let budget: RetryBudget | null = null;
      if (tc.budget === 'tokens') {
        budget = new RetryBudget({ ratio: 0, min_retries_per_second: 0.1 }); // one retry in 10 s
        assert.equal(budget.available(), 1);
      } else if (tc.budget === 'empty') {
        budget = new RetryBudget({ ratio: 0, min_retries_per_second: 0 });
      }
      const before = budget?.available();
      const got = decideRetry(tc.received, tc.has_policy, tc.attempts_left, budget);
      assert.equal(got, tc.want);
      if (budget) assert.equal(before! - budget.available() === 1, tc.withdrawn, 'withdrawn');
      else assert.equal(tc.withdrawn, false);
    });
  }
});

test('budget.json', async t => {
  const v = load('budget.json');
  assert.ok(v.cases.length > 0);
  for (const tc of v.cases) {
    await t.test(tc.name, () => {
      let now = 1_800_000_000_000;
      const start = now;
      const b = new RetryBudget(tc.limits, { windowMs: tc.window_ms, now: () => now });
      for (const [i, s] of tc.steps.entries()) {
        now = start + s.at_ms;
        const where = `step ${i} (${s.op} at ${s.at_ms} ms)`;
        switch (s.op) {
          case 'deposit':
            for (let k = 0; k < s.times; k++) b.deposit();
            break;
          case 'withdraw':
            for (let k = 0; k < s.times; k++) assert.equal(b.tryWithdraw(), s.want, `${where}, withdrawal ${k}`);
            break;
          case 'available':
            assert.equal(b.available(), s.want, where);
            break;
          case 'set_limits':
            b.setLimits({ ratio: s.ratio, min_retries_per_second: s.min_retries_per_second });
            break;
          default:
            assert.fail(`unknown op ${s.op}`);
        }
      }
    });
  }
});

test('claim_values.json', async t => {
  const v = load('claim_values.json');
  assert.ok(v.cases.length > 0);
  for (const tc of v.cases) {
    await t.test(tc.name, () => {
      assert.equal(claimOfValues(tc.values), tc.want);
    });
  }
});

test('routes.json', async t => {
  const v = load('routes.json');
  assert.ok(v.cases.length > 0);
  for (const tc of v.cases) {
    await t.test(`${tc.framework}: ${tc.pattern}`, () => {
      for (const op of tc.matches) assert.ok(matchOperation(tc.pattern, op), `${tc.pattern} does not match ${op}`);
      for (const op of tc.misses) assert.ok(!matchOperation(tc.pattern, op), `${tc.pattern} matches ${op}`);
    });
  }
});
