// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/e2e/shopapp/truth"
	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/internal/otlpfile"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store/pgtest"
)

// shopProcessor is the README's errorownership section, with the timings
// of a test that lasts seconds; shopStore the line that names the store
// (shopStoreExtension).
const (
	shopProcessor = `    decision_wait: 1s
    flush_interval: 1s
    hints_extension: errorownership_hints`
	shopStore = `
    store: errorownership_store`
)

// shopStoreExtension is the README's errorownership_store extension on
// dsn, with the timings of a test that lasts seconds.
func shopStoreExtension(dsn string) extension {
	return extension{id: "errorownership_store", config: fmt.Sprintf("    dsn: %q\n    bucket: 1s\n    model_refresh: 1s\n    audit_per_service_per_minute: 0", dsn)}
}

// shopHints is the README's errorownership_hints extension.
func shopHints(addr string) extension {
	return extension{id: "errorownership_hints", config: fmt.Sprintf("    endpoint: %s\n    ttl: 2s", addr)}
}

// shopService is one running shopapp process and the file it writes its
// truth to.
type shopService struct {
	*appService
	truth string
}

// buildShop builds the shop app once per test binary.
func buildShop(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "shopapp")
	out, err := exec.Command("go", "build", "-o", bin, "./shopapp").CombinedOutput() //nolint:gosec // G204: go build of the shop app into t.TempDir
	require.NoError(t, err, "building the shop app:\n%s", out)
	return bin
}

// startShop starts one service of the shop and waits until it listens.
func startShop(t *testing.T, bin, dir, otlp, role string, args ...string) *shopService {
	t.Helper()
	truthFile := filepath.Join(dir, role+".jsonl")
	argv := append([]string{bin, "-role", role, "-truth", truthFile}, args...)
	return &shopService{appService: startApp(t, role, otlp, argv), truth: truthFile}
}

// stop ends the service with SIGTERM, which makes it export its last spans.
func (s *shopService) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, s.terminate(t), "%s: %s", s.name, s.log)
}

// records reads the service's truth file, keyed by trace and span ID.
func (s *shopService) records(t *testing.T) map[string]truth.Record {
	t.Helper()
	f, err := os.Open(s.truth)
	require.NoError(t, err)
	defer f.Close()
	out := map[string]truth.Record{}
	dec := json.NewDecoder(f)
	for {
		var r truth.Record
		err := dec.Decode(&r)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		out[r.TraceID+"/"+r.SpanID] = r
	}
	return out
}

// drive sends n shop requests over conc connections and returns the trace
// IDs the frontend answered with.
func drive(t *testing.T, frontend string, n, conc int, first int) map[string]bool {
	t.Helper()
	var mu sync.Mutex
	traces := map[string]bool{}
	driveRoots(t, n, conc, func(i int) string { return fmt.Sprintf("http://%s/shop/%d", frontend, first+i) }, func(res *http.Response) {
		mu.Lock()
		traces[res.Header.Get(truth.TraceHeader)] = true
		mu.Unlock()
	})
	return traces
}

// TestShopEndToEnd runs an app of four services, wired exactly as the
// README's setup shows (otelhttp and the HTTP hooks, otelgrpc and the gRPC
// hooks, the hint client, nothing else), against the built collector with
// a store and the hints endpoint. checkout tolerates recommendations (gRPC)
// failing, and often fails through payments (HTTP) failing at the same
// time, which must not hide that the first edge is tolerated. Once the
// model is learned, checkout must claim its own failures that coincide
// with a recommendations failure, and the collector's verdicts must match
// what the services know happened.
func TestShopEndToEnd(t *testing.T) {
	collectorBin := buildCollector(t)
	shopBin := buildShop(t)
	t.Run("with a store", func(t *testing.T) { shopEndToEnd(t, collectorBin, shopBin, true) })
	t.Run("without a store", func(t *testing.T) { shopEndToEnd(t, collectorBin, shopBin, false) })
}

