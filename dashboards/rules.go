// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// The Prometheus rules: recording rules for the expressions the alerts
// share, and alerts on the connector's metrics (a storm forming, retries
// that ownership should have suppressed, claims gone wrong, a tolerated
// dependency failing often) and on the collector's own telemetry (the
// analysis in trouble). They are generated like the dashboards, from the
// same metric names, into rules/errorownership.rules.yaml.
//
// Every threshold is a series of its own, errorownership:threshold with a
// threshold label, in the first group of the file: a user changes a value
// there, in one place, and the alerts compare with it. How long a
// condition must hold is each alert's for; RulesConfig sets them all, and
// the end-to-end test shortens them.

// RulesFile is the rules' file name in the rules directory.
const RulesFile = "errorownership.rules.yaml"

// RunbookURL is where each alert's runbook_url points: a section of
// docs/runbooks.md named after the alert.
const RunbookURL = "https://github.com/errorownership/errorownership/blob/main/docs/runbooks.md"

// The collector's own telemetry, as its Prometheus reader names it (no
// _total suffix on its counters).
const (
	telSpansDropped     = "otelcol_processor_errorownership_spans_dropped"
	telTracesEvicted    = "otelcol_processor_errorownership_traces_evicted"
	telVerdictsRejudged = "otelcol_processor_errorownership_verdicts_rejudged"
	telStoreFlushes     = "otelcol_processor_errorownership_store_flushes"
	telStoreRowsDropped = "otelcol_processor_errorownership_store_rows_dropped"
	telExportsFailed    = "otelcol_connector_errorownership_exports_failed"
	telHintsModelAge    = "otelcol_extension_errorownership_hints_model_age"
)

// promRetriesAfterUnclaimed is the connector's count of retries sent after
// an attempt whose callee unclaimed its error.
const promRetriesAfterUnclaimed = "errorownership_calls_retries_after_unclaimed_total"

// Thresholds are the alerts' default thresholds, each a series
// errorownership:threshold{threshold="<name>"}.
type Thresholds struct {
	// ServedPerRootRequest: requests a service at some depth serves per
	// root request, retries included, above which a storm is forming
	// (1 without amplification; 2, 4, 8 under one retry at every hop).
	ServedPerRootRequest float64
	// RootRequestsPerSecond: below it a root operation is too quiet for
	// its ratios to mean anything.
	RootRequestsPerSecond float64
	// StormRadius: the longest chain of hops retrying one failure above
	// which a storm is spreading (1: only the failing service's caller).
	StormRadius float64
	// RetriesAfterUnclaimed: the share of an edge's calls retried after
	// the callee unclaimed the error.
	RetriesAfterUnclaimed float64
	// ClaimAccuracy: the share of a service's labelled failed requests
	// whose claim was the expected one, below which claims are wrong.
	ClaimAccuracy float64
	// LabelledFailedPerSecond: below it a service fails too rarely for
	// its claim accuracy to mean anything.
	LabelledFailedPerSecond float64
	// CoincidentalShare: the share of a service's requests that failed on
	// their own while a dependency they tolerate failed too.
	CoincidentalShare float64
	// HintsModelAge: seconds since the hints extension last read the edge
	// model from the store, above which the hints it serves are stale.
	HintsModelAge float64
}

// RulesConfig sets the rules' thresholds and durations.
type RulesConfig struct {
	Thresholds Thresholds
	// Window is the range of the rates the ratios are taken over.
	Window time.Duration
	// For: how long a storm, retries after unclaimed errors, and trouble
	// in the analysis must last before they page; Slow, claims and
	// coincidental errors, which a deploy or a dependency's bad hour
	// causes and which are no emergency.
	For, Slow time.Duration
}

// DefaultRulesConfig is the committed rules' configuration.
func DefaultRulesConfig() RulesConfig {
	return RulesConfig{
		Thresholds: Thresholds{
			ServedPerRootRequest:    1.5,
			RootRequestsPerSecond:   0.1,
			StormRadius:             1,
			RetriesAfterUnclaimed:   0.01,
			ClaimAccuracy:           0.9,
			LabelledFailedPerSecond: 0.05,
			CoincidentalShare:       0.01,
			HintsModelAge:           300,
		},
		Window: 5 * time.Minute,
		For:    5 * time.Minute,
		Slow:   30 * time.Minute,
	}
}

// ruleFile, ruleGroup and rule are Prometheus' rule file format.
type ruleFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

type ruleGroup struct {
	Name  string `yaml:"name"`
	Rules []rule `yaml:"rules"`
}

