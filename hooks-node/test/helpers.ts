// SPDX-License-Identifier: Apache-2.0

import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import { HintSource, Mode, defaultRetryBudget } from '../src';

/**
 * The fetch the hooked clients wrap: the global one, or, when the version run
 * sets EO_TEST_FETCH=undici (scripts/test-versions.ts), the fetch of the undici
 * package this run resolves, so each undici the package declares is exercised.
 */
export const testFetch: typeof fetch | undefined =
  // A conditional load: which undici, if any, is the run's choice.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  process.env.EO_TEST_FETCH === 'undici' ? (require('undici') as { fetch: typeof fetch }).fetch : undefined;

export interface Scripted {
  status: number;
  claim?: string;
}

/** A callee on 127.0.0.1 answering each request with the next scripted response (the last one repeats). */
export class ScriptedCallee {
  readonly attempts: (string | null)[] = [];
  readonly bodies: string[] = [];
  url = '';
  readonly srv: http.Server;
  constructor(private readonly responses: Scripted[]) {
    this.srv = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', c => chunks.push(c));
      req.on('end', () => {
        const i = this.attempts.length;
        this.attempts.push((req.headers['retry-attempt'] as string | undefined) ?? null);
        this.bodies.push(Buffer.concat(chunks).toString());
        const r = this.responses[Math.min(i, this.responses.length - 1)];
        const h: Record<string, string> = { 'Content-Type': 'text/plain' };
        if (r.claim !== undefined) h['Error-Claim'] = r.claim;
        res.writeHead(r.status, h);
        res.end(r.status === 204 ? undefined : 'answer');
      });
    });
  }
  async listen(): Promise<this> {
    await new Promise<void>(r => this.srv.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.srv.address() as AddressInfo).port}`;
    return this;
  }
  get address(): string {
    return new URL(this.url).host;
  }
  close(): Promise<void> {
    this.srv.closeAllConnections();
    return new Promise(r => this.srv.close(() => r()));
  }
}

export async function listen(srv: http.Server): Promise<string> {
  await new Promise<void>(r => srv.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
}

export function close(srv: http.Server): Promise<void> {
  srv.closeAllConnections();
  return new Promise(r => srv.close(() => r()));
}

/** Edge modes by callee address, as the hints would give them. */
export class StaticHints implements HintSource {
  constructor(readonly modes: Map<string, Mode>) {}
  mode(_op: string, peer: string): Mode {
    return this.modes.get(peer) ?? 'unknown';
  }
  budgetLimits() {
    return defaultRetryBudget();
  }
}
