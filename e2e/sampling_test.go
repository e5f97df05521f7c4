// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/e2e/scaleout"
	"github.com/errorownership/errorownership/e2e/shopapp/truth"
	"github.com/errorownership/errorownership/internal/otlpfile"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
	"github.com/errorownership/errorownership/store/pgtest"
)

// sampledConfig is a collector that analyses what a sampler in front of
// it kept (%[7]s: the processors of the traces pipeline), writing to a
// store, with healthcheckv2 showing the processor's status: %[1]s the
// health_check address, %[2]s healthcheckv2's, %[3]s the OTLP/HTTP address,
// %[4]s the store's DSN, %[5]s the file the kept spans go to, %[6]s the
// telemetry section, %[8]s the sampler's mode and %[9]v its percentage.
const sampledConfig = healthExtensions + `  errorownership_store:
    dsn: '%[4]s'
    bucket: 1s
    model_refresh: 1s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %[3]s
processors:
  probabilistic_sampler:
    mode: %[8]s
    sampling_percentage: %[9]v
  errorownership:
    decision_wait: 1s
    flush_interval: 1s
    store: errorownership_store
exporters:
  file:
    path: %[5]s
    format: json
service:
  extensions: [health_check, healthcheckv2, errorownership_store]
%[6]s
  pipelines:
    traces:
      receivers: [otlp]
      processors: [%[7]s]
      exporters: [file]
`

// shopVerdicts are the verdicts the shop's services must get, by what they
// know of each request they served.
var shopVerdicts = []string{"own", "propagated", "coincidental"}

// verdictOf is the verdict of a request the service role served, "" when
// it did not fail: checkout tolerates recommendations (coincidental when
// only they failed), needs payments, and frontend needs checkout.
func verdictOf(role string, r truth.Record) string {
	failed := r.Status >= 500 || (role == "recommendations" && r.Status != 0)
	if !failed {
		return ""
	}
	for _, f := range r.Failed {
		if f == "payments" || f == "checkout" {
			return "propagated"
		}
	}
	if len(r.Failed) > 0 {
		return "coincidental"
	}
	return "own"
}

// shopCapture is one unsampled run of the shop: every span, as the
// collector's file exporter wrote them, and what each service knows of each
// request it served, by trace.
type shopCapture struct {
	batches []ptrace.Traces
	// traces holds, by trace ID, per service the requests served and the
	// failed ones by verdict.
	traces map[pcommon.TraceID]*traceTruth
	roots  int
}

type traceTruth struct {
	served   map[string]int
	verdicts map[string]map[string]int // service → verdict → requests
}

// captureShop runs the shop unsampled, wired as TestShopEndToEnd wires it
// but for checkout's own faults, and drives n root requests. Checkout fails
// on its own in 4 % of requests, not 10 %: that is the rate at which its
// requests fail when recommendations failed alone, and the 1 % runs learn
// the edge from about a hundred such traces, whose 95 % Wilson interval
// must stay below fail_open's 0.2. At 10 % it did in five runs of six.
func captureShop(t *testing.T, collectorBin, shopBin string, n int) *shopCapture {
	t.Helper()
	dir := t.TempDir()
	hintsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	col := startCollectorWith(t, collectorBin, shopProcessor, shopHints(hintsAddr))
	hintsURL := "http://" + hintsAddr
	payments := startShop(t, shopBin, dir, col.httpAddr, "payments", "-hints", hintsURL, "-fault", "0.3", "-seed", "11")
	recs := startShop(t, shopBin, dir, col.httpAddr, "recommendations", "-hints", hintsURL, "-fault", "0.35", "-seed", "12")
	checkout := startShop(t, shopBin, dir, col.httpAddr, "checkout", "-hints", hintsURL, "-fault", "0.04", "-seed", "13",
		"-payments", "http://"+payments.addr, "-recommendations", recs.addr)
	frontend := startShop(t, shopBin, dir, col.httpAddr, "frontend", "-hints", hintsURL, "-fault", "0.05", "-seed", "14",
		"-checkout", "http://"+checkout.addr)
	drive(t, frontend.addr, n, 8, 0)
	services := map[string]*shopService{"frontend": frontend, "checkout": checkout, "payments": payments, "recommendations": recs}
	for _, s := range services {
		s.stop(t)
	}
	time.Sleep(2 * time.Second) // the last spans reach the file exporter
	_, err := col.Terminate(time.Minute)
	require.NoError(t, err)

	c := &shopCapture{traces: map[pcommon.TraceID]*traceTruth{}}
	require.NoError(t, otlpfile.ReadFile(col.outFile, func(td ptrace.Traces) { c.batches = append(c.batches, td) }))
	for role, s := range services {
		for _, r := range s.records(t) {
			raw, err := hex.DecodeString(r.TraceID)
			require.NoError(t, err)
			id := pcommon.TraceID(raw)
			tt := c.traces[id]
			if tt == nil {
				tt = &traceTruth{served: map[string]int{}, verdicts: map[string]map[string]int{}}
				c.traces[id] = tt
			}
			tt.served[role]++
			if role == "frontend" {
				c.roots++
			}
			if v := verdictOf(role, r); v != "" {
				if tt.verdicts[role] == nil {
					tt.verdicts[role] = map[string]int{}
				}
				tt.verdicts[role][v]++
			}
		}
	}
	require.Equal(t, n, c.roots, "every root request recorded")
	return c
}

