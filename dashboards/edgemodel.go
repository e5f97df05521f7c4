// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/errorownership/errorownership/dashboards/plugin/pkg/plugin"
	"github.com/errorownership/errorownership/ownership"
)

// modeColors colours a mode column: fail-close red, fail-open green,
// unknown (treated as fail-close) grey.
func modeColors() []dashboard.DynamicConfigValue {
	return []dashboard.DynamicConfigValue{
		cell("color-background"),
		{Id: "mappings", Value: []map[string]any{{
			"type": "value",
			"options": map[string]any{
				ownership.ModeFailClose.String(): map[string]any{"color": "red", "index": 0},
				ownership.ModeFailOpen.String():  map[string]any{"color": "green", "index": 1},
				ownership.ModeUnknown.String():   map[string]any{"color": "text", "index": 2},
			},
		}}},
	}
}

// edgeModel shows the edge model (docs/design.md §5): each edge's mode,
// the confidence it rests on and its evidence, and the hints one service
// would get (§9.3).
func edgeModel() *dashboard.DashboardBuilder { //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	return newDashboard("errorownership-edge-model", "Edge model",
		"The edge model the collector judges verdicts by and serves as hints: for each edge (service, operation) → (peer service, peer operation), whether the service fails when the call fails alone (fail-close), tolerates it (fail-open) or is not known yet, the confidence, and the evidence.").
		WithVariable(storeVariable()).
		WithVariable(dashboard.NewQueryVariableBuilder("service").
			Label("Service").
			Description("The calling service whose edges and hints to show.").
			Datasource(postgres).
			Query(dashboard.StringOrMap{String: ptr(`SELECT DISTINCT service FROM edge_stats WHERE $__timeFilter(bucket) ORDER BY 1`)}).
			Definition(`SELECT DISTINCT service FROM edge_stats WHERE $__timeFilter(bucket) ORDER BY 1`).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc)).
		WithPanel(table.NewPanelBuilder().
			Title("Every edge: mode, confidence and evidence").
			Description("The model as the collector reads it now from the store (store.ModelWindow back, fading with edge_model.half_life), judged by the engine's rule: fail-close when the lower bound of P(request fails | call failed alone) reaches 0.8, fail-open when its upper bound is at most 0.2, with at least min_samples samples. Confidence is the bound the mode rests on. The dashboard's time range does not apply.").
			Datasource(pluginSource).
			WithTarget(fromStore("A", plugin.QueryEdgeModel, "")).
			Unit("short").
			Thresholds(thresholds("green")).
			// The plugin names its fields for display; overrides match
			// those names.
			OverrideByName("Mode", modeColors()).
			OverrideByRegexp("^(Confidence|P\\(request fails)", []dashboard.DynamicConfigValue{{Id: "decimals", Value: 1}}).
			OverrideByName("Last seen", []dashboard.DynamicConfigValue{unit("dateTimeFromNow")}).
			Filterable(true).
			Span(24).Height(11)).
		WithPanel(table.NewPanelBuilder().
			Title("Hints ${service} would get").
			Description("The ownership hints the collector's endpoint (GET /v1/hints?service=…) would serve this service now, built as the processor builds them; the frame 'document' holds the JSON. Edges not listed are unknown, which the hooks treat as fail-close.").
			Datasource(pluginSource).
			WithTarget(fromStore("A", plugin.QueryHints, "${service}")).
			Unit("short").
			Thresholds(thresholds("green")).
			OverrideByName("Mode", modeColors()).
			OverrideByName("Confidence", []dashboard.DynamicConfigValue{{Id: "decimals", Value: 1}}).
			Span(12).Height(9)).
		WithPanel(table.NewPanelBuilder().
			Title("Evidence per edge of ${service} in the time range").
			Description("The edge model's counts over the dashboard's time range, not decayed, estimated for all traffic (each request weighing its trace's adjusted count): calls, failed calls, calls that failed alone (no other call of the request failed) and how many of those requests failed. Their ratio estimates P(request fails | call failed alone): near 1 fail-close, near 0 fail-open.").
			Datasource(postgres).
			WithTarget(tableSQL("A", `SELECT operation, peer_service AS "peer service", peer_operation AS "peer operation",
       sum(coalesce(calls_est, calls)) AS calls, sum(coalesce(failed_calls_est, failed_calls)) AS "failed calls",
       sum(coalesce(failed_alone_est, failed_alone)) AS "failed alone", sum(coalesce(failed_alone_request_failed_est, failed_alone_request_failed)) AS "failed alone, request failed",
       sum(coalesce(failed_alone_request_failed_est, failed_alone_request_failed))::float8 / nullif(sum(coalesce(failed_alone_est, failed_alone)), 0) AS "request fails when the call fails alone",
       sum(coalesce(call_ok_request_failed_est, call_ok_request_failed)) AS "call succeeded, request failed"
FROM edge_stats
WHERE $__timeFilter(bucket) AND service = '${service}'
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3`)).
			Unit("short").
			Thresholds(thresholds("green")).
			OverrideByName("request fails when the call fails alone", []dashboard.DynamicConfigValue{
				unit("percentunit"), cell("color-background"),
				overrideThresholds("green", 0.2, "text", 0.8, "red"),
			}).
			Span(12).Height(9)).
		WithPanel(timeseries.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Calls and failed calls per edge of ${service}").
			Description("Calls per second on each of the service's edges (solid) and the failed ones (dashed).").
			Datasource(postgres).
			WithTarget(seriesSQL("A", `SELECT $__timeGroupAlias(bucket, $__interval),
       operation || ' → ' || peer_service || ' ' || peer_operation AS metric,
       `+perSecond(est("calls"))+` AS value
FROM edge_stats
WHERE $__timeFilter(bucket) AND service = '${service}'
GROUP BY 1, 2
ORDER BY 1, 2`)).
			WithTarget(seriesSQL("B", `SELECT $__timeGroupAlias(bucket, $__interval),
       'failed: ' || operation || ' → ' || peer_service || ' ' || peer_operation AS metric,
       `+perSecond(est("failed_calls"))+` AS value
FROM edge_stats
WHERE $__timeFilter(bucket) AND service = '${service}'
GROUP BY 1, 2
ORDER BY 1, 2`)).
			Unit("reqps").
			Min(0).
			Thresholds(thresholds("green")).
			OverrideByRegexp("^failed: ", []dashboard.DynamicConfigValue{
				{Id: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []int{10, 10}}},
			}).
			Span(24).Height(9))
}
