// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/cmd/errorownership/simulation"
	"github.com/errorownership/errorownership/internal/testsupport/collectorproc"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store/pgtest"
)

// The jobs Prometheus scrapes the two connectors of
// testdata/otelcol-config-prometheus.yaml under.
const (
	jobBeside = "errorownership"
	jobAlone  = "errorownership-alone"
)

// The simulator's routes; operations are "GET " + route.
const (
	retryRoute     = "/chain/retry_every_hop"
	ownershipRoute = "/chain/ownership"
	checkoutRoute  = "/checkout"
)

// TestPrometheusDashboards runs testdata/otelcol-config-prometheus.yaml, as
// the README has users run it, with the built collector: the processor
// writing to PostgreSQL, the errorownership connector beside it and a
// second one analysing the spans itself, each to a prometheus exporter,
// which a real Prometheus server scrapes (exemplar storage on). The
// simulator's services send their spans over OTLP: the chain of
// docs/design.md §1 under one retry at every hop and under ownership, and
// the checkout scenario until its tolerated dependency is learned and again
// with the hints. Then every PromQL query of the Prometheus dashboards
// runs as Grafana would run it: the depth table gives 1, 2, 4, 8, 8, 8, 8
// and 1.00 above, 1.10 below the failing service, the store's figures; the
// coincidental counts are the store's; the exemplars are the store's
// audited traces. Prometheus evaluates the committed rules
// (dashboards/rules) on a shorter clock: the storm alerts fire for the
// chain under one retry at every hop, for every service serving 1.5 or more
// requests per root request, and for no other root operation.
func TestPrometheusDashboards(t *testing.T) {
	pgtest.RequireBinaries(t)
	promBin := prometheusBinary(t)
	bin := buildCollector(t)
	components, err := exec.Command(bin, "components").Output() //nolint:gosec // G204: the collector the test built
	require.NoError(t, err)
	_, connectors, _ := strings.Cut(string(components), "\nconnectors:\n")
	require.Contains(t, connectors, "name: errorownership\n", "the connector in components")

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dsn := pgtest.Start(t).DSN()
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", freePort(t)) }
	httpAddr, hintsAddr, healthAddr := addr(), addr(), addr()
	promBeside, promAlone := addr(), addr()
	metricsPort := freePort(t)
	for k, v := range map[string]string{
		"ERROROWNERSHIP_DSN": dsn, "HEALTH_ENDPOINT": healthAddr, "HINTS_ENDPOINT": hintsAddr,
		"OTLP_GRPC_ENDPOINT": addr(), "OTLP_HTTP_ENDPOINT": httpAddr,
		"PROMETHEUS_ENDPOINT": promBeside, "PROMETHEUS_ALONE_ENDPOINT": promAlone,
		"METRICS_HOST": "127.0.0.1", "METRICS_PORT": strconv.Itoa(metricsPort),
		// As the dashboards' simulator run (dashboards/internal/simtest): a
		// callee's spans may come a second or two after its caller's.
		"DECISION_WAIT": "2s", "FLUSH_INTERVAL": "1s",
		// Longer than Prometheus' scrape interval, so that every state of
		// the exporter is scraped, a new series' first 0 included.
		"METRICS_FLUSH_INTERVAL": "2s",
	} {
		t.Setenv(k, v)
	}
	startCtx, startCancel := context.WithTimeout(ctx, 30*time.Second)
	defer startCancel()
	col, err := collectorproc.Start(startCtx, bin, collectorproc.Options{
		Name: "collector", HealthAddr: healthAddr, MetricsAddr: fmt.Sprintf("127.0.0.1:%d", metricsPort),
		Configs: []string{filepath.Join(repoRoot, "testdata", "otelcol-config-prometheus.yaml"),
			// The hints are read back from the store every second, not ten.
			"yaml:extensions::errorownership_store::model_refresh: 1s",
			// A verdict held while its edge is learned is in the store
			// provisionally, and in the connector's counters only once it
			// is final (a counter never goes down): the two agree once
			// nothing is held, after 3s here rather than 10m.
			"yaml:processors::errorownership::rejudge::max_age: 3s",
			"yaml:connectors::errorownership/alone::rejudge::max_age: 3s"},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		col.Kill()
		if t.Failed() {
			t.Logf("collector log (end):\n%s", tail(col.Log(), 16<<10))
		}
	})
	prom := startPrometheus(t, promBin, map[string]string{jobBeside: promBeside, jobAlone: promAlone}, shortRules(t))

	begin := time.Now()
	runs := runSimulator(t, ctx, "http://"+httpAddr+"/v1/traces", "http://"+hintsAddr)
	took := time.Since(begin)

	db, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer db.Close(ctx)
	// The store settles once held verdicts are judged and the last
	// buckets written; then Prometheus, a scrape behind the exporter,
	// which is an emission behind the processor, holds the same figures.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Zero(ct, heldNow(ct, col), "verdicts held, against those judged again")
	}, time.Minute, 200*time.Millisecond)
	stored := settledVerdicts(t, ctx, db)
	require.Positive(t, stored[[3]string{"checkout", "GET " + checkoutRoute, "coincidental"}], "coincidental errors of checkout in the store")
	var scraped map[[3]string]float64
	require.Eventually(t, func() bool {
		scraped = map[[3]string]float64{}
		for _, s := range prom.query(t, `sum by (service_name, errorownership_operation, errorownership_verdict) (errorownership_requests_failed_total{job="`+jobBeside+`"})`, time.Now()) {
			scraped[[3]string{s.Metric["service_name"], s.Metric["errorownership_operation"], s.Metric["errorownership_verdict"]}] = s.Value
		}
		return equalCounts(stored, scraped)
	}, time.Minute, 500*time.Millisecond, "Prometheus never held the store's verdicts")
	// The dashboards' time range ends at the last scrape: increase() over
	// it then needs no extrapolation, and gives the counts themselves.
	end := prom.lastScrape(t, jobBeside)
	r := promRange{from: begin.Add(-time.Minute), to: end, scrape: 500 * time.Millisecond}
	t.Logf("simulator %v; store and Prometheus agree %v after it", took.Round(time.Second), time.Since(begin.Add(took)).Round(time.Second))

	dashboards := loadPromDashboards(t)
	retryOp, ownOp := "GET "+retryRoute, "GET "+ownershipRoute
	scenarios := []promScenario{
		{name: "All"},
		{name: "the connector beside the processor", selected: map[string][]string{"job": {jobBeside}}},
		{name: "the connector alone", selected: map[string][]string{"job": {jobAlone}}},
		{name: "retry every hop, beside", selected: map[string][]string{"job": {jobBeside}, "operation": {retryOp}}},
		{name: "retry every hop, alone", selected: map[string][]string{"job": {jobAlone}, "operation": {retryOp}}},
		{name: "ownership, beside", selected: map[string][]string{"job": {jobBeside}, "operation": {ownOp}}},
		{name: "several services", selected: map[string][]string{"job": {jobBeside}, "service": {"a", "checkout", "d"}}},
		{name: "checkout", selected: map[string][]string{"job": {jobBeside}, "service": {"checkout"}}},
	}
	results := map[string]map[string]*promResult{}
	hits := map[string]int{}
	for _, sc := range scenarios {
		results[sc.name] = map[string]*promResult{}
		for _, d := range dashboards {
			vars := prom.variables(t, d, sc, r)
			for _, q := range d.queries() {
				expr := interpolatePromQL(q.expr, vars, r)
				res := prom.run(t, q, expr, r)
				results[sc.name][q.String()] = res
				hits[q.String()] += res.rows
			}
		}
	}
	for _, d := range dashboards {
		for _, q := range d.queries() {
			assert.Positive(t, hits[q.String()], "%s returned nothing in any scenario", q)
		}
	}
	get := func(sc, q string) *promResult {
		t.Helper()
		res := results[sc][q]
		require.NotNil(t, res, "no query %s", q)
		return res
	}

	// The store's figures, as the demo and the PostgreSQL dashboards read them.
	storeServed := map[string]map[string]float64{}
	rows, err := db.Query(ctx, `SELECT d.root_operation, d.service, sum(d.served)::float8 / (SELECT sum(requests) FROM root_stats r WHERE r.root_operation = d.root_operation)
		FROM depth_stats d GROUP BY 1, 2`)
	require.NoError(t, err)
	for rows.Next() {
		var op, svc string
		var v float64
		require.NoError(t, rows.Scan(&op, &svc, &v))
		if storeServed[op] == nil {
			storeServed[op] = map[string]float64{}
		}
		storeServed[op][svc] = v
	}
	require.NoError(t, rows.Err())

	// The alerts, as the committed rules state them on a shorter clock:
	// the storm of retry every hop fires them, for every service the store
	// says served 1.5 or more requests per root request and for both
	// connectors; ownership's chain and the checkout runs leave them
	// silent.
	since := fmt.Sprintf("[%ds]", int(time.Since(begin).Seconds())+60)
	firing := func(alert string) map[string][]string {
		out := map[string][]string{}
		for _, s := range prom.query(t, `max_over_time(ALERTS{alertstate="firing", alertname="`+alert+`"}`+since+`)`, time.Now()) {
			op := s.Metric["errorownership_root_operation"]
			out[op] = append(out[op], s.Metric["job"]+" "+s.Metric["service_name"])
		}
		for _, v := range out {
			slices.Sort(v)
		}
		return out
	}
	var stormed []string
	for _, job := range []string{jobBeside, jobAlone} {
		for svc, v := range storeServed[retryOp] {
			if v >= 1.5 {
				stormed = append(stormed, job+" "+svc)
			}
		}
	}
	slices.Sort(stormed)
	for _, c := range []struct {
		alert string
		want  []string
	}{
		{"ErrorOwnershipRetryAmplification", stormed},
		{"ErrorOwnershipStormRadius", []string{jobBeside + " ", jobAlone + " "}},
	} {
		got := firing(c.alert)
		t.Logf("%s fired for %v", c.alert, got)
		want := slices.Clone(c.want)
		slices.Sort(want)
		assert.Equal(t, map[string][]string{retryOp: want}, got, "%s: firing by root operation", c.alert)
	}

	depthTable := "Retry amplification (Prometheus) / Requests served per root request, by depth A"
	for _, tc := range []struct {
		scenario, op string
		policy       simulation.Policy
	}{
		{"retry every hop, beside", retryOp, simulation.RetryEveryHop},
		{"retry every hop, alone", retryOp, simulation.RetryEveryHop},
		{"ownership, beside", ownOp, simulation.Ownership},
	} {
		t.Run("served per root request: "+tc.scenario, func(t *testing.T) {
			got := map[string]float64{}
			for _, s := range get(tc.scenario, depthTable).vector {
				require.Equal(t, tc.op, s.Metric["errorownership_root_operation"], "the root operation chosen")
				got[s.Metric["service_name"]] = s.Value
				assert.Equal(t, strconv.Itoa(slices.Index(simulation.ChainServices, s.Metric["service_name"])), s.Metric["errorownership_depth"], "%s's depth", s.Metric["service_name"])
			}
			var line []string
			for i, svc := range simulation.ChainServices {
				want, inStore := simulation.ChainTheory[tc.policy][i], storeServed[tc.op][svc]
				line = append(line, fmt.Sprintf("%s %.2f", svc, got[svc]))
				assert.InDelta(t, inStore, got[svc], 1e-9, "%s: PromQL %.4f Ƞ, the store %.4f", svc, got[svc], inStore)
				assert.InDelta(t, want, got[svc], 0.03*want, "%s: PromQL %.4f Ƞ, theory %.2f", svc, got[svc], want)
			}
			t.Logf("%s: %s", tc.scenario, strings.Join(line, ", "))
		})
	}

	t.Run("the storm radius is the store's", func(t *testing.T) {
		storeMax := map[string]int{}
		rows, err := db.Query(ctx, `SELECT root_operation, max(storm_radius_max) FROM root_stats GROUP BY 1`)
		require.NoError(t, err)
		for rows.Next() {
			var op string
			var n int
			require.NoError(t, rows.Scan(&op, &n))
			storeMax[op] = n
		}
		require.NoError(t, rows.Err())
		res := get("the connector beside the processor", "Retry amplification (Prometheus) / Retry-storm radius per root operation B")
		for _, s := range res.vector {
			op := s.Metric["errorownership_root_operation"]
			assert.Equal(t, float64(storeMax[op]), s.Value, "radius max of %s", op)
		}
		assert.Equal(t, 3, storeMax[retryOp], "retry every hop: the failure's depth")
		assert.Equal(t, 1, storeMax[ownOp], "ownership: the hop next to the failure")
	})

	t.Run("the coincidental counts are the store's", func(t *testing.T) {
		got := map[[2]string]float64{}
		for _, s := range get("the connector beside the processor", "Coincidental errors (Prometheus) / Coincidental errors by service and operation A").vector {
			got[[2]string{s.Metric["service_name"], s.Metric["errorownership_operation"]}] += s.Value
		}
		want := map[[2]string]float64{}
		for k, n := range stored {
			if k[2] == "coincidental" {
				want[[2]string{k[0], k[1]}] = n
			}
		}
		assert.Equal(t, want, got)
		t.Logf("coincidental errors: PromQL %v, the store %v", got, want)
	})

	t.Run("exemplars link to the store's audited traces", func(t *testing.T) {
		audited := map[string]bool{}
		rows, err := db.Query(ctx, `SELECT DISTINCT trace_id FROM coincidental_audit`)
		require.NoError(t, err)
		for rows.Next() {
			var id string
			require.NoError(t, rows.Scan(&id))
			audited[id] = true
		}
		require.NoError(t, rows.Err())
		truth := map[string]bool{}
		for _, run := range runs {
			for id := range run.Truth {
				truth[id] = true
			}
		}
		vars := prom.variables(t, dashboardTitled(t, dashboards, "Coincidental errors (Prometheus)"), scenarios[1], r)
		for _, tc := range []struct {
			panel string
			in    map[string]bool
		}{
			{"Coincidental errors (Prometheus) / Coincidental errors over time, with their traces A", audited},
			{"Coincidental errors (Prometheus) / Propagated failures, with their traces A", truth},
		} {
			var q promQueryOf
			for _, x := range dashboardTitled(t, dashboards, "Coincidental errors (Prometheus)").queries() {
				if x.String() == tc.panel {
					q = x
				}
			}
			require.True(t, q.exemplar, "%s asks for exemplars", tc.panel)
			ids := prom.exemplarTraces(t, interpolatePromQL(q.expr, vars, r), r)
			require.NotEmpty(t, ids, "%s: no exemplars", tc.panel)
			for _, id := range ids {
				assert.True(t, tc.in[id], "%s: exemplar trace %s is not one the store audited / the simulator sent", tc.panel, id)
			}
			t.Logf("%s: %d exemplar traces, every one known", tc.panel, len(ids))
		}

		// A Prometheus scraping once a minute still finds them: a scrape of
		// each exporter a minute after the last span, 30 of the
		// connector's emissions later, shows exemplars of traces the
		// simulator sent on the propagated and coincidental series.
		time.Sleep(time.Until(begin.Add(took).Add(61 * time.Second)))
		for job, endpoint := range map[string]string{jobBeside: promBeside, jobAlone: promAlone} {
			found := scrapeExemplars(t, "http://"+endpoint+"/metrics")
			for _, verdict := range []string{"propagated", "coincidental"} {
				require.NotEmpty(t, found[verdict], "%s: no %s exemplar a minute after the last span", job, verdict)
				for _, id := range found[verdict] {
					assert.True(t, truth[id], "%s: %s exemplar trace %s is not one the simulator sent", job, verdict, id)
				}
			}
			t.Logf("%s, scraped %v after the last span: exemplars %v", job, time.Since(begin.Add(took)).Round(time.Second), found)
		}
	})
}

