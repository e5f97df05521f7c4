// SPDX-License-Identifier: Apache-2.0

import { RetrySettings } from '../retrying';

/** Options of the HTTP client hooks (fetch and http.request). */
export interface HttpClientOptions extends RetrySettings {
  /**
   * Which requests may be retried at all (default idempotent: GET HEAD
   * OPTIONS TRACE PUT DELETE, or an Idempotency-Key / X-Idempotency-Key
   * header). A request it rejects fails with decision no_policy. A body that
   * cannot be sent again is never retried.
   */
  retryPolicy?: (method: string, headers: Headers) => boolean;
  /** Which statuses are server faults (default 500 and above). */
  fault?: (status: number) => boolean;
  /** How to name the callee (default peerAddress: host[:port], the port omitted when the scheme's default). */
  peerService?: (url: URL) => string;
  /** How to name the callee's operation for hint lookups (default "METHOD /path"); only called for failed calls. */
  peerOperation?: (method: string, url: URL) => string;
}

const IDEMPOTENT = new Set(['', 'GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/** Whether a request may be retried by default: an idempotent method, or an idempotency key. */
export function idempotent(method: string, headers: Headers): boolean {
  return IDEMPOTENT.has(method.toUpperCase()) || headers.has('idempotency-key') || headers.has('x-idempotency-key');
}

/** 500 and above; 4xx are the caller's fault. */
export function serverFault(status: number): boolean {
  return status >= 500;
}

/**
 * Names the callee as the OpenTelemetry HTTP client instrumentation records
 * it (server.address[:server.port]): the URL's host, with the port when it
 * is not the scheme's default ("10.0.0.7:8080", "catalog.shop.svc",
 * "[::1]:9200").
 */
export function peerAddress(url: URL): string {
  const host = url.hostname;
  if (url.port === '') return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return `${host}:${url.port}`;
}

/** "METHOD /path", which the hints match to the callee's route. */
export function operationOf(method: string, url: URL): string {
  return `${method} ${url.pathname}`;
}
