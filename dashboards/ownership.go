// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/barchart"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/nodegraph"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/errorownership/errorownership/dashboards/plugin/pkg/plugin"
)

// Verdict colours, the same on every panel: an error the service owns is
// red, one it passed on orange, a coincidental one (owned, while a
// tolerated dependency failed too) purple.
const (
	colorOwn          = "red"
	colorPropagated   = "orange"
	colorCoincidental = "purple"
)

// errorOwnership answers where errors originate: the verdict of every
// failed request (docs/design.md §4.2), by service and over time, and the
// service graph.
func errorOwnership() *dashboard.DashboardBuilder { //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	return newDashboard("errorownership-error-ownership", "Error ownership",
		"Where errors originate: each failed request's verdict — own (the service's error), propagated (a dependency's error passed on) or coincidental (the service's own error while a tolerated dependency failed too) — by service, over time, and on the service graph.").
		WithVariable(storeVariable()).
		WithVariable(serviceVariable()).
		WithVariable(operationVariable()).
		WithPanel(nodegraph.NewPanelBuilder().
			Title("Service graph: errors owned and propagated").
			Description("Services sized by the requests they served, ringed by the share that succeeded (green), failed with an error the service owns (red) or failed with a dependency's error it passed on (orange); grey: not seen serving. Calls are coloured by the edge model's mode — red fail-close, green fail-open, orange mixed, dashed grey unknown — and thicker the more they were retried. From the errorownership data source; the modes are the model the collector judges by now.").
			Datasource(pluginSource).
			WithTarget(fromStore("A", plugin.QueryServiceGraph, "")).
			Unit("short").
			Thresholds(thresholds("green")).
			Span(24).Height(14)).
		WithPanel(barchart.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Failed requests by verdict, per service").
			Description("The chosen services' failed requests over the time range by verdict. Own and coincidental errors originate in the service; propagated ones came from a dependency. A service whose failures are mostly propagated is a symptom: look downstream.").
			Datasource(postgres).
			WithTarget(tableSQL("A", `SELECT service,
       sum(coalesce(verdict_own_est, verdict_own)) AS own,
       sum(coalesce(verdict_coincidental_est, verdict_coincidental)) AS coincidental,
       sum(coalesce(verdict_propagated_est, verdict_propagated)) AS propagated
FROM operation_stats
WHERE $__timeFilter(bucket) AND `+in("service", "service")+` AND `+in("operation", "operation")+`
GROUP BY service
HAVING sum(coalesce(failed_est, failed)) > 0
ORDER BY sum(coalesce(verdict_own_est, verdict_own) + coalesce(verdict_coincidental_est, verdict_coincidental)) DESC, service`)).
			XField("service").
			Stacking(common.StackingModeNormal).
			Orientation(common.VizOrientationHorizontal).
			Unit("short").
			Min(0).
			Thresholds(thresholds("green")).
			OverrideByName("own", []dashboard.DynamicConfigValue{colorFixed(colorOwn)}).
			OverrideByName("coincidental", []dashboard.DynamicConfigValue{colorFixed(colorCoincidental)}).
			OverrideByName("propagated", []dashboard.DynamicConfigValue{colorFixed(colorPropagated)}).
			Span(12).Height(9)).
		WithPanel(timeseries.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Where errors originate").
			Description("Errors the chosen services own (own and coincidental verdicts) per second, by service: where failures begin. Services missing here only propagate.").
			Datasource(postgres).
			WithTarget(seriesSQL("A", `SELECT $__timeGroupAlias(bucket, $__interval), service AS metric,
       `+perSecond(est("verdict_own")+" + "+est("verdict_coincidental"))+` AS value
FROM operation_stats
WHERE $__timeFilter(bucket) AND `+in("service", "service")+` AND `+in("operation", "operation")+`
GROUP BY 1, 2
HAVING sum(coalesce(verdict_own_est, verdict_own) + coalesce(verdict_coincidental_est, verdict_coincidental)) > 0
ORDER BY 1, 2`)).
			Unit("reqps").
			Min(0).
			Thresholds(thresholds("green")).
			Span(12).Height(9)).
		WithPanel(timeseries.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Failures passed on").
			Description("Failed requests the chosen services propagated per second: a dependency's error passed on, which the service should unclaim so that its callers do not retry it.").
			Datasource(postgres).
			WithTarget(seriesSQL("A", `SELECT $__timeGroupAlias(bucket, $__interval), service AS metric,
       `+perSecond(est("verdict_propagated"))+` AS value
FROM operation_stats
WHERE $__timeFilter(bucket) AND `+in("service", "service")+` AND `+in("operation", "operation")+`
GROUP BY 1, 2
HAVING sum(coalesce(verdict_propagated_est, verdict_propagated)) > 0
ORDER BY 1, 2`)).
			Unit("reqps").
			Min(0).
			Thresholds(thresholds("green")).
			Span(12).Height(9)).
		WithPanel(table.NewPanelBuilder().
			Title("Failures by operation").
			Description("Each inbound operation's requests and failures over the time range, by verdict, and the share of its failures it owns: estimates of all traffic, each trace weighing its adjusted count (docs/design.md §8.1), with the requests the traces seen hold beside them and how they were counted (counted, extrapolated from sampling, or mixed).").
			Datasource(postgres).
			WithTarget(tableSQL("A", `SELECT service, operation, sum(coalesce(served_est, served)) AS "requests served", sum(coalesce(failed_est, failed)) AS failed,
       sum(coalesce(verdict_own_est, verdict_own)) AS own, sum(coalesce(verdict_coincidental_est, verdict_coincidental)) AS coincidental, sum(coalesce(verdict_propagated_est, verdict_propagated)) AS propagated,
       sum(coalesce(verdict_own_est, verdict_own) + coalesce(verdict_coincidental_est, verdict_coincidental))::float8 / nullif(sum(coalesce(failed_est, failed)), 0) AS "failures owned",
       sum(served) AS "requests seen", sum(failed) AS "failed seen", `+samplingLabel("served")+` AS sampling
FROM operation_stats
WHERE $__timeFilter(bucket) AND `+in("service", "service")+` AND `+in("operation", "operation")+`
GROUP BY 1, 2
HAVING sum(coalesce(failed_est, failed)) > 0
ORDER BY 4 DESC, 1, 2`)).
			Unit("short").
			Thresholds(thresholds("green")).
			OverrideByName("failures owned", []dashboard.DynamicConfigValue{
				unit("percentunit"), gauge(), {Id: "min", Value: 0}, {Id: "max", Value: 1},
				overrideThresholds(colorPropagated, 0.5, colorOwn),
			}).
			Span(12).Height(9)).
		WithPanel(traceStatsPanel())
}

