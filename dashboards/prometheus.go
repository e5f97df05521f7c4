// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/barchart"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// The dashboards for Prometheus: the same questions as the store's
// dashboards, answered in PromQL from the metrics of the errorownership
// connector (connector/errorownershipconnector), as the prometheus exporter
// names them (dots to underscores, _total on counters). What only the store
// or the plugin holds — the service graph, the edge model's modes, hints,
// the audit log — has no PromQL form; the propagated and coincidental
// counts carry exemplars instead, which link to their traces through the
// Prometheus data source's exemplar link (provisioning/datasources).
//
// Every counter has a series per sampling_method (the connector's
// sampling.method): counted, traces without sampling information, and
// extrapolated, sampled traces by their adjusted count. Every query sums
// them — its sum by () leaves the label out — so that a panel shows the
// estimate of all traffic and a ratio is one of estimates (docs/design.md
// §8.1); only the panel of their shares keeps them apart.

// PrometheusType is the plugin ID of Grafana's core Prometheus data source.
const PrometheusType = "prometheus"

// PromTag marks the dashboards on Prometheus, for the links between them:
// a tag of their own, so that the store's dashboards do not list them.
const PromTag = "errorownership-prometheus"

// PromAllValue is the custom value of a Prometheus variable's "All": a
// regular expression every label value matches, so that All costs no
// alternation of every value.
const PromAllValue = ".*"

// The metric names as the prometheus exporter writes them.
const (
	promServed           = "errorownership_requests_served_total"
	promRetried          = "errorownership_requests_retried_total"
	promFailed           = "errorownership_requests_failed_total"
	promCorrectlyClaimed = "errorownership_requests_correctly_claimed_total"
	promCallsMade        = "errorownership_calls_made_total"
	promCallsFailed      = "errorownership_calls_failed_total"
	promCallsRetries     = "errorownership_calls_retries_total"
	promCallsSuppressed  = "errorownership_calls_retries_suppressed_total"
	promRootRequests     = "errorownership_root_requests_total"
	promRootServed       = "errorownership_root_served_total"
	promStormHops        = "errorownership_root_storm_hops_total"
	promStormRadius      = "errorownership_root_storm_radius"

	// promSamplingMethod is the label of the connector's sampling.method.
	promSamplingMethod = "sampling_method"
)

var promSource = common.DataSourceRef{Type: ptr(PrometheusType), Uid: ptr("${datasource}")}

// Label matchers by the variables: of an operation's metrics (and an
// edge's caller), and of a root operation's.
const (
	opMatch   = `job=~"$job", service_name=~"$service", errorownership_operation=~"$operation"`
	rootMatch = `job=~"$job", errorownership_root_service=~"$service", errorownership_root_operation=~"$operation"`
)

// sel is a selector of metric with the matchers.
func sel(metric string, matchers ...string) string {
	return metric + "{" + strings.Join(matchers, ", ") + "}"
}

// increase sums a counter's increase over the dashboard's range by labels.
func increase(by, selector string) string {
	return fmt.Sprintf("sum by (%s) (increase(%s[$__range]))", by, selector)
}

// rate sums a counter's rate per second by labels ("" sums everything).
func rate(by, selector string) string {
	if by == "" {
		return fmt.Sprintf("sum(rate(%s[$__rate_interval]))", selector)
	}
	return fmt.Sprintf("sum by (%s) (rate(%s[$__rate_interval]))", by, selector)
}

// promRange is a range query of a time series panel; promTable an instant
// query of a table, over the dashboard's range.
func promRange(refID, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().RefId(refID).Datasource(promSource).Expr(expr).Range().
		LegendFormat(legend).EditorMode(prometheus.QueryEditorModeCode)
}

func promTable(refID, expr string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().RefId(refID).Datasource(promSource).Expr(expr).Instant().
		Format(prometheus.PromQueryFormatTable).EditorMode(prometheus.QueryEditorModeCode)
}

