// SPDX-License-Identifier: Apache-2.0

import React, { useEffect, useState } from 'react';
import { QueryEditorProps, SelectableValue } from '@grafana/data';
import { getTemplateSrv } from '@grafana/runtime';
import { InlineField, RadioButtonGroup, Select, Stack } from '@grafana/ui';

import { DataSource } from '../datasource';
import { QUERY_TYPES, QueryType, StoreOptions, StoreQuery } from '../types';

type Props = QueryEditorProps<DataSource, StoreQuery, StoreOptions>;

/** Chooses the query type and the service, a name or a dashboard variable. */
export function QueryEditor({ datasource, query, onChange, onRunQuery }: Props) {
  const [services, setServices] = useState<Array<SelectableValue<string>>>([]);
  const [error, setError] = useState<string>();

  useEffect(() => {
    const variables = getTemplateSrv()
      .getVariables()
      .map((v) => ({ label: '$' + v.name, value: '$' + v.name }));
    datasource
      .services()
      .then((names) => {
        setServices([...variables, ...names.map((n) => ({ label: n, value: n }))]);
        setError(undefined);
      })
      .catch((e) => {
        setServices(variables);
        setError(e?.data?.error ?? e?.message ?? String(e));
      });
  }, [datasource]);

  const queryType = query.queryType ?? 'serviceGraph';
  const needsService = queryType === 'hints';
  const service = query.service ?? '';
  const options =
    service && !services.some((s) => s.value === service) ? [...services, { label: service, value: service }] : services;

  return (
    <Stack gap={1} direction="column">
      <InlineField label="Query" labelWidth={12} tooltip={QUERY_TYPES.find((t) => t.value === queryType)?.description}>
        <RadioButtonGroup<QueryType>
          options={QUERY_TYPES.map(({ value, label, description }) => ({ value, label, description }))}
          value={queryType}
          onChange={(v) => {
            onChange({ ...query, queryType: v });
            onRunQuery();
          }}
        />
      </InlineField>
      <InlineField
        label="Service"
        labelWidth={12}
        invalid={needsService && !service}
        error={error ?? (needsService && !service ? 'Hints are a service’s: choose one' : undefined)}
        tooltip={
          needsService
            ? 'The service whose hints to show'
            : 'Only this service and its neighbours (graph) or its edges (edge model); empty for every service'
        }
      >
        <Select
          width={40}
          isClearable={!needsService}
          allowCustomValue
          placeholder={needsService ? 'Choose a service' : 'Every service'}
          options={options}
          value={service || null}
          onChange={(v) => {
            onChange({ ...query, service: v?.value ?? '' });
            onRunQuery();
          }}
        />
      </InlineField>
    </Stack>
  );
}