// scrapeExemplars scrapes a prometheus exporter as Prometheus does with
// exemplar storage on (OpenMetrics) and returns the exemplars' trace IDs
// on errorownership_requests_failed_total, by verdict.
func scrapeExemplars(t *testing.T, url string) map[string][]string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	verdictRe := regexp.MustCompile(`errorownership_verdict="([a-z]+)"`)
	traceRe := regexp.MustCompile(`trace_id="([0-9a-f]{32})"`)
	out := map[string][]string{}
	for line := range strings.Lines(string(body)) {
		series, exemplar, ok := strings.Cut(line, " # {")
		if !ok || !strings.HasPrefix(series, "errorownership_requests_failed_total{") {
			continue
		}
		v, id := verdictRe.FindStringSubmatch(series), traceRe.FindStringSubmatch(exemplar)
		require.NotNil(t, v, "no verdict in %q", line)
		require.NotNil(t, id, "no trace ID in the exemplar of %q", line)
		out[v[1]] = append(out[v[1]], id[1])
	}
	return out
}

// prometheusBinary finds Debian's prometheus; without it the test is
// skipped, and fails in CI (CI=true), where .ci/run installs it.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("prometheus")
	if err != nil {
		if pgtest.InCI() {
			t.Fatal("prometheus is not installed: apt-get install prometheus (.ci/run does)")
		}
		t.Skip("prometheus is not installed: apt-get install prometheus")
	}
	return p
}