// merged joins a table's instant queries into one row per label set and
// names their value columns, in query order, and hides the time.
func merged(names ...string) []dashboard.DataTransformerConfig {
	rename := map[string]string{}
	if len(names) == 1 {
		rename["Value"] = names[0]
	}
	for i, n := range names {
		rename["Value #"+string(rune('A'+i))] = n
	}
	return []dashboard.DataTransformerConfig{
		{Id: "merge", Options: map[string]any{}},
		{Id: "organize", Options: map[string]any{"renameByName": rename, "excludeByName": map[string]any{"Time": true}}},
	}
}

// newPromDashboard starts a Prometheus dashboard with the data source and
// the job, service and operation variables.
func newPromDashboard(uid, title, description string) *dashboard.DashboardBuilder { //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	b := dashboard.NewDashboardBuilder(title) //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	return b.
		Uid(uid).
		Description(description).
		Tags([]string{PromTag, PrometheusType}).
		Editable().
		Time("now-1h", "now").
		Refresh("1m").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("errorownership (Prometheus)").
			Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{PromTag}).
			AsDropdown(true).
			KeepTime(true).
			IncludeVars(true)).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Prometheus").
			Description("The Prometheus data source that scrapes the collector's prometheus exporter (the errorownership connector's metrics); its exemplar link opens the traces.").
			Type(PrometheusType)).
		WithVariable(promVariable("job", "Job", "The Prometheus jobs that scrape the collectors' errorownership metrics: one per deployment, say.",
			`label_values(`+promServed+`, job)`)).
		WithVariable(promVariable("service", "Service", "The services to show (service.name). Panels about root requests read them as the root (user-facing) services.",
			`label_values(`+promServed+`{job=~"$job"}, service_name)`)).
		WithVariable(promVariable("operation", "Operation", "The chosen services' inbound operations (server span names). Panels about root requests read them as root operations.",
			`label_values(`+promServed+`{job=~"$job", service_name=~"$service"}, errorownership_operation)`))
}

// promVariable is a variable of label values, several or All.
func promVariable(name, label, description, query string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Description(description).
		Datasource(promSource).
		Query(dashboard.StringOrMap{String: ptr(query)}).
		Definition(query).
		Multi(true).
		IncludeAll(true).
		AllValue(PromAllValue).
		Current(allOption).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc)
}

