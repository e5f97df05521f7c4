// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Trace URL templates: {trace_id} is replaced by each row's trace ID. The
// default opens Jaeger's UI; README.md gives the Tempo form.
const (
	TraceURLPlaceholder = "{trace_id}"
	DefaultTraceURL     = "http://localhost:16686/trace/" + TraceURLPlaceholder
)

// coincidentalErrors is the audit log of coincidental errors: a service
// failed for its own reason while a dependency it tolerates failed too
// (docs/design.md §2, §4.2). Each row links to its trace.
func coincidentalErrors() *dashboard.DashboardBuilder { //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	textbox := func(name, label, description, value string) *dashboard.TextBoxVariableBuilder {
		return dashboard.NewTextBoxVariableBuilder(name).
			Label(label).
			Description(description).
			DefaultValue(dashboard.StringOrMap{String: ptr(value)}).
			Current(dashboard.VariableOption{
				Text:  dashboard.StringOrArrayOfString{String: ptr(value)},
				Value: dashboard.StringOrArrayOfString{String: ptr(value)},
			})
	}
	filters := `$__timeFilter(time) AND ` + in("service", "service") + ` AND ` + in("peer_service", "dependency") + `
  AND ('${trace_id}' = '' OR trace_id = lower(trim('${trace_id}')))`
	return newDashboard("errorownership-coincidental-errors", "Coincidental errors",
		"The audit log of coincidental errors: a service failed for its own reason while a dependency it tolerates (a fail-open edge) failed too. The service rightly claimed the error; audit that the dependency really is tolerated, one click from the trace.").
		WithVariable(multiVariable("service", "Service", "The services whose coincidental errors to show.",
			`SELECT DISTINCT service FROM coincidental_audit WHERE $__timeFilter(time) ORDER BY 1`)).
		WithVariable(multiVariable("dependency", "Dependency", "The failed fail-open dependencies (peer services) to show.",
			`SELECT DISTINCT peer_service FROM coincidental_audit WHERE $__timeFilter(time) AND `+in("service", "service")+` ORDER BY 1`)).
		WithVariable(textbox("trace_id", "Trace ID", "Show only the entries of one trace (hex, as the trace backend shows it); empty shows all.", "")).
		WithVariable(textbox("trace_url", "Trace URL", "Where a trace ID links to: "+TraceURLPlaceholder+" is replaced by the trace ID. Jaeger: http://jaeger:16686/trace/"+TraceURLPlaceholder+"; Tempo in Grafana's Explore: see the README.", DefaultTraceURL)).
		WithPanel(table.NewPanelBuilder().
			Title("Coincidental errors to audit").
			Description("Newest first, at most 1000: when, which service and operation failed on its own, which tolerated dependency failed in the same request, and the claims. Click a trace ID to open the trace (the Trace URL variable says where). weight is the adjusted count of the entry's trace: how many such errors of all traffic it stands for (1: counted; docs/design.md §8.1).").
			Datasource(postgres).
			WithTarget(tableSQL("A", `SELECT time, service, operation, peer_service AS dependency, peer_operation AS "dependency operation",
       claim_sent AS "claim sent", claim_expected AS "claim expected", weight, trace_id, span_id,
       replace('${trace_url}', '`+TraceURLPlaceholder+`', trace_id) AS trace_link
FROM coincidental_audit
WHERE `+filters+`
ORDER BY time DESC, trace_id, span_id
LIMIT 1000`)).
			Unit("string").
			Thresholds(thresholds("text")).
			OverrideByName("time", []dashboard.DynamicConfigValue{unit("dateTimeAsIso")}).
			OverrideByName("trace_id", []dashboard.DynamicConfigValue{{Id: "links", Value: []map[string]any{{
				"title":       "Open the trace",
				"url":         "${__data.fields.trace_link:raw}",
				"targetBlank": true,
			}}}}).
			OverrideByName("trace_link", []dashboard.DynamicConfigValue{hidden()}).
			Filterable(true).
			Span(24).Height(12)).
		WithPanel(timeseries.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Coincidental errors over time, by failed dependency").
			Description("Coincidental errors per second by the tolerated dependency that failed with them, each audit entry weighing its trace's adjusted count. A dependency that shows up here often fails a lot while its callers carry on: worth fixing, but not worth retrying for.").
			Datasource(postgres).
			WithTarget(seriesSQL("A", `SELECT $__timeGroupAlias(time, $__interval), peer_service AS metric,
       `+perSecond("weight")+` AS value
FROM coincidental_audit
WHERE `+filters+`
GROUP BY 1, 2
ORDER BY 1, 2`)).
			Unit("reqps").
			Min(0).
			Thresholds(thresholds("green")).
			Span(12).Height(9)).
		WithPanel(table.NewPanelBuilder().
			Title("Coincidental errors by service and dependency").
			Description("How many coincidental errors each service had with each tolerated dependency in the time range (estimated for all traffic: the audit entries' weights summed; the entries themselves beside it), and the latest. The audit keeps at most store.audit_per_service_per_minute entries per service and minute.").
			Datasource(postgres).
			WithTarget(tableSQL("A", `SELECT service, peer_service AS dependency, sum(weight) AS "coincidental errors", max(time) AS latest,
       count(*) AS "audit entries"
FROM coincidental_audit
WHERE `+filters+`
GROUP BY 1, 2
ORDER BY 3 DESC, 1, 2`)).
			Unit("short").
			Thresholds(thresholds("green")).
			OverrideByName("latest", []dashboard.DynamicConfigValue{unit("dateTimeFromNow")}).
			Span(12).Height(9))
}
