// SPDX-License-Identifier: Apache-2.0

// Package dashboards builds the Grafana dashboards over the errorownership
// store: Retry amplification, Error ownership, Claim accuracy, Coincidental
// errors and Edge model; and the first four again over Prometheus, from the
// errorownership connector's metrics (prometheus.go). They are generated here, with the Grafana
// Foundation SDK, and committed as JSON in json/ (make dashboards runs
// cmd/gendashboards); provisioning/ installs them in Grafana with their
// data sources.
//
// Panels that SQL answers well query the store through Grafana's core
// PostgreSQL data source, using its macros ($__timeFilter,
// $__timeGroupAlias, $__interval …) and template variables; the service
// graph, the edge model's judged modes and a service's hints come from the
// errorownership data source (plugin/), which runs the engine's rules.
//
// The service and operation variables are multi-valued with an "All" whose
// custom value is AllValue, so a panel filters with
//
//	('__all' IN ($service) OR service IN ($service))
//
// which PostgreSQL folds to true for All and to service IN (…) otherwise,
// reading the index that leads with the service (store migration 3).
//
// The dashboards use the SDK's classic model (package dashboard), which the
// SDK marks deprecated in favour of dashboardv2: the v2 schema needs Grafana
// 12 with feature toggles that are off by default, while the classic JSON
// is what every supported Grafana provisions from files.
package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/errorownership/errorownership/dashboards/plugin/pkg/plugin"
)

// PostgresType is the plugin ID of Grafana's core PostgreSQL data source.
const PostgresType = "grafana-postgresql-datasource"

// AllValue is the custom value of a variable's "All": a SQL literal
// that no selection of real names produces (a service called __all would
// read as All).
const AllValue = "'__all'"

// Tag marks every dashboard, for the links between them.
const Tag = "errorownership"

// PrometheusPrefix begins the file names of the dashboards on Prometheus
// (prometheus.go).
const PrometheusPrefix = "prometheus-"

// Dashboard is one generated dashboard.
type Dashboard struct {
	// File is its file name in json/.
	File string
	// Model is the dashboard as Grafana reads it.
	Model dashboard.Dashboard //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
}

// JSON returns the dashboard as committed: indented, ending in a newline.
func (d Dashboard) JSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	// Grafana reads SQL and URLs as they are; < > & need no escaping.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d.Model); err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.File, err)
	}
	return buf.Bytes(), nil
}

// All builds every dashboard.
func All() ([]Dashboard, error) {
	var out []Dashboard
	for _, b := range []struct {
		file  string
		build func() *dashboard.DashboardBuilder //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	}{
		{"retry-amplification.json", retryAmplification},
		{"error-ownership.json", errorOwnership},
		{"claim-accuracy.json", claimAccuracy},
		{"coincidental-errors.json", coincidentalErrors},
		{"edge-model.json", edgeModel},
		{PrometheusPrefix + "retry-amplification.json", promRetryAmplification},
		{PrometheusPrefix + "error-ownership.json", promErrorOwnership},
		{PrometheusPrefix + "claim-accuracy.json", promClaimAccuracy},
		{PrometheusPrefix + "coincidental-errors.json", promCoincidentalErrors},
	} {
		m, err := b.build().Build()
		if err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", b.file, err)
		}
		numberPanels(&m)
		out = append(out, Dashboard{File: b.file, Model: m})
	}
	return out, nil
}

// Write writes every dashboard into dir.
func Write(dir string) error {
	all, err := All()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range all {
		b, err := d.JSON()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, d.File), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// numberPanels gives the panels ids in order: Grafana links to a panel by
// its id (viewPanel), so they must be stable from one generation to the
// next.
func numberPanels(m *dashboard.Dashboard) { //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	for i := range m.Panels {
		if p := m.Panels[i].Panel; p != nil {
			id := uint32(i + 1)
			p.Id = &id
		}
	}
}

func ptr[T any](v T) *T { return &v }