// promRetryAmplification is Retry amplification in PromQL.
func promRetryAmplification() *dashboard.DashboardBuilder { //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	rootBy := "errorownership_root_service, errorownership_root_operation"
	return newPromDashboard("errorownership-prom-retry-amplification", "Retry amplification (Prometheus)",
		"How much retry traffic each service absorbs, how it grows with depth (Ƞ, 2Ƞ, 4Ƞ, 8Ƞ (docs/design.md §1)), which retries the hooks suppressed, and how far storms reach: from the errorownership connector's metrics.").
		WithPanel(timeseries.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Requests served and root requests").
			Description("Requests each service served per second, retries included, beside the root (user-facing) requests that caused them. A service far above the root requests absorbs retries; the depth table says how much per hop.").
			Datasource(promSource).
			WithTarget(promRange("A", rate("service_name", sel(promServed, opMatch)), "{{service_name}}")).
			WithTarget(promRange("B", rate(rootBy, sel(promRootRequests, rootMatch)), "root requests: {{errorownership_root_service}} {{errorownership_root_operation}}")).
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
			Description("For each root operation: the requests each service at each depth below it served per root request in the time range, retries included — Ƞ, 2Ƞ, 4Ƞ, 8Ƞ (docs/design.md §1). 1 means no amplification; under one retry at every hop a failure at depth 3 makes it 1, 2, 4, 8, 8, 8, 8; error ownership keeps every hop above the failure at 1.").
			Datasource(promSource).
			WithTarget(promTable("A", increase(rootBy+", errorownership_depth, service_name", sel(promRootServed, rootMatch))+
				"\n/ on ("+rootBy+") group_left\n"+increase(rootBy, sel(promRootRequests, rootMatch)))).
			Transformations(merged("served per root request")).
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
			Description("Retries the chosen services sent to their dependencies and received from their callers per second, and the failed attempts their hooks did not retry, by error_ownership.retry.decision: suppressed_unclaimed (the callee unclaimed the error: the storm error ownership prevents), suppressed_budget (the retry budget was spent), no_policy and exhausted.").
			Datasource(promSource).
			WithTarget(promRange("A", rate("", sel(promCallsRetries, opMatch)), "retries sent")).
			WithTarget(promRange("B", rate("error_ownership_retry_decision", sel(promCallsSuppressed, opMatch)), "not retried: {{error_ownership_retry_decision}}")).
			WithTarget(promRange("C", rate("", sel(promRetried, opMatch)), "retries received")).
			Unit("reqps").
			Min(0).
			Thresholds(thresholds("green")).
			OverrideByName("not retried: suppressed_unclaimed", []dashboard.DynamicConfigValue{colorFixed("green")}).
			OverrideByName("not retried: suppressed_budget", []dashboard.DynamicConfigValue{colorFixed("yellow")}).
			OverrideByName("retries sent", []dashboard.DynamicConfigValue{colorFixed("red")}).
			OverrideByName("retries received", []dashboard.DynamicConfigValue{colorFixed("orange")}).
			Span(12).Height(9)).
		WithPanel(table.NewPanelBuilder().
			Title("Retries by service").
			Description("Per service over the time range: requests served and how many were retries, calls made, retries sent, and the failed attempts the hooks suppressed. A high share of retries among the requests served is retry traffic absorbed.").
			Datasource(promSource).
			WithTarget(promTable("A", increase("service_name", sel(promServed, opMatch)))).
			WithTarget(promTable("B", increase("service_name", sel(promRetried, opMatch)))).
			WithTarget(promTable("C", increase("service_name", sel(promRetried, opMatch))+"\n/ "+increase("service_name", sel(promServed, opMatch)))).
			WithTarget(promTable("D", increase("service_name", sel(promCallsMade, opMatch)))).
			WithTarget(promTable("E", increase("service_name", sel(promCallsRetries, opMatch)))).
			WithTarget(promTable("F", increase("service_name", sel(promCallsSuppressed, opMatch, `error_ownership_retry_decision=~"suppressed_.*"`)))).
			Transformations(merged("requests served", "retries received", "retries among requests served", "calls made", "retries sent", "retries suppressed")).
			Unit("short").
			Thresholds(thresholds("green")).
			OverrideByName("retries among requests served", []dashboard.DynamicConfigValue{
				unit("percentunit"), cell("color-background"),
				overrideThresholds("green", 0.1, "orange", 0.5, "red"),
			}).
			Span(12).Height(9)).
		WithPanel(table.NewPanelBuilder().
			Title("Retry-storm radius per root operation").
			Description("For each root operation: the root requests in the time range, and the retry-storm radius — the longest chain of consecutive hops that retried one failure — at most (the largest of the connector's emission intervals) and on average per root request. Without ownership it is the depth of the failure; with ownership it should be 1.").
			Datasource(promSource).
			WithTarget(promTable("A", increase(rootBy, sel(promRootRequests, rootMatch)))).
			WithTarget(promTable("B", fmt.Sprintf("max by (%s) (max_over_time(%s[$__range]))", rootBy, sel(promStormRadius, rootMatch)))).
			WithTarget(promTable("C", increase(rootBy, sel(promStormHops, rootMatch))+"\n/ "+increase(rootBy, sel(promRootRequests, rootMatch)))).
			Transformations(merged("root requests", "radius max", "radius mean")).
			Unit("short").
			Thresholds(thresholds("green")).
			OverrideByRegexp("^radius", []dashboard.DynamicConfigValue{
				unit("suffix: hops"), cell("color-background"), {Id: "decimals", Value: 2},
				overrideThresholds("green", 1.5, "orange", 2.5, "red"),
			}).
			Span(12).Height(8)).
		WithPanel(promSamplingShare())
}

