// SPDX-License-Identifier: Apache-2.0

import { RetryBudgetLimits, defaultRetryBudget } from './ownership';

/** How long a deposit counts by default (Finagle's TTL): 10 s. */
export const DEFAULT_BUDGET_WINDOW_MS = 10_000;
/** The window is cut into this many slices; counts expire a slice at a time. */
const SLICES = 10;

export interface RetryBudgetOptions {
  /** How long a deposit counts, in ms (default 10 s; under 10 ms raised to 10 ms). */
  windowMs?: number;
  /** The clock, in ms, for deterministic tests (default Date.now). */
  now?: () => number;
}

interface Slot {
  epoch: number;
  count: number;
}

function nonNegative(f: number): number {
  return f > 0 ? f : 0; // also NaN
}

/**
 * A retry budget after Finagle's RetryBudget: each request deposits, each
 * retry withdraws, and a retry is allowed only while, over the last window,
 *
 *     retries ≤ ratio × requests + min_retries_per_second × window
 *
 * still holds with it. The window is cut into ten slices: a count lasts from
 * the moment it is made until its slice is ten slices old (0.9 to 1.0
 * window). A refused withdrawal costs nothing.
 */
export class RetryBudget {
  private ratio = 0;
  private floor = 0;
  private readonly sliceMs: number;
  private readonly windowSeconds: number;
  private readonly start: number;
  private readonly now: () => number;
  private readonly deposits: Slot[] = [];
  private readonly withdrawals: Slot[] = [];

  constructor(limits: RetryBudgetLimits = defaultRetryBudget(), options: RetryBudgetOptions = {}) {
    const window = Math.max(options.windowMs ?? DEFAULT_BUDGET_WINDOW_MS, 10);
    this.sliceMs = window / SLICES;
    this.windowSeconds = (this.sliceMs * SLICES) / 1000;
    this.now = options.now ?? Date.now;
    this.start = this.now();
    for (let i = 0; i < SLICES; i++) {
      this.deposits.push({ epoch: 0, count: 0 });
      this.withdrawals.push({ epoch: 0, count: 0 });
    }
    this.setLimits(limits);
  }

  /** Changes the limits; counts already made stay. Negative or NaN values are taken as 0. */
  setLimits(l: RetryBudgetLimits): void {
    this.ratio = nonNegative(l.ratio);
    this.floor = nonNegative(l.min_retries_per_second);
  }

  /** The current limits. */
  limits(): RetryBudgetLimits {
    return { ratio: this.ratio, min_retries_per_second: this.floor };
  }

  /** How long a deposit counts, in ms. */
  windowMs(): number {
    return this.sliceMs * SLICES;
  }

  /** Records one request (a logical call's first attempt, not a retry). */
  deposit(): void {
    const e = this.epoch();
    bump(this.deposits[e % SLICES], e);
  }

  /** Takes one retry from the budget and reports whether it was allowed. */
  tryWithdraw(): boolean {
    const e = this.epoch();
    const slot = this.withdrawals[e % SLICES];
    bump(slot, e);
    if (this.balance(e) >= 0) return true;
    if (slot.epoch === e && slot.count > 0) slot.count--;
    return false;
  }

  /** How many retries the budget would allow now (negative when overdrawn by a limit change). */
  available(): number {
    return Math.floor(this.balance(this.epoch()));
  }

  private balance(e: number): number {
    let d = 0;
    let w = 0;
    for (let i = 0; i < SLICES; i++) {
      d += count(this.deposits[i], e);
      w += count(this.withdrawals[i], e);
    }
    return this.ratio * d + this.floor * this.windowSeconds - w + 1e-9;
  }

  private epoch(): number {
    const d = this.now() - this.start;
    if (!(d > 0)) return 0;
    return Math.floor(d / this.sliceMs);
  }
}

function count(s: Slot, e: number): number {
  const age = e - s.epoch;
  return age < 0 || age >= SLICES ? 0 : s.count;
}

function bump(s: Slot, e: number): void {
  if (s.epoch !== e) {
    s.epoch = e;
    s.count = 1;
  } else {
    s.count++;
  }
}
