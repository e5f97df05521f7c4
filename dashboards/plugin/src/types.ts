// SPDX-License-Identifier: Apache-2.0

import { DataSourceJsonData } from '@grafana/data';
import { DataQuery } from '@grafana/schema';

/** The query types the backend answers (plugin.Query* in pkg/plugin). */
export type QueryType = 'serviceGraph' | 'edgeModel' | 'hints';

export const QUERY_TYPES: Array<{ value: QueryType; label: string; description: string }> = [
  {
    value: 'serviceGraph',
    label: 'Service graph',
    description: 'Services and calls with error ownership, for the Node Graph panel',
  },
  {
    value: 'edgeModel',
    label: 'Edge model',
    description: "Each edge's mode, confidence and evidence, as the collector judges them now",
  },
  { value: 'hints', label: 'Hints', description: 'The ownership hints a service would get from the collector now' },
];

/** A query: its type and the service it is about (empty: every service). */
export interface StoreQuery extends DataQuery {
  queryType?: QueryType;
  service?: string;
}

export const DEFAULT_QUERY: Partial<StoreQuery> = {
  queryType: 'serviceGraph',
  service: '',
};

/**
 * The data source's settings: the collector configuration's keys they must
 * match (pkg/plugin Settings). Left out, a key takes the collector's default.
 */
export interface StoreOptions extends DataSourceJsonData {
  store?: { dsn?: string };
  edge_model?: {
    half_life?: string;
    min_samples?: number;
    confidence?: number;
    fail_close_threshold?: number;
    fail_open_threshold?: number;
  };
  hints?: {
    ttl?: string;
    retry_budget?: { ratio?: number; min_retries_per_second?: number };
  };
}

/** Settings Grafana keeps encrypted and sends only to the backend. */
export interface StoreSecureJsonData {
  password?: string;
}