// shopEndToEnd runs the shop against the collector; without a store the
// hints extension serves the processor's own model, and only what the
// services did is checked.
func shopEndToEnd(t *testing.T, collectorBin, shopBin string, withStore bool) {
	dir := t.TempDir()
	section, dsn := shopProcessor, ""
	hintsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	exts := []extension{shopHints(hintsAddr)}
	if withStore {
		dsn = pgtest.Start(t).DSN()
		section += shopStore
		exts = append(exts, shopStoreExtension(dsn))
	}
	col := startCollectorWith(t, collectorBin, section, exts...)
	otlpAddr := col.httpAddr
	hintsURL := "http://" + hintsAddr

	// Fault rates per attempt: the hooks retry within a 10 % budget, so a
	// call fails less often than its callee.
	payments := startShop(t, shopBin, dir, otlpAddr, "payments", "-hints", hintsURL, "-fault", "0.3", "-seed", "1")
	recs := startShop(t, shopBin, dir, otlpAddr, "recommendations", "-hints", hintsURL, "-fault", "0.35", "-seed", "2")
	checkout := startShop(t, shopBin, dir, otlpAddr, "checkout", "-hints", hintsURL, "-fault", "0.1", "-seed", "3",
		"-payments", "http://"+payments.addr, "-recommendations", recs.addr)
	frontend := startShop(t, shopBin, dir, otlpAddr, "frontend", "-hints", hintsURL, "-fault", "0", "-seed", "4",
		"-checkout", "http://"+checkout.addr)

	// Learning: the collector sees the traffic and learns the edges.
	drive(t, frontend.addr, 2500, 8, 0)

	// The tolerated edge is learned fail-open and reaches checkout's hooks,
	// which know recommendations only by its address.
	h := hints.New(hintsURL, "checkout")
	var doc *ownership.Hints
	require.Eventually(t, func() bool {
		if _, err := h.Refresh(context.Background()); err != nil {
			return false
		}
		doc, _ = h.Hints()
		return h.Mode("GET /checkout/{id}", recs.addr, "shop.Recommendations/List") == ownership.ModeFailOpen
	}, time.Minute, 200*time.Millisecond, "recommendations never became fail_open in checkout's hints")
	peers := map[string]ownership.HintEdge{}
	for _, e := range doc.Edges {
		peers[e.PeerService] = e
	}
	require.Contains(t, peers, "recommendations", "edges are named by the callee's service.name")
	require.Contains(t, peers, "payments")
	assert.Contains(t, peers["recommendations"].PeerAddresses, recs.addr)
	assert.Contains(t, peers["payments"].PeerAddresses, payments.addr)
	assert.Equal(t, ownership.ModeFailClose, peers["payments"].Mode)
	// checkout's own hint client polls every ttl (2s): let it catch up, and
	// the collector's verdicts read the same model back (model_refresh 1s).
	time.Sleep(3 * time.Second)

	// Measured: the model is learned.
	measuredFrom := time.Now().UTC().Truncate(time.Second)
	measured := drive(t, frontend.addr, 3000, 8, 10_000)
	for _, s := range []*shopService{frontend, checkout, payments, recs} {
		s.stop(t) // exports every span
	}
	// decision_wait and a flush later everything is analysed and written;
	// a graceful stop of the collector writes the last bucket.
	time.Sleep(3 * time.Second)
	_, err := col.Terminate(time.Minute)
	require.NoError(t, err)

	// What happened, by checkout's request (its server span).
	type verdictCounts map[string]int
	want := verdictCounts{}
	coincidental := map[string]bool{}
	claimedCoincidental, total := 0, 0
	for key, r := range checkout.records(t) {
		if !measured[r.TraceID] || r.Status < 500 {
			continue
		}
		total++
		failedRecs, failedPayments := false, false
		for _, f := range r.Failed {
			failedRecs = failedRecs || f == "recommendations"
			failedPayments = failedPayments || f == "payments"
		}
		switch {
		case failedPayments:
			want["propagated"]++
		case failedRecs:
			want["coincidental"]++
			coincidental[key] = true
			if r.Claim == "claimed" {
				claimedCoincidental++
			}
		default:
			want["own"]++
		}
	}
	require.Greater(t, want["coincidental"], 30, "too few coincidental errors to measure: %v", want)
	assert.Equal(t, want["coincidental"], claimedCoincidental, "after learning, checkout claims every coincidental failure")
	if !withStore {
		t.Logf("checkout, measured phase: %d failed requests, truth %v; %d of %d coincidental failures sent claimed",
			total, want, claimedCoincidental, want["coincidental"])
		return
	}

	// What the collector found.
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(),
		`SELECT trace_id || '/' || span_id FROM coincidental_audit WHERE service = 'checkout' AND time >= $1`, measuredFrom)
	require.NoError(t, err)
	audited, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	hit := 0
	for _, k := range audited {
		if coincidental[k] {
			hit++
		}
	}
	precision, recall := float64(hit)/float64(max(len(audited), 1)), float64(hit)/float64(len(coincidental))
	t.Logf("checkout, measured phase: %d failed requests, truth %v; audited %d coincidental, precision %.3f, recall %.3f",
		total, want, len(audited), precision, recall)
	assert.GreaterOrEqual(t, precision, 0.99, "coincidental precision")
	assert.GreaterOrEqual(t, recall, 0.95, "coincidental recall")

	got := verdictCounts{}
	var own, propagated, coinc int
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT coalesce(sum(verdict_own), 0), coalesce(sum(verdict_propagated), 0), coalesce(sum(verdict_coincidental), 0)
		 FROM operation_stats WHERE service = 'checkout' AND bucket >= $1`, measuredFrom).Scan(&own, &propagated, &coinc))
	got["own"], got["propagated"], got["coincidental"] = own, propagated, coinc
	for _, kind := range []string{"own", "propagated", "coincidental"} {
		assert.InDelta(t, want[kind], got[kind], 0.01*float64(want[kind])+1, "checkout's %s verdicts", kind)
	}

	// The learning phase too: the failures judged while the tolerated edge
	// had no mode were held and judged again once it was learned, and
	// counted in the buckets of their traces.
	learnWant := verdictCounts{}
	for _, r := range checkout.records(t) {
		if measured[r.TraceID] || r.Status < 500 {
			continue
		}
		failedRecs, failedPayments := false, false
		for _, f := range r.Failed {
			failedRecs = failedRecs || f == "recommendations"
			failedPayments = failedPayments || f == "payments"
		}
		switch {
		case failedPayments:
			learnWant["propagated"]++
		case failedRecs:
			learnWant["coincidental"]++
		default:
			learnWant["own"]++
		}
	}
	learnGot := verdictCounts{}
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT coalesce(sum(verdict_own), 0), coalesce(sum(verdict_propagated), 0), coalesce(sum(verdict_coincidental), 0)
		 FROM operation_stats WHERE service = 'checkout' AND bucket < $1`, measuredFrom).Scan(&own, &propagated, &coinc))
	learnGot["own"], learnGot["propagated"], learnGot["coincidental"] = own, propagated, coinc
	t.Logf("checkout, learning phase: truth %v; the store %v", learnWant, learnGot)
	for _, kind := range []string{"own", "propagated", "coincidental"} {
		assert.InDelta(t, learnWant[kind], learnGot[kind], max(0.02*float64(learnWant[kind]), 2), "checkout's %s verdicts while learning", kind)
	}

	// The same run, as the collector's file exporter captured it, replayed
	// at its own pace into two replicas writing to another database, one of
	// them restarted halfway: the same figures, learning phase included.
	all := verdictCounts{}
	for _, kind := range []string{"own", "propagated", "coincidental"} {
		all[kind] = want[kind] + learnWant[kind]
	}
	replayed := replayToReplicas(t, collectorBin, col.outFile)
	rconn, err := pgx.Connect(context.Background(), replayed)
	require.NoError(t, err)
	defer rconn.Close(context.Background())
	var rAudited int
	require.NoError(t, rconn.QueryRow(context.Background(),
		`SELECT coalesce(sum(verdict_own), 0), coalesce(sum(verdict_propagated), 0), coalesce(sum(verdict_coincidental), 0)
		 FROM operation_stats WHERE service = 'checkout'`).Scan(&own, &propagated, &coinc))
	require.NoError(t, rconn.QueryRow(context.Background(), `SELECT count(*) FROM coincidental_audit WHERE service = 'checkout'`).Scan(&rAudited))
	rGot := verdictCounts{"own": own, "propagated": propagated, "coincidental": coinc}
	t.Logf("checkout, replayed to two replicas, one restarted halfway: truth %v; the store %v, %d audited", all, rGot, rAudited)
	for _, kind := range []string{"own", "propagated", "coincidental"} {
		assert.InDelta(t, all[kind], rGot[kind], max(0.02*float64(all[kind]), 2), "replayed: checkout's %s verdicts", kind)
	}
	assert.InDelta(t, all["coincidental"], rAudited, max(0.02*float64(all["coincidental"]), 2), "replayed: audited")

	// Every edge is named by its callee's service.name, never an address.
	rows, err = conn.Query(context.Background(), `SELECT DISTINCT service || ' > ' || peer_service FROM edge_stats ORDER BY 1`)
	require.NoError(t, err)
	edges, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"checkout > payments", "checkout > recommendations", "frontend > checkout"}, edges)
}

