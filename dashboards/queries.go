// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"reflect"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"

	"github.com/errorownership/errorownership/dashboards/plugin/pkg/plugin"
)

// The PostgreSQL data source's result formats.
const (
	FormatTable      = "table"
	FormatTimeSeries = "time_series"
)

// SQLQuery is a query of Grafana's PostgreSQL data source, written as SQL
// (the query editor's Code mode).
type SQLQuery struct {
	RefID      string                `json:"refId"`
	Datasource *common.DataSourceRef `json:"datasource,omitempty"`
	// RawSQL is the SQL with Grafana's macros and template variables.
	RawSQL string `json:"rawSql"`
	// Format is FormatTable or FormatTimeSeries.
	Format     string `json:"format"`
	RawQuery   bool   `json:"rawQuery"`
	EditorMode string `json:"editorMode"`
}

// ImplementsDataqueryVariant makes SQLQuery a panel target.
func (SQLQuery) ImplementsDataqueryVariant() {}

// DataqueryType names the variant after its data source.
func (SQLQuery) DataqueryType() string { return PostgresType }

// Validate accepts every SQLQuery: the SQL is checked against PostgreSQL
// by the tests.
func (SQLQuery) Validate() error { return nil }

// Equals compares two queries.
func (q SQLQuery) Equals(other variants.Dataquery) bool { return reflect.DeepEqual(q, other) }

// sqlQuery is a builder of an SQLQuery.
type sqlQuery struct{ q SQLQuery }

var _ cog.Builder[variants.Dataquery] = (*sqlQuery)(nil)

func (b *sqlQuery) Build() (variants.Dataquery, error) { return b.q, nil }

// tableSQL and seriesSQL build the PostgreSQL queries of a table and of a time
// series panel.
func tableSQL(refID, sql string) *sqlQuery  { return newSQL(refID, FormatTable, sql) }
func seriesSQL(refID, sql string) *sqlQuery { return newSQL(refID, FormatTimeSeries, sql) }

func newSQL(refID, format, sql string) *sqlQuery {
	return &sqlQuery{SQLQuery{RefID: refID, Datasource: &postgres, RawSQL: sql, Format: format, RawQuery: true, EditorMode: "code"}}
}

// StoreQuery is a query of the errorownership data source (plugin.Query).
type StoreQuery struct {
	RefID      string                `json:"refId"`
	Datasource *common.DataSourceRef `json:"datasource,omitempty"`
	QueryType  string                `json:"queryType"`
	Service    string                `json:"service,omitempty"`
}

// ImplementsDataqueryVariant makes StoreQuery a panel target.
func (StoreQuery) ImplementsDataqueryVariant() {}

// DataqueryType names the variant after its data source.
func (StoreQuery) DataqueryType() string { return plugin.ID }

// Validate accepts every StoreQuery; the plugin reports a bad one.
func (StoreQuery) Validate() error { return nil }

// Equals compares two queries.
func (q StoreQuery) Equals(other variants.Dataquery) bool { return reflect.DeepEqual(q, other) }

type storeQuery struct{ q StoreQuery }

var _ cog.Builder[variants.Dataquery] = (*storeQuery)(nil)

func (b *storeQuery) Build() (variants.Dataquery, error) { return b.q, nil }

// fromStore builds a query of the errorownership data source.
func fromStore(refID, queryType, service string) *storeQuery {
	return &storeQuery{StoreQuery{RefID: refID, Datasource: &pluginSource, QueryType: queryType, Service: service}}
}