// copyID is trace id in copy k of a capture replayed several times: a new
// random ID, as new traffic of the same shape would have.
func copyID(id pcommon.TraceID, k int) pcommon.TraceID {
	if k == 0 {
		return id
	}
	h := sha256.Sum256(append(id[:], byte(k), byte(k>>8)))
	return pcommon.TraceID(h[:16])
}

// replay posts copies of the capture's batches to the collector at addr,
// each copy with its own trace IDs, keeping only the traces keep accepts
// (nil: all) and their tracestate as it is.
func (c *shopCapture) replay(t *testing.T, col *collector, copies int, keep func(pcommon.TraceID) bool) {
	t.Helper()
	for k := range copies {
		for _, b := range c.batches {
			td := ptrace.NewTraces()
			b.CopyTo(td)
			td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
				rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
					ss.Spans().RemoveIf(func(s ptrace.Span) bool {
						if keep != nil && !keep(s.TraceID()) {
							return true
						}
						s.SetTraceID(copyID(s.TraceID(), k))
						return false
					})
					return ss.Spans().Len() == 0
				})
				return rs.ScopeSpans().Len() == 0
			})
			if td.SpanCount() > 0 {
				col.post(t, td)
			}
		}
	}
}

// startSampled starts the collector of sampledConfig with processors, a
// store of its own, and returns it with the store's DSN and healthcheckv2's
// status URL.
func startSampled(t *testing.T, bin, mode string, percent float64, processors string) (*collector, string, string) {
	t.Helper()
	dsn := pgtest.Start(t).DSN()
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", freePort(t)) }
	healthAddr, statusAddr, metricsPort := addr(), addr(), freePort(t)
	c := &collector{httpAddr: addr(), outFile: filepath.Join(t.TempDir(), "kept.json")}
	config := fmt.Sprintf(sampledConfig, healthAddr, statusAddr, c.httpAddr, dsn, c.outFile,
		scaleout.TelemetrySection(metricsPort), processors, mode, percent)
	c.Process = startConfigured(t, bin, config, healthAddr, fmt.Sprintf("127.0.0.1:%d", metricsPort))
	return c, dsn, "http://" + statusAddr + "/health/status?verbose"
}

// finish waits until the collector has analysed and judged for good every
// trace it kept, then stops it, which writes the last bucket.
func finish(t *testing.T, col *collector) {
	t.Helper()
	// A counter has no series until it first counts: none held is 0.
	metric := func(name string) float64 {
		v, err := col.Metric(name)
		if err != nil {
			return 0
		}
		return v
	}
	require.Eventually(t, func() bool {
		traces, err := col.Metric("otelcol_processor_errorownership_buffer_traces")
		held := metric("otelcol_processor_errorownership_verdicts_held") - metric("otelcol_processor_errorownership_verdicts_rejudged")
		return err == nil && traces == 0 && held == 0
	}, 2*time.Minute, 200*time.Millisecond, "traces still buffered or verdicts held")
	_, err := col.Terminate(time.Minute)
	require.NoError(t, err)
}