// promSamplingShare is the share of the requests served each
// sampling_method stands for: how much of what the other panels show is
// extrapolated from sampled traces, and how much counted.
func promSamplingShare() *timeseries.PanelBuilder {
	served := sel(promServed, opMatch)
	return timeseries.NewPanelBuilder().
		Legend(legend()).
		Tooltip(tooltip()).
		Title("Requests served: extrapolated and counted").
		Description("The share of the chosen services' requests served that each sampling method stands for. Extrapolated: sampled traces (tracestate ot=th, or a sample-rate attribute), each weighed by its adjusted count, such as 10 for 10 % sampling. Counted: traces without sampling information, one each. Every other panel sums both, an estimate of all traffic; behind a sampler that does not say it sampled, the counted share undercounts and its ratios lean towards what the sampler keeps (docs/design.md §8.1).").
		Datasource(promSource).
		WithTarget(promRange("A", rate(promSamplingMethod, served)+"\n/ ignoring ("+promSamplingMethod+") group_left\n"+rate("", served), "{{"+promSamplingMethod+"}}")).
		Unit("percentunit").
		Min(0).
		Max(1).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
		FillOpacity(40).
		Thresholds(thresholds("green")).
		OverrideByName("extrapolated", []dashboard.DynamicConfigValue{colorFixed("blue")}).
		OverrideByName("counted", []dashboard.DynamicConfigValue{colorFixed("orange")}).
		Span(12).Height(8)
}

// promErrorOwnership is Error ownership in PromQL, without the service
// graph, which needs the plugin.
func promErrorOwnership() *dashboard.DashboardBuilder { //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	verdict := func(v string) string { return `errorownership_verdict="` + v + `"` }
	return newPromDashboard("errorownership-prom-error-ownership", "Error ownership (Prometheus)",
		"Where errors originate: each failed request's verdict — own (the service's error), propagated (a dependency's error passed on) or coincidental (the service's own error while a tolerated dependency failed too) — by service and over time, from the errorownership connector's metrics.").
		WithPanel(barchart.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Failed requests by verdict, per service").
			Description("The chosen services' failed requests over the time range by verdict. Own and coincidental errors originate in the service; propagated ones came from a dependency. A service whose failures are mostly propagated is a symptom: look downstream.").
			Datasource(promSource).
			WithTarget(promTable("A", increase("service_name", sel(promFailed, opMatch, verdict("own"))))).
			WithTarget(promTable("B", increase("service_name", sel(promFailed, opMatch, verdict("coincidental"))))).
			WithTarget(promTable("C", increase("service_name", sel(promFailed, opMatch, verdict("propagated"))))).
			Transformations(merged("own", "coincidental", "propagated")).
			XField("service_name").
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
			Description("Errors the chosen services own (own and coincidental verdicts) per second, by service: where failures begin. Services missing here only propagate. The coincidental ones carry exemplars: a dot opens the trace.").
			Datasource(promSource).
			WithTarget(promRange("A", rate("service_name", sel(promFailed, opMatch, `errorownership_verdict=~"own|coincidental"`)), "{{service_name}}").Exemplar(true)).
			Unit("reqps").
			Min(0).
			Thresholds(thresholds("green")).
			Span(12).Height(9)).
		WithPanel(timeseries.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Failures passed on").
			Description("Failed requests the chosen services propagated per second: a dependency's error passed on, which the service should unclaim so that its callers do not retry it. Each series carries exemplars: a dot opens a trace of such a failure.").
			Datasource(promSource).
			WithTarget(promRange("A", rate("service_name", sel(promFailed, opMatch, verdict("propagated"))), "{{service_name}}").Exemplar(true)).
			Unit("reqps").
			Min(0).
			Thresholds(thresholds("green")).
			Span(12).Height(9)).
		WithPanel(table.NewPanelBuilder().
			Title("Failures by operation").
			Description("Each inbound operation's requests and failures over the time range, by verdict, and the share of its failures it owns.").
			Datasource(promSource).
			WithTarget(promTable("A", increase("service_name, errorownership_operation", sel(promServed, opMatch)))).
			WithTarget(promTable("B", increase("service_name, errorownership_operation", sel(promFailed, opMatch)))).
			WithTarget(promTable("C", increase("service_name, errorownership_operation", sel(promFailed, opMatch, verdict("own"))))).
			WithTarget(promTable("D", increase("service_name, errorownership_operation", sel(promFailed, opMatch, verdict("coincidental"))))).
			WithTarget(promTable("E", increase("service_name, errorownership_operation", sel(promFailed, opMatch, verdict("propagated"))))).
			WithTarget(promTable("F", increase("service_name, errorownership_operation", sel(promFailed, opMatch, `errorownership_verdict=~"own|coincidental"`))+
				"\n/ "+increase("service_name, errorownership_operation", sel(promFailed, opMatch)))).
			Transformations(merged("requests served", "failed", "own", "coincidental", "propagated", "failures owned")).
			Unit("short").
			Thresholds(thresholds("green")).
			OverrideByName("failures owned", []dashboard.DynamicConfigValue{
				unit("percentunit"), gauge(), {Id: "min", Value: 0}, {Id: "max", Value: 1},
				overrideThresholds(colorPropagated, 0.5, colorOwn),
			}).
			Span(12).Height(9)).
		WithPanel(timeseries.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Calls and failed calls per edge").
			Description("Logical calls per second the chosen services made on each edge (solid), and the failed ones (dashed): (service, operation) → (peer service, peer operation).").
			Datasource(promSource).
			WithTarget(promRange("A", rate("service_name, errorownership_operation, service_peer_name, errorownership_peer_operation", sel(promCallsMade, opMatch)),
				"{{service_name}} {{errorownership_operation}} → {{service_peer_name}} {{errorownership_peer_operation}}")).
			WithTarget(promRange("B", rate("service_name, errorownership_operation, service_peer_name, errorownership_peer_operation", sel(promCallsFailed, opMatch)),
				"failed: {{service_name}} {{errorownership_operation}} → {{service_peer_name}} {{errorownership_peer_operation}}")).
			Unit("reqps").
			Min(0).
			Thresholds(thresholds("green")).
			OverrideByRegexp("^failed: ", []dashboard.DynamicConfigValue{
				{Id: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []int{10, 10}}},
			}).
			Span(24).Height(9))
}