// replayToReplicas sends the batches a collector's file exporter captured
// to two collectors with a store, at the pace the spans were made, each
// trace to the replica its ID picks (as a trace-ID-partitioned front tier
// would), the second replica stopped gracefully and started again halfway.
// It returns the DSN of their database.
func replayToReplicas(t *testing.T, bin, captured string) string {
	t.Helper()
	dsn := pgtest.Start(t).DSN()
	type batch struct {
		at time.Time
		td ptrace.Traces
	}
	var batches []batch
	require.NoError(t, otlpfile.ReadFile(captured, func(td ptrace.Traces) {
		var first pcommon.Timestamp
		forEachSpan(td, func(s ptrace.Span) {
			if first == 0 || s.StartTimestamp() < first {
				first = s.StartTimestamp()
			}
		})
		batches = append(batches, batch{first.AsTime(), td})
	}))
	require.NotEmpty(t, batches)
	slices.SortStableFunc(batches, func(a, b batch) int { return a.at.Compare(b.at) })
	start := func() *collector {
		return startCollectorWith(t, bin, shopProcessor+shopStore, shopStoreExtension(dsn), shopHints(fmt.Sprintf("127.0.0.1:%d", freePort(t))))
	}
	// Replica 1 is restarted halfway as a rolling restart does it: a new
	// instance starts and takes every trace that begins from then on, the
	// old one gets the rest of the traces it has begun and is then stopped
	// with SIGTERM. (A trace whose spans went to two instances would be
	// analysed in two parts, which costs a verdict that needs the whole
	// trace: docs/deployment.md, which figures are exact where.)
	half := len(batches) / 2
	firstIn, lastOld := map[pcommon.TraceID]int{}, half
	for i, b := range batches {
		forEachSpan(b.td, func(s ptrace.Span) {
			id := s.TraceID()
			f, ok := firstIn[id]
			if !ok {
				f = i
				firstIn[id] = i
			}
			if f < half {
				lastOld = max(lastOld, i)
			}
		})
	}
	replicas := [2]*collector{start(), start()}
	var renewed *collector
	began, first := time.Now(), batches[0].at
	for i, b := range batches {
		if i == half {
			renewed = start()
		}
		time.Sleep(time.Until(began.Add(b.at.Sub(first))))
		for k, part := range splitByTrace(b.td) {
			if part.SpanCount() == 0 {
				continue
			}
			if k == 0 || renewed == nil {
				replicas[k].post(t, part)
				continue
			}
			old, fresh := splitBy(part, func(id pcommon.TraceID) bool { return firstIn[id] < half })
			if old.SpanCount() > 0 {
				replicas[1].post(t, old)
			}
			if fresh.SpanCount() > 0 {
				renewed.post(t, fresh)
			}
		}
		if i == lastOld && renewed != nil {
			_, err := replicas[1].Terminate(time.Minute)
			require.NoError(t, err)
			replicas[1] = renewed
			renewed = nil
		}
	}
	time.Sleep(3 * time.Second) // decision_wait, then a flush
	for _, r := range replicas {
		_, err := r.Terminate(time.Minute)
		require.NoError(t, err)
	}
	return dsn
}