// keptWeights reads the kept spans the collector wrote and returns each
// kept trace's adjusted count, from its spans' ot=th as the sampler wrote it.
func keptWeights(t *testing.T, file string) map[pcommon.TraceID]float64 {
	t.Helper()
	classes := map[pcommon.TraceID]dependencyanalysis.SamplingClass{}
	require.NoError(t, otlpfile.ReadFile(file, func(td ptrace.Traces) {
		forEachSpan(td, func(s ptrace.Span) {
			id := s.TraceID()
			classes[id] = dependencyanalysis.CombineSampling(classes[id], dependencyanalysis.SamplingOf(s.TraceState().AsRaw(), id, 0))
		})
	}))
	out := make(map[pcommon.TraceID]float64, len(classes))
	for id, c := range classes {
		require.Equal(t, dependencyanalysis.SamplingExtrapolated, c.Method(), "every kept span carries ot=th")
		out[id] = c.Weight()
	}
	return out
}

// storeVerdicts reads the store's estimated and raw verdicts per service.
func storeVerdicts(t *testing.T, dsn string) (est map[string]map[string]float64, raw map[string]map[string]int64) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `
		SELECT service,
		       sum(coalesce(verdict_own_est, verdict_own)), sum(coalesce(verdict_propagated_est, verdict_propagated)),
		       sum(coalesce(verdict_coincidental_est, verdict_coincidental)),
		       sum(verdict_own), sum(verdict_propagated), sum(verdict_coincidental)
		FROM operation_stats GROUP BY service`)
	require.NoError(t, err)
	est, raw = map[string]map[string]float64{}, map[string]map[string]int64{}
	for rows.Next() {
		var svc string
		var e [3]float64
		var r [3]int64
		require.NoError(t, rows.Scan(&svc, &e[0], &e[1], &e[2], &r[0], &r[1], &r[2]))
		est[svc], raw[svc] = map[string]float64{}, map[string]int64{}
		for i, v := range shopVerdicts {
			est[svc][v], raw[svc][v] = e[i], r[i]
		}
	}
	require.NoError(t, rows.Err())
	return est, raw
}