// promServer is a Prometheus server the test started.
type promServer struct {
	base string
}

// startPrometheus starts prometheus with a configuration of its own, which
// scrapes each job's target every 500ms, storage in a temporary directory
// and exemplar storage on; it is stopped when the test ends.
func startPrometheus(t *testing.T, bin string, jobs map[string]string, ruleFiles ...string) *promServer {
	t.Helper()
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\n  evaluation_interval: 500ms\n")
	if len(ruleFiles) > 0 {
		cfg.WriteString("rule_files:\n")
		for _, f := range ruleFiles {
			fmt.Fprintf(&cfg, "  - %q\n", f)
		}
	}
	cfg.WriteString("scrape_configs:\n")
	for job, target := range jobs {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n      - targets: [%q]\n", job, target)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o600))
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	var log bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), //nolint:gosec // G204: Debian's prometheus, on the test's own files
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+listen,
		"--enable-feature=exemplar-storage", "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		// Its exit status says nothing the log does not.
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus log (end):\n%s", tail(log.String(), 8<<10))
		}
	})
	p := &promServer{base: "http://" + listen}
	require.Eventually(t, func() bool {
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "prometheus never got ready: %s", log.String())
	return p
}

// shortRules writes the committed rules (dashboards/rules) on the test's
// clock: rates over 10 s rather than 5 m and alerts firing after 2 s of
// their condition, not 5 or 30 m; thresholds and expressions as they are.
func shortRules(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "dashboards", "rules", "errorownership.rules.yaml"))
	require.NoError(t, err)
	rules := string(b)
	for _, r := range [][2]string{{"[5m]", "[10s]"}, {"for: 5m", "for: 2s"}, {"for: 30m", "for: 2s"}} {
		require.Contains(t, rules, r[0], "the rules' durations changed: update shortRules")
		rules = strings.ReplaceAll(rules, r[0], r[1])
	}
	f := filepath.Join(t.TempDir(), "errorownership.rules.yaml")
	require.NoError(t, os.WriteFile(f, []byte(rules), 0o600)) //nolint:gosec // G703: the test's own temporary directory
	return f
}

