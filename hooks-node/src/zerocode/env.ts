// SPDX-License-Identifier: Apache-2.0

import { HintSource } from '../claim';
import { Mode, RetryBudgetLimits, defaultRetryBudget } from '../ownership';
import { DEFAULT_MAX_ATTEMPTS } from '../retrying';
import {
  ENV_HINTS_ENDPOINT,
  ENV_MAX_ATTEMPTS,
  ENV_MIN_RETRIES_PER_SECOND,
  ENV_RETRY_RATIO,
  ENV_SERVICE_NAME,
  MAX_MIN_RETRIES_PER_SECOND,
} from '../vocabulary';

/** The most attempts the environment may ask for: more would only multiply an outage's load. */
export const MAX_ENV_ATTEMPTS = 10;

/** What the zero-code hooks read from the environment. */
export interface EnvConfig {
  hintsEndpoint?: string;
  service?: string;
  ratio?: number;
  minRetriesPerSecond?: number;
  maxAttempts: number;
}

/** Reports a bad value; the preload passes process.emitWarning, tests a collector. */
export type Warn = (message: string) => void;

function text(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name]?.trim();
  return v === undefined || v === '' ? undefined : v;
}

function number(
  env: NodeJS.ProcessEnv,
  name: string,
  ok: (n: number) => boolean,
  want: string,
  fallback: string,
  warn: Warn
): number | undefined {
  const v = text(env, name);
  if (v === undefined) return undefined;
  const n = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(v) ? Number(v) : NaN;
  if (ok(n)) return n;
  warn(
    `errorownership: ${name}=${JSON.stringify(v)} is not ${want}; set it to ${want} or unset it. Using ${fallback}.`
  );
  return undefined;
}

/**
 * Reads the zero-code configuration (conformance/vocabulary.yaml, group
 * environment). A bad value is reported through warn, naming the variable
 * and the fix, and its default is used: a typo must never stop a service.
 */
export function readEnv(env: NodeJS.ProcessEnv, warn: Warn): EnvConfig {
  const cfg: EnvConfig = { maxAttempts: DEFAULT_MAX_ATTEMPTS };
  const endpoint = text(env, ENV_HINTS_ENDPOINT);
  const service = text(env, ENV_SERVICE_NAME);
  cfg.service = service;
  if (endpoint !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(endpoint);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      warn(
        `errorownership: ${ENV_HINTS_ENDPOINT}=${JSON.stringify(endpoint)} is not an http(s) URL; set it to the hints extension's base URL, such as http://otel-collector:4320. Running without hints.`
      );
    } else if (service === undefined) {
      warn(
        `errorownership: ${ENV_HINTS_ENDPOINT} is set but ${ENV_SERVICE_NAME} is not; set ${ENV_SERVICE_NAME} to the service's name, whose hints the hooks read. Running without hints.`
      );
    } else {
      cfg.hintsEndpoint = endpoint;
    }
  }
  cfg.ratio = number(
    env,
    ENV_RETRY_RATIO,
    n => n >= 0 && n <= 1,
    'a number from 0 to 1',
    "the hints' ratio (default 0.1)",
    warn
  );
  cfg.minRetriesPerSecond = number(
    env,
    ENV_MIN_RETRIES_PER_SECOND,
    n => n >= 0 && n <= MAX_MIN_RETRIES_PER_SECOND,
    `a number from 0 to ${MAX_MIN_RETRIES_PER_SECOND}`,
    "the hints' floor (default 10)",
    warn
  );
  const attempts = number(
    env,
    ENV_MAX_ATTEMPTS,
    n => Number.isInteger(n) && n >= 1 && n <= MAX_ENV_ATTEMPTS,
    `a whole number from 1 to ${MAX_ENV_ATTEMPTS}`,
    `${DEFAULT_MAX_ATTEMPTS}`,
    warn
  );
  if (attempts !== undefined) cfg.maxAttempts = attempts;
  return cfg;
}

/**
 * The hints (if any) with the environment's budget limits over theirs: a
 * limit the environment sets wins, one it leaves unset comes from the hints
 * (or the default), so the collector can still tune what the operator left
 * open.
 */
export class EnvHints implements HintSource {
  constructor(
    private readonly inner: HintSource | undefined,
    private readonly ratio: number | undefined,
    private readonly floor: number | undefined
  ) {}

  mode(operation: string, peerService: string, peerOperation: string): Mode {
    return this.inner ? this.inner.mode(operation, peerService, peerOperation) : 'unknown';
  }

  budgetLimits(): RetryBudgetLimits {
    const base = this.inner ? this.inner.budgetLimits() : defaultRetryBudget();
    return {
      ratio: this.ratio ?? base.ratio,
      min_retries_per_second: this.floor ?? base.min_retries_per_second,
    };
  }
}

/** The name the OTEL_NODE_*_INSTRUMENTATIONS lists know the hooks by. */
export const INSTRUMENTATION_NAME = 'errorownership';

function listed(v: string | undefined): boolean | undefined {
  if (v === undefined || v.trim() === '') return undefined;
  return v
    .split(',')
    .map(s => s.trim())
    .includes(INSTRUMENTATION_NAME);
}

/** Whether the environment switches the hooks off, as it would an instrumentation. */
export function switchedOff(env: NodeJS.ProcessEnv): boolean {
  if (listed(env.OTEL_NODE_DISABLED_INSTRUMENTATIONS)) return true;
  return listed(env.OTEL_NODE_ENABLED_INSTRUMENTATIONS) === false;
}
