// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/errorownership/errorownership/store/pgtest"
)

// samplingSharePanel is the one panel that keeps the sampling methods
// apart.
const samplingSharePanel = "Retry amplification (Prometheus) / Requests served: extrapolated and counted"

// promQuery is one PromQL query of a committed Prometheus dashboard.
type promQuery struct {
	name, expr string
}

func promQueries(t *testing.T) []promQuery {
	t.Helper()
	var out []promQuery
	for _, d := range loadAllDashboards(t) {
		if !slices.Contains(d.Tags, PromTag) {
			continue
		}
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				out = append(out, promQuery{d.Title + " / " + p.Title + " " + q.RefID, q.Expr})
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no Prometheus queries in json/")
	}
	return out
}

var (
	// counterSelector is a selector of one of the connector's counters.
	counterSelector = regexp.MustCompile(`errorownership_\w+_total\{`)
	// summedCounter is a counter's increase or rate summed, by the labels
	// captured.
	summedCounter = regexp.MustCompile(`sum(?: by \(([^)]*)\) )?\((?:increase|rate)\(errorownership_\w+_total\{`)
)

// TestPromQueriesSumOverSamplingMethod: the connector gives every counter
// a series per sampling_method (counted, extrapolated), which the panels
// must add up to show estimates of all traffic. Every counter in every
// Prometheus query is summed by labels that leave sampling_method out —
// except on the panel of the methods' shares, which keeps it.
func TestPromQueriesSumOverSamplingMethod(t *testing.T) {
	share := 0
	for _, q := range promQueries(t) {
		counters := len(counterSelector.FindAllString(q.expr, -1))
		sums := summedCounter.FindAllStringSubmatch(q.expr, -1)
		if len(sums) != counters {
			t.Errorf("%s: %d counters, %d of them summed: %s", q.name, counters, len(sums), q.expr)
		}
		keeps := false
		for _, m := range sums {
			for _, l := range strings.Split(m[1], ",") {
				keeps = keeps || strings.TrimSpace(l) == promSamplingMethod
			}
		}
		if strings.HasPrefix(q.name, samplingSharePanel+" ") {
			share++
			if !keeps {
				t.Errorf("%s: the shares by method do not keep %s apart: %s", q.name, promSamplingMethod, q.expr)
			}
		} else if keeps {
			t.Errorf("%s keeps %s apart: its figures are not estimates of all traffic: %s", q.name, promSamplingMethod, q.expr)
		}
	}
	if share != 1 {
		t.Errorf("%d queries on %q, want one", share, samplingSharePanel)
	}
}