// promSample is one series of a vector, or of a matrix with its values.
type promSample struct {
	Metric map[string]string
	Value  float64
	Values []float64
}

// api calls Prometheus' HTTP API and decodes its data.
func (p *promServer) api(t *testing.T, path string, params url.Values, data any) {
	t.Helper()
	resp, err := http.PostForm(p.base+path, params)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Equal(t, "success", body.Status, "%s %v: %s", path, params, body.Error)
	require.NoError(t, json.Unmarshal(body.Data, data))
}

// query runs an instant query at at.
func (p *promServer) query(t *testing.T, expr string, at time.Time) []promSample {
	t.Helper()
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	p.api(t, "/api/v1/query", url.Values{"query": {expr}, "time": {promTime(at)}}, &data)
	require.Equal(t, "vector", data.ResultType, expr)
	var out []promSample
	for _, r := range data.Result {
		out = append(out, promSample{Metric: r.Metric, Value: promValue(t, r.Value[1])})
	}
	return out
}

// queryRange runs a range query.
func (p *promServer) queryRange(t *testing.T, expr string, r promRange) []promSample {
	t.Helper()
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	p.api(t, "/api/v1/query_range", url.Values{"query": {expr}, "start": {promTime(r.from)}, "end": {promTime(r.to)},
		"step": {strconv.FormatFloat(r.interval().Seconds(), 'f', -1, 64)}}, &data)
	var out []promSample
	for _, s := range data.Result {
		ps := promSample{Metric: s.Metric}
		for _, v := range s.Values {
			ps.Values = append(ps.Values, promValue(t, v[1]))
		}
		out = append(out, ps)
	}
	return out
}

