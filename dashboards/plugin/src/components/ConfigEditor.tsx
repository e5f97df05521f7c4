// SPDX-License-Identifier: Apache-2.0

import React, { ChangeEvent } from 'react';
import { DataSourcePluginOptionsEditorProps } from '@grafana/data';
import { FieldSet, InlineField, Input, SecretInput } from '@grafana/ui';

import { StoreOptions, StoreSecureJsonData } from '../types';

interface Props extends DataSourcePluginOptionsEditorProps<StoreOptions, StoreSecureJsonData> {}

const labelWidth = 26;

/**
 * Edits the settings under the collector configuration's keys. The backend
 * validates them: Save & test shows what is wrong and how to fix it.
 */
export function ConfigEditor({ options, onOptionsChange }: Props) {
  const jsonData = options.jsonData;
  const set = (patch: Partial<StoreOptions>) => onOptionsChange({ ...options, jsonData: { ...jsonData, ...patch } });
  const model = jsonData.edge_model ?? {};
  const hints = jsonData.hints ?? {};
  const budget = hints.retry_budget ?? {};
  // An empty field leaves the key out: the collector's default applies.
  const num = (e: ChangeEvent<HTMLInputElement>) => (e.target.value === '' ? undefined : Number(e.target.value));
  const str = (e: ChangeEvent<HTMLInputElement>) => (e.target.value === '' ? undefined : e.target.value);

  return (
    <>
      <FieldSet label="Store">
        <InlineField
          label="store.dsn"
          labelWidth={labelWidth}
          tooltip="The store's PostgreSQL connection string, without the password: postgres://grafana@db:5432/errorownership or host=... dbname=... user=... pairs. A read-only user suffices."
        >
          <Input
            width={60}
            value={jsonData.store?.dsn ?? ''}
            placeholder="postgres://grafana@db.internal:5432/errorownership"
            onChange={(e: ChangeEvent<HTMLInputElement>) => set({ store: { dsn: e.target.value } })}
          />
        </InlineField>
        <InlineField label="Password" labelWidth={labelWidth} tooltip="Kept encrypted by Grafana, sent only to the backend.">
          <SecretInput
            width={60}
            isConfigured={!!options.secureJsonFields?.password}
            value={options.secureJsonData?.password ?? ''}
            onChange={(e: ChangeEvent<HTMLInputElement>) =>
              onOptionsChange({ ...options, secureJsonData: { ...options.secureJsonData, password: e.target.value } })
            }
            onReset={() =>
              onOptionsChange({
                ...options,
                secureJsonFields: { ...options.secureJsonFields, password: false },
                secureJsonData: { ...options.secureJsonData, password: '' },
              })
            }
          />
        </InlineField>
      </FieldSet>
      <FieldSet label="Edge model: the collector's edge_model keys">
        <InlineField label="edge_model.half_life" labelWidth={labelWidth} tooltip="Default 10m; 0 never fades">
          <Input width={20} value={model.half_life ?? ''} placeholder="10m" onChange={(e: ChangeEvent<HTMLInputElement>) => set({ edge_model: { ...model, half_life: str(e) } })} />
        </InlineField>
        <InlineField label="edge_model.min_samples" labelWidth={labelWidth} tooltip="Default 20">
          <Input width={20} type="number" value={model.min_samples ?? ''} placeholder="20" onChange={(e: ChangeEvent<HTMLInputElement>) => set({ edge_model: { ...model, min_samples: num(e) } })} />
        </InlineField>
        <InlineField label="edge_model.confidence" labelWidth={labelWidth} tooltip="Default 0.95">
          <Input width={20} type="number" step="0.01" value={model.confidence ?? ''} placeholder="0.95" onChange={(e: ChangeEvent<HTMLInputElement>) => set({ edge_model: { ...model, confidence: num(e) } })} />
        </InlineField>
        <InlineField label="edge_model.fail_close_threshold" labelWidth={labelWidth} tooltip="Default 0.8">
          <Input width={20} type="number" step="0.05" value={model.fail_close_threshold ?? ''} placeholder="0.8" onChange={(e: ChangeEvent<HTMLInputElement>) => set({ edge_model: { ...model, fail_close_threshold: num(e) } })} />
        </InlineField>
        <InlineField label="edge_model.fail_open_threshold" labelWidth={labelWidth} tooltip="Default 0.2">
          <Input width={20} type="number" step="0.05" value={model.fail_open_threshold ?? ''} placeholder="0.2" onChange={(e: ChangeEvent<HTMLInputElement>) => set({ edge_model: { ...model, fail_open_threshold: num(e) } })} />
        </InlineField>
      </FieldSet>
      <FieldSet label="Hints: the collector's hints keys">
        <InlineField label="hints.ttl" labelWidth={labelWidth} tooltip="Default 30s">
          <Input width={20} value={hints.ttl ?? ''} placeholder="30s" onChange={(e: ChangeEvent<HTMLInputElement>) => set({ hints: { ...hints, ttl: str(e) } })} />
        </InlineField>
        <InlineField label="hints.retry_budget.ratio" labelWidth={labelWidth} tooltip="Default 0.1">
          <Input width={20} type="number" step="0.01" value={budget.ratio ?? ''} placeholder="0.1" onChange={(e: ChangeEvent<HTMLInputElement>) => set({ hints: { ...hints, retry_budget: { ...budget, ratio: num(e) } } })} />
        </InlineField>
        <InlineField label="…min_retries_per_second" labelWidth={labelWidth} tooltip="hints.retry_budget.min_retries_per_second; default 10">
          <Input width={20} type="number" value={budget.min_retries_per_second ?? ''} placeholder="10" onChange={(e: ChangeEvent<HTMLInputElement>) => set({ hints: { ...hints, retry_budget: { ...budget, min_retries_per_second: num(e) } } })} />
        </InlineField>
      </FieldSet>
    </>
  );
}
