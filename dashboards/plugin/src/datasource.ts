// SPDX-License-Identifier: Apache-2.0

import { CoreApp, DataSourceInstanceSettings, ScopedVars } from '@grafana/data';
import { DataSourceWithBackend, getTemplateSrv } from '@grafana/runtime';

import { DEFAULT_QUERY, StoreOptions, StoreQuery } from './types';

export class DataSource extends DataSourceWithBackend<StoreQuery, StoreOptions> {
  constructor(instanceSettings: DataSourceInstanceSettings<StoreOptions>) {
    super(instanceSettings);
  }

  getDefaultQuery(_: CoreApp): Partial<StoreQuery> {
    return DEFAULT_QUERY;
  }

  // The service may be a dashboard variable ($service); the backend takes
  // it as a query parameter, never as SQL.
  applyTemplateVariables(query: StoreQuery, scopedVars: ScopedVars): StoreQuery {
    return {
      ...query,
      service: getTemplateSrv().replace(query.service ?? '', scopedVars),
    };
  }

  // Hints are a service's: without one the query would only fail.
  filterQuery(query: StoreQuery): boolean {
    return !query.hide && (query.queryType !== 'hints' || !!query.service);
  }

  /** The services seen in the last day, for the query editor. */
  async services(): Promise<string[]> {
    return this.getResource<string[]>('services');
  }
}