// promClaimAccuracy is Claim accuracy in PromQL.
func promClaimAccuracy() *dashboard.DashboardBuilder { //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	accuracy := []dashboard.DynamicConfigValue{
		unit("percentunit"), cell("color-background"), {Id: "min", Value: 0}, {Id: "max", Value: 1},
		overrideThresholds("red", 0.9, "orange", 0.99, "green"),
	}
	byOp := "service_name, errorownership_operation"
	verdict := func(v string) string { return `errorownership_verdict="` + v + `"` }
	return newPromDashboard("errorownership-prom-claim-accuracy", "Claim accuracy (Prometheus)",
		"Whether the claims services send (error_ownership.claim.sent) can be trusted: the claim sent against the verdict of the analysis, services that never claim, and the trend, from the errorownership connector's metrics.").
		WithPanel(table.NewPanelBuilder().
			Title("Claim accuracy per service and operation").
			Description("Failed requests whose sent claim is the one the rules expect (claimed for own and coincidental errors, unclaimed for propagated ones, claimed when the next hop must retry), per inbound operation, over the time range. Below 99 % the operation's callers retry what they should not, or do not retry what they should; see the confusion matrix.").
			Datasource(promSource).
			WithTarget(promTable("A", increase(byOp, sel(promFailed, opMatch)))).
			WithTarget(promTable("B", increase(byOp, sel(promCorrectlyClaimed, opMatch)))).
			WithTarget(promTable("C", increase(byOp, sel(promCorrectlyClaimed, opMatch))+"\n/ "+increase(byOp, sel(promFailed, opMatch)))).
			Transformations(merged("failed requests", "claims correct", "accuracy")).
			Unit("short").
			Thresholds(thresholds("green")).
			OverrideByName("accuracy", accuracy).
			Span(12).Height(9)).
		WithPanel(table.NewPanelBuilder().
			Title("Confusion matrix: claim sent × verdict").
			Description("Failed requests in the time range by the claim the service sent (error_ownership_claim_sent) and the verdict. Claimed × propagated invites callers to retry a dependency's error (a storm); unclaimed × own stops a retry that would have helped; missing is a service without the hooks (its callers retry within budget).").
			Datasource(promSource).
			WithTarget(promTable("A", increase(byOp+", error_ownership_claim_sent", sel(promFailed, opMatch, verdict("own"))))).
			WithTarget(promTable("B", increase(byOp+", error_ownership_claim_sent", sel(promFailed, opMatch, verdict("coincidental"))))).
			WithTarget(promTable("C", increase(byOp+", error_ownership_claim_sent", sel(promFailed, opMatch, verdict("propagated"))))).
			Transformations(merged("own", "coincidental", "propagated")).
			Unit("short").
			Thresholds(thresholds("green")).
			Span(12).Height(9)).
		WithPanel(table.NewPanelBuilder().
			Title("Services that never claim (no hooks)").
			Description("Services whose every failed request in the time range went out without an Error-Claim: they do not run the hooks, so their callers cannot tell their own errors from passed-on ones and retry both within budget. Add the hooks here first where the failures are many.").
			Datasource(promSource).
			WithTarget(promTable("A", "("+increase("service_name", sel(promFailed, opMatch, `error_ownership_claim_sent="missing"`))+" > 0)"+
				"\nunless on (service_name)\n("+increase("service_name", sel(promFailed, opMatch, `error_ownership_claim_sent!="missing"`))+" > 0)")).
			Transformations(merged("failed requests without a claim")).
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
			Datasource(promSource).
			WithTarget(promRange("A", rate("service_name", sel(promCorrectlyClaimed, opMatch))+"\n/ "+rate("service_name", sel(promFailed, opMatch)), "{{service_name}}")).
			Unit("percentunit").
			Min(0).
			Max(1).
			Thresholds(thresholds("red", 0.9, "orange", 0.99, "green")).
			Span(12).Height(9))
}

