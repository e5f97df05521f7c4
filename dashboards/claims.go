// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// claimAccuracy answers whether the claims services send can be trusted:
// the claim sent against the verdict (docs/design.md §6).
func claimAccuracy() *dashboard.DashboardBuilder { //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	accuracy := []dashboard.DynamicConfigValue{
		unit("percentunit"), cell("color-background"), {Id: "min", Value: 0}, {Id: "max", Value: 1},
		overrideThresholds("red", 0.9, "orange", 0.99, "green"),
	}
	return newDashboard("errorownership-claim-accuracy", "Claim accuracy",
		"Whether the claims services send (error_ownership.claim.sent) can be trusted: the claim sent against the verdict of the analysis, services that never claim, and the trend.").
		WithVariable(serviceVariable()).
		WithVariable(operationVariable()).
		WithPanel(table.NewPanelBuilder().
			Title("Claim accuracy per service and operation").
			Description("Failed requests whose sent claim is the one the rules expect (claimed for own and coincidental errors, unclaimed for propagated ones, claimed when the next hop must retry), per inbound operation. Below 99 % the operation's callers retry what they should not, or do not retry what they should; see the confusion matrix.").
			Datasource(postgres).
			WithTarget(tableSQL("A", `SELECT service, operation, sum(coalesce(failed_est, failed)) AS "failed requests", sum(coalesce(claims_correct_est, claims_correct)) AS "claims correct",
       sum(coalesce(claims_correct_est, claims_correct))::float8 / nullif(sum(coalesce(failed_est, failed)), 0) AS accuracy,
       sum(coalesce(expected_claimed_est, expected_claimed)) AS "expected claimed", sum(coalesce(expected_unclaimed_est, expected_unclaimed)) AS "expected unclaimed"
FROM operation_stats
WHERE $__timeFilter(bucket) AND `+in("service", "service")+` AND `+in("operation", "operation")+`
GROUP BY 1, 2
HAVING sum(coalesce(failed_est, failed)) > 0
ORDER BY 5, 1, 2`)).
			Unit("short").
			Thresholds(thresholds("green")).
			OverrideByName("accuracy", accuracy).
			Span(12).Height(9)).
		WithPanel(table.NewPanelBuilder().
			Title("Confusion matrix: claim sent × verdict").
			Description("Failed requests by the claim the service sent and the verdict. Claimed × propagated invites callers to retry a dependency's error (a storm); unclaimed × own stops a retry that would have helped; missing is a service without the hooks (its callers retry within budget).").
			Datasource(postgres).
			WithTarget(tableSQL("A", `SELECT service, operation, claim_sent AS "claim sent",
       coalesce(sum(coalesce(requests_est, requests)) FILTER (WHERE verdict = 'own'), 0) AS own,
       coalesce(sum(coalesce(requests_est, requests)) FILTER (WHERE verdict = 'coincidental'), 0) AS coincidental,
       coalesce(sum(coalesce(requests_est, requests)) FILTER (WHERE verdict = 'propagated'), 0) AS propagated
FROM claim_accuracy
WHERE $__timeFilter(bucket) AND `+in("service", "service")+` AND `+in("operation", "operation")+`
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3`)).
			Unit("short").
			Thresholds(thresholds("green")).
			Span(12).Height(9)).
		WithPanel(table.NewPanelBuilder().
			Title("Services that never claim (no hooks)").
			Description("Services whose every failed request in the time range went out without an Error-Claim: they do not run the hooks, so their callers cannot tell their own errors from passed-on ones and retry both within budget. Add the hooks here first where the failures are many.").
			Datasource(postgres).
			WithTarget(tableSQL("A", `SELECT service, sum(coalesce(requests_est, requests)) AS "failed requests without a claim",
       string_agg(DISTINCT operation, ', ' ORDER BY operation) AS operations
FROM claim_accuracy
WHERE $__timeFilter(bucket) AND `+in("service", "service")+` AND `+in("operation", "operation")+`
GROUP BY service
HAVING bool_and(claim_sent = 'missing')
ORDER BY 2 DESC, 1`)).
			Unit("short").
			Thresholds(thresholds("orange")).
			OverrideByName("failed requests without a claim", []dashboard.DynamicConfigValue{
				cell("color-background"), overrideThresholds("yellow", 100.0, "orange", 1000.0, "red"),
			}).
			Span(12).Height(9)).
		WithPanel(timeseries.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Claim accuracy over time").
			Description("The share of the chosen services' failed requests whose claim was the expected one, per service. A fall after a deploy points at the hooks or at hints that lag the edge model.").
			Datasource(postgres).
			WithTarget(seriesSQL("A", `SELECT $__timeGroupAlias(bucket, $__interval), service AS metric,
       sum(coalesce(claims_correct_est, claims_correct))::float8 / nullif(sum(coalesce(failed_est, failed)), 0) AS value
FROM operation_stats
WHERE $__timeFilter(bucket) AND `+in("service", "service")+` AND `+in("operation", "operation")+`
GROUP BY 1, 2
HAVING sum(coalesce(failed_est, failed)) > 0
ORDER BY 1, 2`)).
			Unit("percentunit").
			Min(0).
			Max(1).
			Thresholds(thresholds("red", 0.9, "orange", 0.99, "green")).
			Span(12).Height(9))
}