// servedPerRoot reads the store's estimated requests served per root
// request by service, under the frontend's root operation.
func servedPerRoot(t *testing.T, dsn string) map[string]float64 {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var roots float64
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT coalesce(sum(coalesce(requests_est, requests)), 0) FROM root_stats WHERE root_service = 'frontend'`).Scan(&roots))
	require.Positive(t, roots)
	rows, err := conn.Query(context.Background(),
		`SELECT service, sum(coalesce(served_est, served)) FROM depth_stats WHERE root_service = 'frontend' GROUP BY service`)
	require.NoError(t, err)
	out := map[string]float64{}
	for rows.Next() {
		var svc string
		var served float64
		require.NoError(t, rows.Scan(&svc, &served))
		out[svc] = served / roots
	}
	require.NoError(t, rows.Err())
	return out
}

// z99 is the normal quantile of the 99 % intervals the test checks,
// taken for the test's whole family of about 40 intervals at once
// (Bonferroni: two-sided 1 − 0.01/40), so that the test as a whole fails
// by chance once in a hundred runs, not each of its checks.
const z99 = 3.66

// TestSampledFleet replays one unsampled run of the shop, its services'
// own records the truth, into the built collector with contrib's
// probabilistic_sampler in front of the processor, at 10 % and at 1 %, in
// both of the sampler's modes that write the threshold (ot=th). The store's
// estimated verdicts per service equal the kept traces' truth weighed by
// their adjusted counts and lie within the 99 % interval of the services'
// own counts; the requests served per root request are the services'; the
// tolerated edge is learned fail-open. The same run with every error kept
// and a tenth of the rest, no threshold written — a tail sampler's sample —
// is counted, not extrapolated, and the processor's status says so.
func TestSampledFleet(t *testing.T) {
	bin := buildCollector(t)
	capture := captureShop(t, bin, buildShop(t), 3000)

	// The services' own counts per copy of the capture, and the requests
	// served per root request.
	type key struct{ service, verdict string }
	truthOf := func(ids map[pcommon.TraceID]int, weigh func(pcommon.TraceID, int) float64) (sum map[key]float64, sq map[key]float64) {
		sum, sq = map[key]float64{}, map[key]float64{}
		for id, k := range ids {
			tt := capture.traces[id]
			if tt == nil {
				continue
			}
			w := weigh(id, k)
			for svc, vs := range tt.verdicts {
				for v, n := range vs {
					sum[key{svc, v}] += w * float64(n)
					sq[key{svc, v}] += float64(n * n)
				}
			}
		}
		return sum, sq
	}
	served := map[string]int{}
	for _, tt := range capture.traces {
		for svc, n := range tt.served {
			served[svc] += n
		}
	}

	for _, c := range []struct {
		mode    string
		percent float64
		copies  int
	}{
		// The copies give the 1 % runs enough kept traces to learn the
		// tolerated edge: about 3000 × 20 × 1 % = 600 kept, of which
		// min_samples (20) need recommendations to fail alone; a fifth
		// do. At 10 %, 1,500 kept traces put ±5 % of the requests served
		// per root request at about 4.5 standard errors.
		{"proportional", 10, 5},
		{"equalizing", 10, 5},
		{"proportional", 1, 20},
		{"equalizing", 1, 20},
	} {
		t.Run(fmt.Sprintf("%s %v%%", c.mode, c.percent), func(t *testing.T) {
			col, dsn, _ := startSampled(t, bin, c.mode, c.percent, "probabilistic_sampler, errorownership")
			capture.replay(t, col, c.copies, nil)
			finish(t, col)

			// The kept traces, by their original ID and copy.
			weights := keptWeights(t, col.outFile)
			require.NotEmpty(t, weights)
			byOrig := map[pcommon.TraceID]int{}
			kept := map[pcommon.TraceID]float64{} // original ID (copy k folded in the sum) → Σ weights
			for id := range capture.traces {
				for k := range c.copies {
					if w, ok := weights[copyID(id, k)]; ok {
						kept[id] += w
						byOrig[id]++
					}
				}
			}
			wantEst, _ := truthOf(byOrig, func(id pcommon.TraceID, _ int) float64 { return kept[id] })
			// All traffic: every copy of every trace, once each.
			all := map[pcommon.TraceID]int{}
			for id := range capture.traces {
				all[id] = c.copies
			}
			wantAll, sq := truthOf(all, func(_ pcommon.TraceID, n int) float64 { return float64(n) })
			w := 100 / c.percent // about the adjusted count of every kept trace

			est, raw := storeVerdicts(t, dsn)
			for _, svc := range []string{"frontend", "checkout", "payments", "recommendations"} {
				for _, v := range shopVerdicts {
					k := key{svc, v}
					got := est[svc][v]
					t.Logf("%s %s: store %.1f (raw %d), kept traces weighed %.1f, all traffic %.0f",
						svc, v, got, raw[svc][v], wantEst[k], wantAll[k])
					assert.InDelta(t, wantEst[k], got, 1e-6*max(1, wantEst[k]), "%s %s: the kept traces weighed", svc, v)
					// A trace holds several such requests when retries
					// repeat them: its requests are kept or dropped together.
					bound := z99 * math.Sqrt((w-1)*sq[k]*float64(c.copies))
					assert.InDelta(t, wantAll[k], got, bound, "%s %s: within the 99 %% interval of the traffic (for the family)", svc, v)
				}
			}

			// Requests served per root request, against the services' own
			// counts: ±5 % at 10 %, the ratio's 99 % interval at 1 %.
			perRoot := servedPerRoot(t, dsn)
			for svc, n := range served {
				want := float64(n) / float64(capture.roots)
				var dev float64 // Σ over traces of (served − want)², a trace one root
				for _, tt := range capture.traces {
					if tt.served["frontend"] == 0 {
						continue
					}
					d := float64(tt.served[svc]) - want*float64(tt.served["frontend"])
					dev += d * d
				}
				bound := z99 * math.Sqrt((w-1)*dev*float64(c.copies)) / float64(capture.roots*c.copies)
				if c.percent == 10 {
					bound = 0.05 * want
				}
				bound = max(bound, 1e-9) // frontend serves one a root, exactly
				t.Logf("%s served per root request: store %.3f, services %.3f (±%.3f)", svc, perRoot[svc], want, bound)
				assert.InDelta(t, want, perRoot[svc], bound, "%s: requests served per root request", svc)
			}

			// The tolerated edge is learned from the kept traces.
			st, err := store.OpenDSN(context.Background(), dsn)
			require.NoError(t, err)
			defer st.Close()
			cfg := dependencyanalysis.DefaultConfig().EdgeModel
			edges, err := st.EdgesFor(context.Background(), "checkout", time.Now().Add(-store.ModelWindow(cfg.HalfLife)), cfg.HalfLife, cfg)
			require.NoError(t, err)
			modes := map[string]ownership.Mode{}
			for _, e := range edges {
				modes[e.PeerService] = e.Mode
				t.Logf("checkout > %s: %s from %.0f traces in which the call failed alone (weighing %.0f), p in [%.3f, %.3f]",
					e.PeerService, e.Mode, e.Counts.Samples, e.Counts.Failed, e.Lower, e.Upper)
			}
			assert.Equal(t, ownership.ModeFailOpen, modes["recommendations"], "the tolerated edge, from %d kept traces", len(weights))
			assert.Equal(t, ownership.ModeFailClose, modes["payments"])
		})
	}

	t.Run("errors kept, a tenth of the rest, no threshold", func(t *testing.T) {
		// What a tail sampler that keeps every error and 10 % of the rest
		// sends on: the analysis after it cannot weigh the traces.
		failed := map[pcommon.TraceID]bool{}
		for id, tt := range capture.traces {
			failed[id] = len(tt.verdicts) > 0
		}
		keep := func(id pcommon.TraceID) bool { return failed[id] || id[15] < 26 } // 26/256 ≈ 10 %
		col, dsn, statusURL := startSampled(t, bin, "proportional", 100, "errorownership")
		capture.replay(t, col, 1, keep)

		var body string
		require.Eventually(t, func() bool {
			res, err := http.Get(statusURL) //nolint:gosec // G107: the status endpoint of the collector the test started
			if err != nil {
				return false
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			body = string(b)
			return strings.Contains(body, "sampling.warn_failed_share")
		}, time.Minute, 200*time.Millisecond, "the status never said the sample may not be representative; last %s", body)
		countedFailed, err := col.Metric("otelcol_processor_errorownership_traces_counted_failed")
		require.NoError(t, err)
		counted, err := col.Metric("otelcol_processor_errorownership_traces_sampling", `sampling_method="counted"`)
		require.NoError(t, err)
		extrapolated, _ := col.Metric("otelcol_processor_errorownership_traces_sampling", `sampling_method="extrapolated"`)
		t.Logf("status: %s", body)
		t.Logf("telemetry: %.0f counted traces, %.0f of them failed; %.0f extrapolated", counted, countedFailed, extrapolated)
		assert.Greater(t, countedFailed/counted, 0.5)
		assert.Zero(t, extrapolated)
		finish(t, col)

		conn, err := pgx.Connect(context.Background(), dsn)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		var traces, extrapolatedStored int64
		var servedRaw int64
		var servedEst float64
		require.NoError(t, conn.QueryRow(context.Background(),
			`SELECT coalesce(sum(traces), 0), coalesce(sum(extrapolated), 0) FROM trace_stats`).Scan(&traces, &extrapolatedStored))
		require.NoError(t, conn.QueryRow(context.Background(),
			`SELECT sum(served), sum(coalesce(served_est, served)) FROM operation_stats`).Scan(&servedRaw, &servedEst))
		keptN := 0
		for id := range capture.traces {
			if keep(id) {
				keptN++
			}
		}
		assert.EqualValues(t, keptN, traces, "every kept trace counted")
		assert.Zero(t, extrapolatedStored, "figures reported as counted")
		assert.InDelta(t, float64(servedRaw), servedEst, 1e-9, "counted: the estimate is the count")
	})
}