// TestPromQueriesOnSampledSeries runs panels' queries, as committed, on
// Prometheus' engine (promtool test rules) over series as the connector
// writes them for traffic partly sampled: each counter a counted and an
// extrapolated series. The panels show the estimates — both methods summed
// — their ratios are ratios of estimates, and the shares panel the methods'
// shares.
func TestPromQueriesOnSampledSeries(t *testing.T) {
	promtool := promtoolBinary(t)
	// Per second, for ten minutes: a root request of a counted and ten of
	// extrapolated, a sampled trace standing for ten; a served twice as
	// many, b twice as many again; failed requests and correctly claimed
	// ones in a 4:3 ratio in both methods.
	op := `job="collector", service_name="%s", errorownership_operation="%s", sampling_method="%s"`
	root := `job="collector", errorownership_root_service="a", errorownership_root_operation="GET /a", sampling_method="%s"`
	type series struct {
		selector string
		perMin   int
	}
	var input []series
	for _, m := range []struct {
		method string
		n      int
	}{{"counted", 1}, {"extrapolated", 10}} {
		input = append(input,
			series{"errorownership_root_requests_total{" + fmt.Sprintf(root, m.method) + "}", m.n},
			series{"errorownership_root_served_total{" + fmt.Sprintf(root, m.method) + `, errorownership_depth="0", service_name="a"}`, m.n},
			series{"errorownership_root_served_total{" + fmt.Sprintf(root, m.method) + `, errorownership_depth="1", service_name="b"}`, 2 * m.n},
			series{"errorownership_requests_served_total{" + fmt.Sprintf(op, "a", "GET /a", m.method) + "}", 2 * m.n},
			series{"errorownership_requests_served_total{" + fmt.Sprintf(op, "b", "GET /b", m.method) + "}", 4 * m.n},
			series{"errorownership_requests_failed_total{" + fmt.Sprintf(op, "b", "GET /b", m.method) + `, errorownership_verdict="own", error_ownership_claim_sent="claimed"}`, 3 * m.n},
			series{"errorownership_requests_failed_total{" + fmt.Sprintf(op, "b", "GET /b", m.method) + `, errorownership_verdict="own", error_ownership_claim_sent="unclaimed"}`, m.n},
			series{"errorownership_requests_correctly_claimed_total{" + fmt.Sprintf(op, "b", "GET /b", m.method) + "}", 3 * m.n},
		)
	}
	tests := []struct {
		name  string
		query string
		// want are the result's series, by labels as promtool writes them.
		want map[string]string
	}{
		{
			name:  "the methods' shares of the requests served",
			query: samplingSharePanel + " A",
			want:  map[string]string{`{sampling_method="counted"}`: "0.09090909090909091", `{sampling_method="extrapolated"}`: "0.9090909090909091"},
		},
		{
			name:  "requests served per second, both methods",
			query: "Retry amplification (Prometheus) / Requests served and root requests A",
			want:  map[string]string{`{service_name="a"}`: "22", `{service_name="b"}`: "44"},
		},
		{
			name:  "requests served per root request: a ratio of estimates",
			query: "Retry amplification (Prometheus) / Requests served per root request, by depth A",
			want: map[string]string{
				`{errorownership_depth="0", errorownership_root_operation="GET /a", errorownership_root_service="a", service_name="a"}`: "1",
				`{errorownership_depth="1", errorownership_root_operation="GET /a", errorownership_root_service="a", service_name="b"}`: "2",
			},
		},
		{
			name:  "claim accuracy: a ratio of estimates",
			query: "Claim accuracy (Prometheus) / Claim accuracy per service and operation C",
			want:  map[string]string{`{errorownership_operation="GET /b", service_name="b"}`: "0.75"},
		},
		{
			name:  "failed requests over the range, both methods",
			query: "Claim accuracy (Prometheus) / Claim accuracy per service and operation A",
			want:  map[string]string{`{errorownership_operation="GET /b", service_name="b"}`: "26400"},
		},
	}
	exprs := map[string]string{}
	for _, q := range promQueries(t) {
		exprs[q.name] = q.expr
	}
	// As Grafana runs them with every variable All: the regular
	// expression .*, and the range and rate interval of a ten-minute view.
	vars := strings.NewReplacer("$job", PromAllValue, "$service", PromAllValue, "$operation", PromAllValue,
		"$__range", "10m", "$__rate_interval", "10m")
	var b strings.Builder
	b.WriteString("rule_files: []\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n")
	for _, s := range input {
		// Sixty times the figures a minute: whole numbers a second, which
		// promtool compares exactly.
		fmt.Fprintf(&b, "      - series: '%s'\n        values: '0+%dx10'\n", s.selector, 60*s.perMin)
	}
	b.WriteString("    promql_expr_test:\n")
	for _, tc := range tests {
		expr, ok := exprs[tc.query]
		if !ok {
			t.Fatalf("%s: no query %q in json/", tc.name, tc.query)
		}
		fmt.Fprintf(&b, "      - expr: %q\n        eval_time: 10m\n        exp_samples:\n", vars.Replace(expr))
		for labels, value := range tc.want {
			fmt.Fprintf(&b, "          - labels: '%s'\n            value: %s\n", labels, value)
		}
	}
	file := filepath.Join(t.TempDir(), "sampled_test.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput() //nolint:gosec // G204: Debian's promtool on the test's own file
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s\nthe test file:\n%s", err, out, b.String())
	}
	t.Logf("promtool test rules: %d queries as committed on counted and extrapolated series: %s", len(tests), strings.TrimSpace(string(out)))
}

// promtoolBinary finds Debian's promtool; without it the test is skipped,
// and fails in CI, where .ci/run installs prometheus.
func promtoolBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if pgtest.InCI() {
			t.Fatal("promtool is not installed: apt-get install prometheus (.ci/run does)")
		}
		t.Skip("promtool is not installed: apt-get install prometheus")
	}
	return p
}