// traceStatsPanel shows what the figures rest on: the traces analysed, how
// many were counted once and how many extrapolated from their sampling,
// and those set apart as incomplete, which no figure counts.
func traceStatsPanel() *table.PanelBuilder {
	const complete = "traces - incomplete_missing_parent - incomplete_missing_callee - incomplete_inconsistent_sampling"
	return table.NewPanelBuilder().
		Title("Traces analysed").
		Description("The traces the collectors analysed in the time range, of every service. Counted ones had no sampling information and count once; extrapolated ones stand for their adjusted count of all traffic (OpenTelemetry th, or a sample-rate attribute: docs/design.md §8.1). Incomplete traces — a parent or a callee's spans missing, or spans disagreeing on their sampling — are not judged and count in no other figure. Many counted traces that failed beside few counted ones that did not suggest a sampler upstream that keeps errors without saying so, which inflates failure rates.").
		Datasource(postgres).
		WithTarget(tableSQL("A", `SELECT coalesce(sum(traces), 0) AS traces,
       coalesce(sum(`+complete+` - extrapolated), 0) AS counted,
       coalesce(sum(extrapolated), 0) AS extrapolated,
       sum(extrapolated)::float8 / nullif(sum(`+complete+`), 0) AS "extrapolated share",
       sum(counted_failed)::float8 / nullif(sum(`+complete+` - extrapolated), 0) AS "counted traces failed",
       coalesce(sum(incomplete_missing_parent), 0) AS "incomplete: missing parent",
       coalesce(sum(incomplete_missing_callee), 0) AS "incomplete: missing callee",
       coalesce(sum(incomplete_inconsistent_sampling), 0) AS "incomplete: inconsistent sampling"
FROM trace_stats
WHERE $__timeFilter(bucket)`)).
		Unit("short").
		Thresholds(thresholds("green")).
		OverrideByName("extrapolated share", []dashboard.DynamicConfigValue{unit("percentunit")}).
		OverrideByName("counted traces failed", []dashboard.DynamicConfigValue{unit("percentunit")}).
		Span(24).Height(5)
}