// The data sources the panels query, chosen by the dashboards' data source
// variables.
var (
	postgres     = common.DataSourceRef{Type: ptr(PostgresType), Uid: ptr("${datasource}")}
	pluginSource = common.DataSourceRef{Type: ptr(plugin.ID), Uid: ptr("${store}")}
)

// newDashboard starts a dashboard with what they all share: the data
// source variable, the links to the others, an hour's range.
func newDashboard(uid, title, description string) *dashboard.DashboardBuilder { //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	b := dashboard.NewDashboardBuilder(title) //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	return b.
		Uid(uid).
		Description(description).
		Tags([]string{Tag}).
		Editable().
		Time("now-1h", "now").
		Refresh("1m").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("errorownership").
			Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{Tag}).
			AsDropdown(true).
			KeepTime(true).
			IncludeVars(true)).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Store").
			Description("The PostgreSQL data source on the errorownership store (the collector's errorownership_store dsn).").
			Type(PostgresType))
}

// storeVariable chooses the errorownership data source, on dashboards with
// its panels.
func storeVariable() *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder("store").
		Label("Store (errorownership)").
		Description("The errorownership data source on the same store: the service graph, the edge model and hints.").
		Type(plugin.ID)
}

// allOption is "All" selected.
var allOption = dashboard.VariableOption{
	Selected: ptr(true),
	Text:     dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
	Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
}

// multiVariable is a variable of names from the store, several or All.
func multiVariable(name, label, description, query string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Description(description).
		Datasource(postgres).
		Query(dashboard.StringOrMap{String: ptr(query)}).
		Definition(query).
		Multi(true).
		IncludeAll(true).
		AllValue(AllValue).
		Current(allOption).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc)
}

// in filters column by a multi-valued variable with AllValue.
func in(column, variable string) string {
	return fmt.Sprintf("(%s IN ($%s) OR %s IN ($%s))", AllValue, variable, column, variable)
}

// est is a counter's estimate of all traffic: <col>_est, or, in a row
// written before schema version 4, the count itself (which counted every
// trace once). Rates and ratios are of estimates.
func est(col string) string { return fmt.Sprintf("coalesce(%[1]s_est, %[1]s)", col) }

// samplingLabel says how a group's figures were counted, from its rows'
// extrapolated counts of the count column seen: counted (none
// extrapolated), extrapolated (all) or mixed, as the store's readers say.
func samplingLabel(seen string) string {
	return fmt.Sprintf("CASE WHEN coalesce(sum(extrapolated), 0) = 0 THEN 'counted' WHEN sum(extrapolated) >= sum(%s) THEN 'extrapolated' ELSE 'mixed' END", seen)
}

// perSecond sums expr over a $__interval group, as a rate per second.
func perSecond(expr string) string {
	return fmt.Sprintf("sum(%s) * 1000.0 / $__interval_ms", expr)
}

// thresholds builds absolute thresholds: the base colour, then a colour
// from each value up.
func thresholds(base string, steps ...any) cog.Builder[dashboard.ThresholdsConfig] {
	list := []dashboard.Threshold{{Color: base}}
	for i := 0; i+1 < len(steps); i += 2 {
		list = append(list, dashboard.Threshold{Value: ptr(steps[i].(float64)), Color: steps[i+1].(string)})
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(list)
}

// Overrides of a table column, as Grafana's field config spells them.
func unit(u string) dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: "unit", Value: u}
}

func cell(mode string) dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: "custom.cellOptions", Value: map[string]any{"type": mode}}
}

func gauge() dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: "custom.cellOptions", Value: map[string]any{"type": "gauge", "mode": "gradient"}}
}

func colorFixed(color string) dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": color}}
}

func overrideThresholds(base string, steps ...any) dashboard.DynamicConfigValue {
	t, _ := thresholds(base, steps...).Build()
	return dashboard.DynamicConfigValue{Id: "thresholds", Value: t}
}

func hidden() dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: "custom.hidden", Value: true}
}

// legend and tooltip show every series, the largest first.
func legend() *common.VizLegendOptionsBuilder {
	return common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)
}

func tooltip() *common.VizTooltipOptionsBuilder {
	return common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending)
}