// promCoincidentalErrors is Coincidental errors in PromQL: the counts, and
// the traces through exemplars rather than the store's audit log.
func promCoincidentalErrors() *dashboard.DashboardBuilder { //nolint:staticcheck // SA1019: the classic dashboard model, kept on purpose (package doc)
	coincidental := `errorownership_verdict="coincidental"`
	return newPromDashboard("errorownership-prom-coincidental-errors", "Coincidental errors (Prometheus)",
		"Coincidental errors: a service failed for its own reason while a dependency it tolerates (a fail-open edge) failed too. The service rightly claimed the error; audit that the dependency really is tolerated: each series carries exemplars, which open the trace through the Prometheus data source's exemplar link.").
		WithPanel(timeseries.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Coincidental errors over time, with their traces").
			Description("Coincidental errors per second by service and operation. The dots are exemplars: each is one such request, and opens its trace in the trace data source the Prometheus data source links exemplars to (trace_id).").
			Datasource(promSource).
			WithTarget(promRange("A", rate("service_name, errorownership_operation", sel(promFailed, opMatch, coincidental)), "{{service_name}} {{errorownership_operation}}").Exemplar(true)).
			Unit("reqps").
			Min(0).
			Thresholds(thresholds("green")).
			Span(24).Height(10)).
		WithPanel(table.NewPanelBuilder().
			Title("Coincidental errors by service and operation").
			Description("How many coincidental errors each service and operation had in the time range, by the claim sent: claimed is right; unclaimed was sent while the service did not yet know the dependency is tolerated (its hints lagged).").
			Datasource(promSource).
			WithTarget(promTable("A", increase("service_name, errorownership_operation, error_ownership_claim_sent", sel(promFailed, opMatch, coincidental)))).
			Transformations(merged("coincidental errors")).
			Unit("short").
			Thresholds(thresholds("green")).
			Span(12).Height(9)).
		WithPanel(timeseries.NewPanelBuilder().
			Legend(legend()).
			Tooltip(tooltip()).
			Title("Propagated failures, with their traces").
			Description("Failures passed on per second, by service and operation, beside the coincidental ones: a service whose coincidental errors rise with its propagated ones may depend on the failing peer more than the edge model thinks. Exemplars open the traces.").
			Datasource(promSource).
			WithTarget(promRange("A", rate("service_name, errorownership_operation", sel(promFailed, opMatch, `errorownership_verdict="propagated"`)), "{{service_name}} {{errorownership_operation}}").Exemplar(true)).
			Unit("reqps").
			Min(0).
			Thresholds(thresholds("green")).
			Span(12).Height(9))
}