// exemplarTraces returns the trace IDs of the exemplars of expr's series
// over the range, as Grafana asks for them for a panel with exemplars.
func (p *promServer) exemplarTraces(t *testing.T, expr string, r promRange) []string {
	t.Helper()
	var data []struct {
		Exemplars []struct {
			Labels map[string]string `json:"labels"`
		} `json:"exemplars"`
	}
	p.api(t, "/api/v1/query_exemplars", url.Values{"query": {expr}, "start": {promTime(r.from)}, "end": {promTime(r.to)}}, &data)
	var ids []string
	for _, s := range data {
		for _, e := range s.Exemplars {
			// trace_id: the prometheus exporter's name for an exemplar's
			// trace ID, which the data source provisioning links by.
			if id := e.Labels["trace_id"]; id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// lastScrape is the time of job's last scrape.
func (p *promServer) lastScrape(t *testing.T, job string) time.Time {
	t.Helper()
	s := p.query(t, `max(timestamp(up{job="`+job+`"}))`, time.Now())
	require.Len(t, s, 1)
	sec, frac := math.Modf(s[0].Value)
	return time.Unix(int64(sec), int64(math.Round(frac*1000))*int64(time.Millisecond))
}

func promTime(at time.Time) string {
	return strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)
}

func promValue(t *testing.T, v any) float64 {
	t.Helper()
	s, ok := v.(string)
	require.True(t, ok, "value %v", v)
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return f
}

// runSimulator runs what the dashboards' simulator run does
// (dashboards/internal/simtest): the chain under retry every hop and under
// ownership, the checkout scenario until checkout → recommendations is
// learned fail-open, then again with the hints.
func runSimulator(t *testing.T, ctx context.Context, otlp, hintsURL string) []*simulation.RunResult {
	t.Helper()
	var out []*simulation.RunResult
	run := func(top *simulation.Topology, p simulation.Policy, route string, n int, hints bool, addrs map[string]string) *simulation.RunResult {
		res, err := simulation.Run(ctx, simulation.RunConfig{Topology: top, Policy: p, Route: route, Hints: hints,
			HintsURL: hintsURL, OTLPEndpoint: otlp, Requests: n, Concurrency: 4,
			BudgetRatio: simulation.BudgetRatio, Seed: 1, Addrs: addrs})
		require.NoError(t, err, "%s %s", route, p)
		out = append(out, res)
		return res
	}
	run(simulation.Chain(), simulation.RetryEveryHop, retryRoute, 60, false, nil)
	run(simulation.Chain(), simulation.Ownership, ownershipRoute, 60, false, nil)
	learning := run(simulation.Checkout(), simulation.Ownership, checkoutRoute, 1000, false, nil)
	require.Eventually(t, func() bool {
		resp, err := http.Get(hintsURL + ownership.HintsPath + "?service=checkout")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h ownership.Hints
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&h) == nil &&
			slices.ContainsFunc(h.Edges, func(e ownership.HintEdge) bool {
				return e.PeerService == "recommendations" && e.Mode == ownership.ModeFailOpen
			})
	}, 45*time.Second, 250*time.Millisecond, "the collector never learned checkout → recommendations fail-open")
	run(simulation.Checkout(), simulation.Ownership, checkoutRoute, 500, true, learning.Addrs)
	return out
}

// settledVerdicts waits until the store's verdicts stop changing and
// returns them by service, operation and verdict.
func settledVerdicts(t *testing.T, ctx context.Context, db *pgx.Conn) map[[3]string]float64 {
	t.Helper()
	read := func() map[[3]string]float64 {
		out := map[[3]string]float64{}
		rows, err := db.Query(ctx, `SELECT service, operation, sum(verdict_own), sum(verdict_propagated), sum(verdict_coincidental)
			FROM operation_stats GROUP BY 1, 2`)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var svc, op string
			var own, propagated, coincidental float64
			require.NoError(t, rows.Scan(&svc, &op, &own, &propagated, &coincidental))
			for v, n := range map[string]float64{"own": own, "propagated": propagated, "coincidental": coincidental} {
				if n > 0 {
					out[[3]string{svc, op, v}] = n
				}
			}
		}
		require.NoError(t, rows.Err())
		return out
	}
	var last map[[3]string]float64
	stable := 0
	require.Eventually(t, func() bool {
		now := read()
		if len(now) > 0 && equalCounts(now, last) {
			stable++
		} else {
			stable = 0
		}
		last = now
		return stable >= 3
	}, 90*time.Second, time.Second, "the store's verdicts kept changing")
	return last
}

