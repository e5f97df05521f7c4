// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// serviceVariable and operationVariable choose the services and their
// inbound operations; panels about root requests read them as root
// services and root operations.
func serviceVariable() *dashboard.QueryVariableBuilder {
	return multiVariable("service", "Service",
		"The services to show (service.name). Panels about root requests read them as the root (user-facing) services.",
		`SELECT DISTINCT service FROM operation_stats WHERE $__timeFilter(bucket) ORDER BY 1`)
}

func operationVariable() *dashboard.QueryVariableBuilder {
	return multiVariable("operation", "Operation",
		"The chosen services' inbound operations (server span names). Panels about root requests read them as root operations.",
		`SELECT DISTINCT operation FROM operation_stats WHERE $__timeFilter(bucket) AND `+in("service", "service")+` ORDER BY 1`)
}

// retryAmplification answers how much retry traffic each service absorbs
// and where retry storms grow (docs/design.md §1 and §7).
func retryAmplification() *dashboard.DashboardBuilder { //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	return newDashboard("errorownership-retry-amplification", "Retry amplification",
		"How much retry traffic each service absorbs, how it grows with depth (Ƞ, 2Ƞ, 4Ƞ, 8Ƞ (docs/design.md §1)), which retries the hooks suppressed, and how far storms reach.").
		WithVariable(serviceVariable()).
		WithVariable(operationVariable()).
		WithPanel(timeseries.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Requests served and root requests").
			Description("Requests each service served per second, retries included, beside the root (user-facing) requests that caused them. A service far above the root requests absorbs retries; the depth table says how much per hop.").
			Datasource(postgres).
			WithTarget(seriesSQL("A", `SELECT $__timeGroupAlias(bucket, $__interval), service AS metric,
       `+perSecond(est("served"))+` AS value
FROM operation_stats
WHERE $__timeFilter(bucket) AND `+in("service", "service")+` AND `+in("operation", "operation")+`
GROUP BY 1, 2
ORDER BY 1, 2`)).
			WithTarget(seriesSQL("B", `SELECT $__timeGroupAlias(bucket, $__interval), 'root requests: ' || root_service || ' ' || root_operation AS metric,
       `+perSecond(est("requests"))+` AS value
FROM root_stats
WHERE $__timeFilter(bucket) AND `+in("root_service", "service")+` AND `+in("root_operation", "operation")+`
GROUP BY 1, 2
ORDER BY 1, 2`)).
			Unit("reqps").
			Min(0).
			Thresholds(thresholds("green")).
			OverrideByRegexp("^root requests:", []dashboard.DynamicConfigValue{
				{Id: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []int{10, 10}}},
				{Id: "custom.lineWidth", Value: 2},
			}).
			Span(12).Height(9)).
		WithPanel(table.NewPanelBuilder().
			Title("Requests served per root request, by depth").
			Description("For each root operation: the requests each service at each depth below it served per root request, retries included — Ƞ, 2Ƞ, 4Ƞ, 8Ƞ (docs/design.md §1). 1 means no amplification; under one retry at every hop a failure at depth 3 makes it 1, 2, 4, 8, 8, 8, 8; error ownership keeps every hop above the failure at 1.").
			Datasource(postgres).
			WithTarget(tableSQL("A", `WITH r AS (
    SELECT root_service, root_operation, sum(coalesce(requests_est, requests)) AS requests
    FROM root_stats
    WHERE $__timeFilter(bucket) AND `+in("root_service", "service")+` AND `+in("root_operation", "operation")+`
    GROUP BY 1, 2
), d AS (
    SELECT root_service, root_operation, depth, service, sum(coalesce(served_est, served)) AS served
    FROM depth_stats
    WHERE $__timeFilter(bucket) AND `+in("root_service", "service")+` AND `+in("root_operation", "operation")+`
    GROUP BY 1, 2, 3, 4
)
SELECT d.root_service AS "root service", d.root_operation AS "root operation", d.depth, d.service,
       d.served AS "requests served", r.requests AS "root requests",
       d.served::float8 / nullif(r.requests, 0) AS "served per root request"
FROM d JOIN r USING (root_service, root_operation)
ORDER BY 1, 2, 3, 4`)).
			Unit("short").
			Thresholds(thresholds("green")).
			OverrideByName("served per root request", []dashboard.DynamicConfigValue{
				unit("suffix: Ƞ"), gauge(), {Id: "decimals", Value: 2}, {Id: "max", Value: 8},
				overrideThresholds("green", 1.2, "yellow", 2.0, "orange", 4.0, "red"),
			}).
			Span(12).Height(9)).
		WithPanel(timeseries.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Retries sent, received and suppressed").
			Description("Retries the chosen services sent to their dependencies and received from their callers per second, and the retries their hooks held back: suppressed because the callee unclaimed the error (the storm error ownership prevents) or because the retry budget was spent. Not retried: no retry policy for the call, or attempts or deadline exhausted (error_ownership.retry.decision).").
			Datasource(postgres).
			WithTarget(seriesSQL("A", `SELECT $__timeGroupAlias(bucket, $__interval),
       `+perSecond(est("retries"))+` AS "retries sent",
       `+perSecond(est("suppressed_unclaimed"))+` AS "suppressed: unclaimed",
       `+perSecond(est("suppressed_budget"))+` AS "suppressed: budget",
       `+perSecond(est("no_policy"))+` AS "not retried: no policy",
       `+perSecond(est("exhausted"))+` AS "not retried: exhausted"
FROM edge_stats
WHERE $__timeFilter(bucket) AND `+in("service", "service")+` AND `+in("operation", "operation")+`
GROUP BY 1
ORDER BY 1`)).
			WithTarget(seriesSQL("B", `SELECT $__timeGroupAlias(bucket, $__interval),
       `+perSecond(est("retries_received"))+` AS "retries received"
FROM operation_stats
WHERE $__timeFilter(bucket) AND `+in("service", "service")+` AND `+in("operation", "operation")+`
GROUP BY 1
ORDER BY 1`)).
			Unit("reqps").
			Min(0).
			Thresholds(thresholds("green")).
			OverrideByName("suppressed: unclaimed", []dashboard.DynamicConfigValue{colorFixed("green")}).
			OverrideByName("suppressed: budget", []dashboard.DynamicConfigValue{colorFixed("yellow")}).
			OverrideByName("retries sent", []dashboard.DynamicConfigValue{colorFixed("red")}).
			OverrideByName("retries received", []dashboard.DynamicConfigValue{colorFixed("orange")}).
			Span(12).Height(9)).
		WithPanel(table.NewPanelBuilder().
			Title("Retries by service").
			Description("Per service over the time range: requests served and how many were retries, calls made, retries sent, and retries not made. A high share of retries among the requests served is retry traffic absorbed.").
			Datasource(postgres).
			WithTarget(tableSQL("A", `WITH o AS (
    SELECT service, sum(coalesce(served_est, served)) AS served, sum(coalesce(retries_received_est, retries_received)) AS retries_received
    FROM operation_stats
    WHERE $__timeFilter(bucket) AND `+in("service", "service")+` AND `+in("operation", "operation")+`
    GROUP BY service
), e AS (
    SELECT service, sum(coalesce(calls_est, calls)) AS calls, sum(coalesce(retries_est, retries)) AS retries,
           sum(coalesce(suppressed_unclaimed_est, suppressed_unclaimed)) AS suppressed_unclaimed, sum(coalesce(suppressed_budget_est, suppressed_budget)) AS suppressed_budget,
           sum(coalesce(no_policy_est, no_policy)) AS no_policy, sum(coalesce(exhausted_est, exhausted)) AS exhausted
    FROM edge_stats
    WHERE $__timeFilter(bucket) AND `+in("service", "service")+` AND `+in("operation", "operation")+`
    GROUP BY service
)
SELECT service, coalesce(o.served, 0) AS "requests served", coalesce(o.retries_received, 0) AS "retries received",
       coalesce(o.retries_received, 0)::float8 / nullif(o.served, 0) AS "retries among requests served",
       coalesce(e.calls, 0) AS "calls made", coalesce(e.retries, 0) AS "retries sent",
       coalesce(e.suppressed_unclaimed, 0) AS "suppressed: unclaimed", coalesce(e.suppressed_budget, 0) AS "suppressed: budget",
       coalesce(e.no_policy, 0) AS "not retried: no policy", coalesce(e.exhausted, 0) AS "not retried: exhausted"
FROM o FULL JOIN e USING (service)
ORDER BY 3 DESC, 1`)).
			Unit("short").
			Thresholds(thresholds("green")).
			OverrideByName("retries among requests served", []dashboard.DynamicConfigValue{
				unit("percentunit"), cell("color-background"),
				overrideThresholds("green", 0.1, "orange", 0.5, "red"),
			}).
			Span(12).Height(9)).
		WithPanel(table.NewPanelBuilder().
			Title("Retry-storm radius per root operation").
			Description("For each root operation: the root requests, and the retry-storm radius — the longest chain of consecutive hops that retried one failure — at most and on average per root request. Without ownership it is the depth of the failure; with ownership it should be 1.").
			Datasource(postgres).
			WithTarget(tableSQL("A", `SELECT root_service AS "root service", root_operation AS "root operation",
       sum(coalesce(requests_est, requests)) AS "root requests",
       max(storm_radius_max) AS "radius max",
       sum(coalesce(storm_radius_sum_est, storm_radius_sum))::float8 / nullif(sum(coalesce(requests_est, requests)), 0) AS "radius mean"
FROM root_stats
WHERE $__timeFilter(bucket) AND `+in("root_service", "service")+` AND `+in("root_operation", "operation")+`
GROUP BY 1, 2
ORDER BY 4 DESC, 1, 2`)).
			Unit("short").
			Thresholds(thresholds("green")).
			OverrideByRegexp("^radius", []dashboard.DynamicConfigValue{
				unit("suffix: hops"), cell("color-background"), {Id: "decimals", Value: 2},
				overrideThresholds("green", 1.5, "orange", 2.5, "red"),
			}).
			Span(24).Height(8))
}
