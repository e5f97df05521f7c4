// SPDX-License-Identifier: Apache-2.0

import { DataSourcePlugin } from '@grafana/data';

import { ConfigEditor } from './components/ConfigEditor';
import { QueryEditor } from './components/QueryEditor';
import { DataSource } from './datasource';
import { StoreOptions, StoreQuery } from './types';

export const plugin = new DataSourcePlugin<DataSource, StoreQuery, StoreOptions>(DataSource)
  .setConfigEditor(ConfigEditor)
  .setQueryEditor(QueryEditor);