// splitByTrace parts td's spans in two by trace ID.
func splitByTrace(td ptrace.Traces) [2]ptrace.Traces {
	return splitOn(td, func(id pcommon.TraceID) int { return int(id[15] & 1) })
}

// splitBy parts td's spans into those of the traces in and the others.
func splitBy(td ptrace.Traces, in func(pcommon.TraceID) bool) (yes, no ptrace.Traces) {
	out := splitOn(td, func(id pcommon.TraceID) int {
		if in(id) {
			return 0
		}
		return 1
	})
	return out[0], out[1]
}

// splitOn parts td's spans in two by which of them part says a trace ID
// belongs to.
func splitOn(td ptrace.Traces, part func(pcommon.TraceID) int) [2]ptrace.Traces {
	out := [2]ptrace.Traces{ptrace.NewTraces(), ptrace.NewTraces()}
	for i := range td.ResourceSpans().Len() {
		rs := td.ResourceSpans().At(i)
		for j := range rs.ScopeSpans().Len() {
			ss := rs.ScopeSpans().At(j)
			var into [2]ptrace.SpanSlice
			for k := range ss.Spans().Len() {
				span := ss.Spans().At(k)
				r := part(span.TraceID())
				if into[r] == (ptrace.SpanSlice{}) {
					rsOut := out[r].ResourceSpans().AppendEmpty()
					rs.Resource().CopyTo(rsOut.Resource())
					ssOut := rsOut.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(ssOut.Scope())
					into[r] = ssOut.Spans()
				}
				span.CopyTo(into[r].AppendEmpty())
			}
		}
	}
	return out
}

func forEachSpan(td ptrace.Traces, f func(ptrace.Span)) {
	for i := range td.ResourceSpans().Len() {
		rs := td.ResourceSpans().At(i)
		for j := range rs.ScopeSpans().Len() {
			spans := rs.ScopeSpans().At(j).Spans()
			for k := range spans.Len() {
				f(spans.At(k))
			}
		}
	}
}