func equalCounts(a, b map[[3]string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The Prometheus dashboards as committed, read as Grafana reads them.
type promDashboard struct {
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Type       string `json:"type"`
			Name       string `json:"name"`
			Query      any    `json:"query"`
			Multi      bool   `json:"multi"`
			IncludeAll bool   `json:"includeAll"`
			AllValue   string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			RefID    string `json:"refId"`
			Expr     string `json:"expr"`
			Instant  bool   `json:"instant"`
			Exemplar bool   `json:"exemplar"`
		} `json:"targets"`
	} `json:"panels"`
}

// promQueryOf is one panel query of a dashboard.
type promQueryOf struct {
	dashboard, panel, refID, expr string
	instant, exemplar             bool
}

func (q promQueryOf) String() string { return q.dashboard + " / " + q.panel + " " + q.refID }

func (d promDashboard) queries() []promQueryOf {
	var out []promQueryOf
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			out = append(out, promQueryOf{d.Title, p.Title, q.RefID, q.Expr, q.Instant, q.Exemplar})
		}
	}
	return out
}

func loadPromDashboards(t *testing.T) []promDashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "dashboards", "json", "prometheus-*.json"))
	require.NoError(t, err)
	require.Len(t, files, 4, "the Prometheus dashboards")
	var out []promDashboard
	for _, f := range files {
		b, err := os.ReadFile(f) //nolint:gosec // G304: a committed dashboard of the repository
		require.NoError(t, err)
		var d promDashboard
		require.NoError(t, json.Unmarshal(b, &d), f)
		out = append(out, d)
	}
	return out
}

