// SPDX-License-Identifier: Apache-2.0

export * from './ownership';
export { RetryBudget, RetryBudgetOptions, DEFAULT_BUDGET_WINDOW_MS } from './budget';
export { decideClaim, decideRetry, ModeFunc, HintSource, Outcome } from './claim';
export { Ledger, CallId, LEDGER_KEY, ledgerFrom, runWithLedger, setLedger, withLedger } from './ledger';
export {
  Budgets,
  RetrySettings,
  backoffDelay,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_INITIAL_BACKOFF_MS,
  DEFAULT_MAX_BACKOFF_MS,
  MAX_PEERS,
} from './retrying';
export { matchOperation } from './routes';
export { HintClient, HintClientOptions, RefreshResult, startHints, pollAfter } from './hints';
export { HttpClientOptions, idempotent, serverFault, peerAddress, operationOf } from './http/common';
export { createFetch, fetchWithHooks, FetchHooksOptions, HookedFetch, HookedRequestInit } from './http/fetch';
export { createHttpClient, HttpRequestClient, HookedRequestOptions } from './http/request';
export {
  attachServerHooks,
  expressMiddleware,
  wrapRequestListener,
  defaultOperation,
  ServerHooksOptions,
} from './http/server';
export {
  undiciHooks,
  httpHooks,
  undiciRequestHook,
  undiciResponseHook,
  httpRequestHook,
  httpResponseHook,
} from './http/instrumentation';