type rule struct {
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// The recording rules' names, by Prometheus' level:metric:operations
// convention.
const (
	recThreshold          = "errorownership:threshold"
	recServedPerRoot      = "errorownership:root_served_per_root_request:ratio_rate"
	recRootRequests       = "errorownership:root_requests:rate"
	recStormRadius        = "errorownership:root_storm_radius:max_over_time"
	recUnclaimedRetried   = "errorownership:calls_retried_after_unclaimed:ratio_rate"
	recClaimAccuracy      = "errorownership:requests_claim_accuracy:ratio_rate"
	recLabelledFailed     = "errorownership:requests_failed_labelled:rate"
	recCoincidentalShare  = "errorownership:requests_coincidental:ratio_rate"
	rootLabels            = "job, errorownership_root_service, errorownership_root_operation"
	edgeLabels            = "job, service_name, service_peer_name"
	serviceLabels         = "job, service_name"
	thresholdServed       = "served_per_root_request"
	thresholdRootRequests = "root_requests_per_second"
	thresholdRadius       = "storm_radius"
	thresholdUnclaimed    = "retries_after_unclaimed"
	thresholdAccuracy     = "claim_accuracy"
	thresholdLabelled     = "labelled_failed_per_second"
	thresholdCoincidental = "coincidental_share"
	thresholdHintsAge     = "hints_model_age_seconds"
)

// Rules returns the rules of cfg as a Prometheus rule file.
func Rules(cfg RulesConfig) ([]byte, error) {
	w := model.Duration(cfg.Window).String()
	rated := func(name string) string { return name + w }
	threshold := func(name string) string {
		return fmt.Sprintf(`on () group_left () %s{threshold=%q}`, recThreshold, name)
	}
	t := cfg.Thresholds
	var thresholds []rule
	for _, th := range []struct {
		name  string
		value float64
	}{
		{thresholdServed, t.ServedPerRootRequest},
		{thresholdRootRequests, t.RootRequestsPerSecond},
		{thresholdRadius, t.StormRadius},
		{thresholdUnclaimed, t.RetriesAfterUnclaimed},
		{thresholdAccuracy, t.ClaimAccuracy},
		{thresholdLabelled, t.LabelledFailedPerSecond},
		{thresholdCoincidental, t.CoincidentalShare},
		{thresholdHintsAge, t.HintsModelAge},
	} {
		thresholds = append(thresholds, rule{Record: recThreshold, Expr: num(th.value), Labels: map[string]string{"threshold": th.name}})
	}
	sumRate := func(by, selector string) string {
		return fmt.Sprintf("sum by (%s) (rate(%s[%s]))", by, selector, w)
	}
	// occurs is an expression true while any of selectors grows.
	occurs := func(by string, selectors ...string) string {
		parts := make([]string, len(selectors))
		for i, sel := range selectors {
			parts[i] = sumRate(by, sel) + " > 0"
		}
		return strings.Join(parts, "\nor\n")
	}
	records := []rule{
		{Record: rated(recRootRequests), Expr: sumRate(rootLabels, promRootRequests)},
		{Record: rated(recServedPerRoot), Expr: sumRate(rootLabels+", errorownership_depth, service_name", promRootServed) +
			"\n/ on (" + rootLabels + ") group_left ()\n" + rated(recRootRequests)},
		{Record: rated(recStormRadius),
			Expr: fmt.Sprintf("max by (%s) (max_over_time(%s[%s]))", rootLabels, promStormRadius, w)},
		{Record: rated(recUnclaimedRetried), Expr: sumRate(edgeLabels, promRetriesAfterUnclaimed) +
			"\n/\n" + sumRate(edgeLabels, promCallsMade)},
		{Record: rated(recLabelledFailed), Expr: sumRate(serviceLabels, promFailed+`{error_ownership_claim_sent!="missing"}`)},
		{Record: rated(recClaimAccuracy), Expr: sumRate(serviceLabels, promCorrectlyClaimed) + "\n/\n" + rated(recLabelledFailed)},
		{Record: rated(recCoincidentalShare), Expr: sumRate(serviceLabels, promFailed+`{errorownership_verdict="coincidental"}`) +
			"\n/\n" + sumRate(serviceLabels, promServed)},
	}
	alerts := []rule{
		alert("ErrorOwnershipRetryAmplification", "critical", cfg.For,
			rated(recServedPerRoot)+" > "+threshold(thresholdServed)+
				"\nand on ("+rootLabels+")\n"+rated(recRootRequests)+" > "+threshold(thresholdRootRequests),
			"Retry storm: {{ $labels.service_name }} serves {{ $value | printf \"%.2f\" }} requests per {{ $labels.errorownership_root_service }} {{ $labels.errorownership_root_operation }} request",
			"At depth {{ $labels.errorownership_depth }} below {{ $labels.errorownership_root_service }} {{ $labels.errorownership_root_operation }}, {{ $labels.service_name }} has served {{ $value | printf \"%.2f\" }} requests per root request over the last "+w+", retries included: the hops above a failure are retrying it. Without amplification it is 1."),
		alert("ErrorOwnershipStormRadius", "warning", cfg.For,
			rated(recStormRadius)+" > "+threshold(thresholdRadius),
			"Retry storm {{ $value }} hops deep under {{ $labels.errorownership_root_service }} {{ $labels.errorownership_root_operation }}",
			"Some root request of {{ $labels.errorownership_root_service }} {{ $labels.errorownership_root_operation }} in the last "+w+" had {{ $value }} consecutive hops retrying one failure. Under error ownership only the failing service's caller retries (1)."),
		alert("ErrorOwnershipRetriesAfterUnclaimed", "warning", cfg.For,
			rated(recUnclaimedRetried)+" > "+threshold(thresholdUnclaimed),
			"{{ $labels.service_name }} retries {{ $labels.service_peer_name }}'s unclaimed errors",
			"{{ $value | humanizePercentage }} of {{ $labels.service_name }}'s calls to {{ $labels.service_peer_name }} over the last "+w+" were retried after {{ $labels.service_peer_name }} unclaimed the error: retries error ownership should have suppressed."),
		alert("ErrorOwnershipClaimAccuracyLow", "warning", cfg.Slow,
			rated(recClaimAccuracy)+" < "+threshold(thresholdAccuracy)+
				"\nand on ("+serviceLabels+")\n"+rated(recLabelledFailed)+" > "+threshold(thresholdLabelled),
			"{{ $labels.service_name }} claims its errors wrongly",
			"Only {{ $value | humanizePercentage }} of {{ $labels.service_name }}'s failed requests over the last "+w+" carried the claim the analysis expects: its callers retry what they should not, or give up on what they should retry."),
		alert("ErrorOwnershipCoincidentalErrors", "warning", cfg.Slow,
			rated(recCoincidentalShare)+" > "+threshold(thresholdCoincidental),
			"{{ $labels.service_name }} fails coincidentally with a dependency it tolerates",
			"{{ $value | humanizePercentage }} of {{ $labels.service_name }}'s requests over the last "+w+" failed for its own reason while a dependency it tolerates failed too: that dependency fails often."),
		alert("ErrorOwnershipSpansDropped", "warning", cfg.For,
			occurs("job, instance", telSpansDropped, telTracesEvicted),
			"The errorownership processor on {{ $labels.instance }} drops spans",
			"The processor's buffer is full: spans are left out of the analysis, or traces are analysed before decision_wait. Its figures undercount."),
		alert("ErrorOwnershipHeldVerdictsFull", "warning", cfg.For,
			occurs("job, instance", telVerdictsRejudged+`{cause="evicted"}`),
			"The errorownership processor on {{ $labels.instance }} holds as many verdicts as rejudge.max_held allows",
			"Failed requests waiting for their edges to be learned are judged for the last time before their time: their verdicts stay provisional ones."),
		alert("ErrorOwnershipStoreFlushesFailing", "warning", cfg.For,
			occurs("job, instance", telStoreFlushes+`{outcome=~"dropped|rejected"}`, telStoreRowsDropped),
			"The errorownership processor on {{ $labels.instance }} loses statistics the store refuses",
			"Flushes to the store are dropped or rejected: the store's figures, the dashboards on it and the hints read from it miss what they carried."),
		alert("ErrorOwnershipHintsStale", "warning", cfg.For,
			fmt.Sprintf("max by (job, instance) (%s) > %s", telHintsModelAge, threshold(thresholdHintsAge)),
			"The ownership hints on {{ $labels.instance }} are {{ $value | humanizeDuration }} old",
			"The hints extension has not read the edge model from the store for {{ $value | humanizeDuration }}: the hooks that ask it get an old model, and new edges stay unknown to them."),
		alert("ErrorOwnershipConnectorExportsFailing", "warning", cfg.For,
			occurs("job, instance, connector", telExportsFailed),
			"The errorownership connector {{ $labels.connector }} on {{ $labels.instance }} loses metrics",
			"The metrics pipeline after the connector refuses its metrics; they are not sent again, and the Prometheus dashboards and these alerts miss them."),
	}
	f := ruleFile{Groups: []ruleGroup{
		{Name: "errorownership-thresholds", Rules: thresholds},
		{Name: "errorownership-records", Rules: records},
		{Name: "errorownership-alerts", Rules: alerts},
	}}
	var b bytes.Buffer
	b.WriteString("# Generated by make dashboards from dashboards/rules.go. Thresholds are the\n" +
		"# errorownership:threshold series of the first group: change them there.\n" +
		"# Runbooks: docs/runbooks.md.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// WriteRules writes the rules of DefaultRulesConfig into dir as RulesFile.
func WriteRules(dir string) error {
	b, err := Rules(DefaultRulesConfig())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, RulesFile), b, 0o644)
}

// alert is an alert rule with its runbook.
func alert(name, severity string, hold time.Duration, expr, summary, description string) rule {
	return rule{
		Alert:  name,
		Expr:   expr,
		For:    model.Duration(hold).String(),
		Labels: map[string]string{"severity": severity},
		Annotations: map[string]string{
			"summary":     summary,
			"description": description,
			"runbook_url": RunbookURL + "#" + strings.ToLower(name),
		},
	}
}

// num writes a threshold as PromQL's number literal.
func num(v float64) string { return fmt.Sprintf("%g", v) }