func dashboardTitled(t *testing.T, all []promDashboard, title string) promDashboard {
	t.Helper()
	for _, d := range all {
		if d.Title == title {
			return d
		}
	}
	t.Fatalf("no dashboard %q", title)
	return promDashboard{}
}

// promScenario selects the dashboards' variables by name; unselected
// ones are All.
type promScenario struct {
	name     string
	selected map[string][]string
}

// promRange is a dashboard's time range, and the data source's scrape
// interval, from which Grafana makes $__rate_interval.
type promRange struct {
	from, to time.Time
	scrape   time.Duration
}

// interval is $__interval: the range over a panel's 1000 points at most,
// and not below the scrape interval (the data source's min interval).
func (r promRange) interval() time.Duration {
	return max(r.to.Sub(r.from)/1000, r.scrape).Round(time.Millisecond)
}

// promVariable is a variable with its options and selection.
type promVariable struct {
	multi, includeAll bool
	allValue          string
	selected          []string // {"$__all"} for All
}

// variables resolves a dashboard's variables under a scenario, in order,
// as Grafana does: a label_values() query, with the variables before it
// replaced, asks Prometheus for the label's values.
func (p *promServer) variables(t *testing.T, d promDashboard, sc promScenario, r promRange) map[string]*promVariable {
	t.Helper()
	labelValues := regexp.MustCompile(`^label_values\((?:(.*),\s*)?(\w+)\)$`)
	vars := map[string]*promVariable{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		m := labelValues.FindStringSubmatch(q)
		require.NotNil(t, m, "%s: variable %s: %q is not label_values()", d.Title, v.Name, q)
		params := url.Values{"start": {promTime(r.from)}, "end": {promTime(r.to)}}
		if m[1] != "" {
			params.Set("match[]", interpolatePromQL(m[1], vars, r))
		}
		var options []string
		resp, err := http.Get(p.base + "/api/v1/label/" + m[2] + "/values?" + params.Encode())
		require.NoError(t, err)
		var body struct {
			Data []string `json:"data"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		resp.Body.Close()
		options = body.Data
		require.NotEmpty(t, options, "%s: variable %s has no options", d.Title, v.Name)
		pv := &promVariable{multi: v.Multi, includeAll: v.IncludeAll, allValue: v.AllValue, selected: []string{"$__all"}}
		if s, ok := sc.selected[v.Name]; ok {
			pv.selected = s
		}
		vars[v.Name] = pv
	}
	return vars
}

// promSpecialRegexEscape and promRegularEscape are the Prometheus data
// source's escapes of a variable's value (public/app/plugins/datasource/
// prometheus, datasource.ts): a multi-valued or All variable's values are
// regular expressions, escaped and joined by | in parentheses.
var promRegexSpecial = regexp.MustCompile(`[$^*{}\[\]'+?.()|]`)

func promSpecialRegexEscape(v string) string {
	return promRegexSpecial.ReplaceAllString(strings.ReplaceAll(v, `\`, `\\\\`), `\\$0`)
}

func promRegularEscape(v string) string {
	return strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), `'`, `\\'`)
}

var promVariableSyntax = regexp.MustCompile(`\$(\w+)|\$\{(\w+)\}`)

// interpolatePromQL replaces the variables and Grafana's interval
// variables in expr as Grafana does before it sends a query.
func interpolatePromQL(expr string, vars map[string]*promVariable, r promRange) string {
	interval := r.interval()
	rateInterval := max(interval+r.scrape, 4*r.scrape)
	rangeSeconds := int64(math.Ceil(r.to.Sub(r.from).Seconds()))
	scoped := map[string]string{
		"__range":         strconv.FormatInt(rangeSeconds, 10) + "s",
		"__range_s":       strconv.FormatInt(rangeSeconds, 10),
		"__interval":      strconv.FormatInt(interval.Milliseconds(), 10) + "ms",
		"__rate_interval": strconv.FormatInt(rateInterval.Milliseconds(), 10) + "ms",
	}
	return promVariableSyntax.ReplaceAllStringFunc(expr, func(match string) string {
		m := promVariableSyntax.FindStringSubmatch(match)
		name := m[1] + m[2]
		if s, ok := scoped[name]; ok {
			return s
		}
		v := vars[name]
		if v == nil {
			return match
		}
		if len(v.selected) == 1 && v.selected[0] == "$__all" {
			return v.allValue
		}
		if !v.multi && !v.includeAll {
			return promRegularEscape(v.selected[0])
		}
		escaped := make([]string, len(v.selected))
		for i, s := range v.selected {
			escaped[i] = promSpecialRegexEscape(s)
		}
		if len(escaped) == 1 {
			return escaped[0]
		}
		return "(" + strings.Join(escaped, "|") + ")"
	})
}

// promResult is what a panel's query returned: an instant query's vector,
// or how many series a range query's matrix had.
type promResult struct {
	vector []promSample
	rows   int
}

// run runs a panel's query as Grafana does: an instant query at the range's
// end for a table, a range query over it for a time series.
func (p *promServer) run(t *testing.T, q promQueryOf, expr string, r promRange) *promResult {
	t.Helper()
	if q.instant {
		v := p.query(t, expr, r.to)
		return &promResult{vector: v, rows: len(v)}
	}
	m := p.queryRange(t, expr, r)
	return &promResult{rows: len(m)}
}
