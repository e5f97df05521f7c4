// SPDX-License-Identifier: Apache-2.0

import type { IncomingMessage, ServerResponse } from 'node:http';
import { HintSource } from '../claim';
import { Ledger, runWithLedger } from '../ledger';
import { attachServerHooks } from '../http/server';

const WRAPPED = Symbol.for('errorownership.zerocode.server');

type Listener = (this: unknown, req: IncomingMessage, res: ServerResponse) => unknown;

/*
 * Every request listener an http(s).Server gets is wrapped as it is added,
 * so that it runs inside whatever the instrumentation's emit patch set up
 * (the SERVER span, its RPC metadata), whichever of the two preloads patched
 * first; wrapping emit instead would put the hooks outside that context when
 * they patch last. A response meets the hooks once, however many listeners
 * it passes through.
 */
export function wrapServer(proto: object, hints: HintSource): void {
  const p = proto as Record<string | symbol, unknown>;
  if (p[WRAPPED]) return;
  const ledgers = new WeakMap<ServerResponse, Ledger>();
  const hook = (fn: Listener): Listener => {
    const w = function (this: unknown, req: IncomingMessage, res: ServerResponse): unknown {
      let ledger = ledgers.get(res);
      if (!ledger) {
        ledger = attachServerHooks(req, res, { hints });
        ledgers.set(res, ledger);
      }
      return runWithLedger(ledger, () => fn.call(this, req, res));
    };
    // EventEmitter's removeListener and listeners() look through .listener, as for once().
    (w as unknown as { listener: Listener }).listener = fn;
    return w;
  };
  for (const name of ['on', 'addListener', 'prependListener']) {
    const add = p[name];
    if (typeof add !== 'function') continue;
    p[name] = function (this: unknown, event: string | symbol, fn: unknown): unknown {
      if (event === 'request' && typeof fn === 'function') fn = hook(fn as Listener);
      return (add as (e: string | symbol, f: unknown) => unknown).call(this, event, fn);
    };
  }
  p[WRAPPED] = true;
}
