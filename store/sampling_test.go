// SPDX-License-Identifier: Apache-2.0

package store

import (
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store/pgtest"
)

// Thresholds (tracestate ot=th:…) whose adjusted counts are exact.
const (
	th16 = "ot=th:f"      // keeps 1/16 of traces: each stands for 16
	th4  = "ot=th:c"      // 1/4
	th2  = "ot=th:8"      // 1/2
	th1h = "ot=th:fd70a4" // about 1/100
)

// sampledTrace is one trace of front GET / calling back GET /b.
type sampledTrace struct {
	// state is the spans' W3C tracestate ("": not sampled, counted).
	state string
	// frontFails makes front's request fail (with back's failure);
	// otherwise front tolerates the failure.
	frontFails bool
	// lowRandomness gives the trace ID randomness below every threshold:
	// its sampling is inconsistent and the trace incomplete.
	lowRandomness bool
}

// tolerant judges every edge fail-open: front's failures beside back's
// are coincidental, and audited.
type tolerant struct{}

func (tolerant) Mode(dependencyanalysis.EdgeKey) ownership.Mode { return ownership.ModeFailOpen }

// engineStats runs traces through the engine as the processor does —
// Extractor over OTLP, ForEachTraceSampled, Link, SetSampling, Callees,
// Judge, Add — and returns the figures, dated at.
func engineStats(t *testing.T, names *dependencyanalysis.Symbols, at time.Time, traces ...sampledTrace) *dependencyanalysis.Stats {
	t.Helper()
	td := ptrace.NewTraces()
	front := td.ResourceSpans().AppendEmpty()
	front.Resource().Attributes().PutStr("service.name", "front")
	frontSpans := front.ScopeSpans().AppendEmpty().Spans()
	back := td.ResourceSpans().AppendEmpty()
	back.Resource().Attributes().PutStr("service.name", "back")
	backSpans := back.ScopeSpans().AppendEmpty().Spans()
	start := pcommon.NewTimestampFromTime(at)
	end := pcommon.NewTimestampFromTime(at.Add(time.Second))
	for i, tr := range traces {
		id := pcommon.TraceID{0: byte(i >> 8), 1: byte(i), 2: 0xaa}
		if !tr.lowRandomness {
			for j := 9; j < 16; j++ {
				id[j] = 0xff
			}
		}
		span := func(spans ptrace.SpanSlice, sid, parent byte, kind ptrace.SpanKind, name string, failed bool) ptrace.Span {
			s := spans.AppendEmpty()
			s.SetTraceID(id)
			s.SetSpanID(pcommon.SpanID{0: byte(i >> 8), 1: byte(i), 7: sid})
			if parent != 0 {
				s.SetParentSpanID(pcommon.SpanID{0: byte(i >> 8), 1: byte(i), 7: parent})
			}
			s.SetKind(kind)
			s.SetName(name)
			s.SetStartTimestamp(start)
			s.SetEndTimestamp(end)
			s.TraceState().FromRaw(tr.state)
			if failed {
				s.Status().SetCode(ptrace.StatusCodeError)
			}
			return s
		}
		root := span(frontSpans, 1, 0, ptrace.SpanKindServer, "GET /", tr.frontFails)
		root.Attributes().PutStr(ownership.AttrClaim, ownership.ClaimClaimed.String())
		call := span(frontSpans, 2, 1, ptrace.SpanKindClient, "GET /b", true)
		call.Attributes().PutStr("peer.service", "back")
		span(backSpans, 3, 2, ptrace.SpanKindServer, "GET /b", true)
	}
	cfg := dependencyanalysis.DefaultConfig()
	records := dependencyanalysis.NewExtractor(cfg, names).Append(nil, td)
	an := dependencyanalysis.NewAnalyzer()
	callees := dependencyanalysis.NewCallees(0)
	stats := dependencyanalysis.NewStats()
	dependencyanalysis.ForEachTraceSampled(records, func(id pcommon.TraceID, spans []dependencyanalysis.Span, sampling dependencyanalysis.SamplingClass) {
		tr := an.Link(id, spans)
		tr.SetSampling(sampling)
		callees.Check(tr)
		var verdicts []dependencyanalysis.Verdict
		if tr.Incomplete == dependencyanalysis.IncompleteNone {
			verdicts = an.Judge(tr, tolerant{})
		}
		stats.Add(tr, verdicts)
	})
	require.EqualValues(t, len(traces), stats.Traces, "every trace analysed")
	return stats
}

// weightOf returns the adjusted count of a trace with tracestate state.
func weightOf(state string) float64 {
	return dependencyanalysis.SamplingOf(state, pcommon.TraceID{9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff}, 0).Weight()
}

func repeat(n int, tr sampledTrace) []sampledTrace {
	out := make([]sampledTrace, n)
	for i := range out {
		out[i] = tr
	}
	return out
}

// TestWeightedFlush: a flush of the engine's figures from sampled traces
// writes each count and beside it its estimate, the sum of the traces'
// adjusted counts; the readers report the estimates, the counts seen and
// how they were counted; trace_stats and the audit weights round-trip.
func TestWeightedFlush(t *testing.T) {
	tests := []struct {
		name   string
		traces []sampledTrace
		// served is front's estimate of requests served; the count seen
		// is the number of complete traces.
		served float64
		// failed is front's estimate of failed requests (all
		// coincidental, beside back's failure).
		failed       float64
		sampling     Sampling
		extrapolated int64 // traces
		incomplete   int64 // with inconsistent sampling
	}{
		{name: "counted", traces: repeat(3, sampledTrace{frontFails: true}),
			served: 3, failed: 3, sampling: SamplingCounted},
		{name: "one in 16", traces: append(repeat(2, sampledTrace{state: th16, frontFails: true}), sampledTrace{state: th16}),
			served: 48, failed: 32, sampling: SamplingExtrapolated, extrapolated: 3},
		{name: "mixed weights and counted", traces: []sampledTrace{
			{state: th4, frontFails: true}, {state: th2}, {frontFails: true}, {},
		}, served: 4 + 2 + 1 + 1, failed: 4 + 1, sampling: SamplingMixed, extrapolated: 2},
		// Its weight unknown, its requests count as one each, unjudged.
		{name: "an inconsistent trace is counted apart, not judged", traces: []sampledTrace{
			{state: th16, frontFails: true}, {state: th16, frontFails: true, lowRandomness: true},
		}, served: 16 + 1, failed: 16, sampling: SamplingMixed, extrapolated: 1, incomplete: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			s := newStore(t)
			names := dependencyanalysis.NewSymbols(0)
			stats := engineStats(t, names, t0.Add(time.Second), tc.traces...)
			_, err := s.Write(ctx, Flush{Instance: "a", Seq: 1, Bucket: t0, Stats: stats, Names: names})
			require.NoError(t, err)
			complete := int64(len(tc.traces)) - tc.incomplete

			// The columns: estimates = weights × counts.
			var served, extrapolated int64
			var servedEst float64
			require.NoError(t, s.pool.QueryRow(ctx, `SELECT served, served_est, extrapolated FROM operation_stats WHERE service = 'front'`).
				Scan(&served, &servedEst, &extrapolated))
			seen := int64(len(tc.traces)) // every request served counts, whole trace or not
			assert.Equal(t, seen, served)
			assert.InDelta(t, tc.served, servedEst, 1e-9)
			assert.Equal(t, tc.extrapolated, extrapolated)

			from, to := t0.Add(-time.Hour), t0.Add(time.Hour)
			traffic, err := s.Traffic(ctx, from, to, dependencyanalysis.DefaultConfig().EdgeModel)
			require.NoError(t, err)
			var op *OperationTraffic
			for i := range traffic.Operations {
				if traffic.Operations[i].Service == "front" {
					op = &traffic.Operations[i]
				}
			}
			require.NotNil(t, op)
			assert.InDelta(t, tc.served, op.Served, 1e-9)
			assert.InDelta(t, tc.failed, op.Failed, 1e-9)
			assert.InDelta(t, tc.failed, op.Coincidental, 1e-9)
			assert.Equal(t, seen, op.Seen.Served)
			assert.Equal(t, tc.sampling, op.Sampling)
			require.Len(t, traffic.Edges, 1)
			edge := traffic.Edges[0]
			assert.InDelta(t, tc.served, edge.Calls, 1e-9, "every request called back once")
			assert.Equal(t, seen, edge.Seen.Calls)
			assert.Equal(t, tc.sampling, edge.Sampling)

			roots, err := s.Roots(ctx, from, to)
			require.NoError(t, err)
			require.Len(t, roots, 1)
			assert.InDelta(t, tc.served, roots[0].Requests, 1e-9)
			assert.Equal(t, seen, roots[0].Seen.Requests)
			assert.Equal(t, tc.sampling, roots[0].Sampling)

			depths, err := s.ServedPerRoot(ctx, from, to)
			require.NoError(t, err)
			for _, d := range depths {
				assert.InDelta(t, 1.0, d.PerRoot, 1e-9, "%s at depth %d: a ratio of estimates", d.Service, d.Depth)
				assert.Equal(t, tc.sampling, d.Sampling)
			}

			claims := frontClaims(t, s, from, to)
			assert.InDelta(t, tc.failed, claims.Failed, 1e-9)
			assert.InDelta(t, tc.failed, claims.Requests[ownership.ClaimClaimed][dependencyanalysis.VerdictCoincidental], 1e-9)
			assert.InDelta(t, 1.0, claims.Accuracy(), 1e-9)

			// Every audit entry weighs its trace.
			entries, err := s.AuditEntries(ctx, AuditFilter{From: from, To: to})
			require.NoError(t, err)
			var weights float64
			for _, e := range entries {
				weights += e.Weight
			}
			assert.InDelta(t, tc.failed, weights, 1e-9)
			groups, err := s.AuditGroups(ctx, AuditFilter{From: from, To: to})
			require.NoError(t, err)
			require.Len(t, groups, 1)
			assert.InDelta(t, tc.failed, groups[0].Audited, 1e-9)
			assert.Equal(t, int64(len(entries)), groups[0].Seen.Audited)
			assert.InDelta(t, 1.0, groups[0].Share(), 1e-9, "every failure coincidental: a ratio of estimates")

			ts, err := s.TraceStats(ctx, from, to)
			require.NoError(t, err)
			assert.Equal(t, TraceStats{
				Traces: int64(len(tc.traces)), Extrapolated: tc.extrapolated, Counted: complete - tc.extrapolated,
				CountedFailed: countedFailed(tc.traces),
				Incomplete:    [4]int64{dependencyanalysis.IncompleteSampling: tc.incomplete},
			}, ts)
		})
	}
}

// frontClaims returns front's claim accuracy.
func frontClaims(t *testing.T, s *Store, from, to time.Time) ClaimAccuracy {
	t.Helper()
	claims, err := s.ClaimAccuracy(testContext(t), from, to)
	require.NoError(t, err)
	for _, c := range claims {
		if c.Service == "front" {
			return c
		}
	}
	t.Fatalf("no claim accuracy of front in %+v", claims)
	return ClaimAccuracy{}
}

func countedFailed(traces []sampledTrace) int64 {
	var n int64
	for _, tr := range traces {
		if tr.state == "" && !tr.lowRandomness {
			n++ // back fails in every trace
		}
	}
	return n
}

// TestWeightsAreExact: the thresholds the tests use weigh what they say.
func TestWeightsAreExact(t *testing.T) {
	for _, tc := range []struct {
		state string
		want  float64
	}{{th16, 16}, {th4, 4}, {th2, 2}, {"", 1}} {
		t.Run(tc.state, func(t *testing.T) {
			assert.InDelta(t, tc.want, weightOf(tc.state), 1e-12)
		})
	}
	assert.InDelta(t, 100, weightOf(th1h), 0.01)
}

// TestEdgeModelDecidesByTracesSeen: the edge model read from the store
// weighs the evidence by the traces' adjusted counts, but min_samples
// counts the failed-alone calls seen: 19 traces that stand for 1,900
// requests decide nothing; the 20th does.
func TestEdgeModelDecidesByTracesSeen(t *testing.T) {
	ctx := testContext(t)
	s := newStore(t)
	cfg := dependencyanalysis.DefaultConfig().EdgeModel
	cfg.HalfLife = 0
	names := dependencyanalysis.NewSymbols(0)
	w := weightOf(th1h)
	tests := []struct {
		name   string
		traces int
		mode   ownership.Mode
	}{
		{"one short of min_samples", cfg.MinSamples - 1, ownership.ModeUnknown},
		{"min_samples traces seen", 1, ownership.ModeFailOpen},
	}
	seen := 0
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stats := engineStats(t, names, t0.Add(time.Second), repeat(tc.traces, sampledTrace{state: th1h})...)
			_, err := s.Write(ctx, Flush{Instance: "a", Seq: uint64(i + 1), Bucket: t0, Stats: stats, Names: names})
			require.NoError(t, err)
			seen += tc.traces
			model, err := s.EdgeModel(ctx, t0.Add(-time.Hour), 0, cfg)
			require.NoError(t, err)
			require.Len(t, model, 1)
			e := model[0]
			assert.Equal(t, tc.mode, e.Mode)
			assert.InDelta(t, float64(seen), e.Counts.Samples, 1e-9, "samples are the calls seen")
			assert.InDelta(t, float64(seen)*w, e.Counts.Failed, 1e-6, "evidence weighed")
			assert.Equal(t, SamplingExtrapolated, e.Sampling)
			for _, of := range []func() ([]EdgeEstimate, error){
				func() ([]EdgeEstimate, error) { return s.EdgesFor(ctx, "front", t0.Add(-time.Hour), 0, cfg) },
			} {
				got, err := of()
				require.NoError(t, err)
				assert.Equal(t, model, got)
			}
		})
	}
}

// TestVersion3RowsReadAsCounted: rows a version-3 collector wrote read,
// after the migration, as counted (estimates = counts, weight 1), and a
// weighted flush merged into them adds its estimates to their counts.
func TestVersion3RowsReadAsCounted(t *testing.T) {
	ctx := testContext(t)
	dsn := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := newProvider(db)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 3)
	require.NoError(t, err)
	bucket := t0.UTC().Format(time.RFC3339)
	for _, sql := range []string{
		"SELECT ensure_partitions('" + t0.UTC().Format(time.DateOnly) + "')",
		// As a version-3 writer left them: front served 10, 4 of them
		// failed coincidentally beside back; its flush recorded.
		`INSERT INTO flushes (instance, seq, bucket, rows) VALUES ('v3', 1, '` + bucket + `', 6)`,
		`INSERT INTO operation_stats (bucket, service, operation, served, failed, verdict_coincidental, claims_correct, expected_claimed)
		 VALUES ('` + bucket + `', 'front', 'GET /', 10, 4, 4, 4, 4), ('` + bucket + `', 'back', 'GET /b', 10, 0, 0, 0, 0)`,
		`INSERT INTO claim_accuracy (bucket, service, operation, claim_sent, verdict, requests)
		 VALUES ('` + bucket + `', 'front', 'GET /', 'claimed', 'coincidental', 4)`,
		`INSERT INTO edge_stats (bucket, service, operation, peer_service, peer_operation, calls, failed_calls, attempts, failed_alone, failed_alone_request_failed)
		 VALUES ('` + bucket + `', 'front', 'GET /', 'back', 'GET /b', 10, 10, 10, 10, 4)`,
		`INSERT INTO root_stats (bucket, root_service, root_operation, requests, storm_radius_sum) VALUES ('` + bucket + `', 'front', 'GET /', 10, 0)`,
		`INSERT INTO depth_stats (bucket, root_service, root_operation, depth, service, served) VALUES ('` + bucket + `', 'front', 'GET /', 0, 'front', 10)`,
		`INSERT INTO coincidental_audit (time, trace_id, span_id, service, operation, peer_service, peer_operation, claim_sent, claim_expected, reason)
		 VALUES ('` + bucket + `', '01', '02', 'front', 'GET /', 'back', 'GET /b', 'claimed', 'claimed', 'coincidental')`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	s, err := New(pool, DefaultConfig())
	require.NoError(t, err)
	v, err := s.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, SchemaVersionWanted(), v)
	wantInt(t, s, 1, "%d trace_stats partitions for the day the version-3 tables have; want 1",
		"SELECT count(*) FROM pg_class WHERE relname = 'trace_stats_p"+t0.UTC().Format("20060102")+"'")

	from, to := t0.Add(-time.Hour), t0.Add(time.Hour)
	read := func(t *testing.T) (*OperationTraffic, *EdgeTraffic, RootSummary, []AuditRecord) {
		traffic, err := s.Traffic(ctx, from, to, dependencyanalysis.DefaultConfig().EdgeModel)
		require.NoError(t, err)
		require.Len(t, traffic.Edges, 1)
		var front *OperationTraffic
		for i := range traffic.Operations {
			if traffic.Operations[i].Service == "front" {
				front = &traffic.Operations[i]
			}
		}
		require.NotNil(t, front)
		roots, err := s.Roots(ctx, from, to)
		require.NoError(t, err)
		require.Len(t, roots, 1)
		audit, err := s.AuditEntries(ctx, AuditFilter{From: from, To: to})
		require.NoError(t, err)
		return front, &traffic.Edges[0], roots[0], audit
	}
	t.Run("read as counted", func(t *testing.T) {
		front, edge, root, audit := read(t)
		assert.Equal(t, counted(OperationTraffic{Service: "front", Operation: "GET /",
			OperationFigures: OperationFigures[float64]{Served: 10, Failed: 4, Coincidental: 4}}), []OperationTraffic{*front})
		assert.Equal(t, CallFigures[float64]{Calls: 10, FailedCalls: 10, Attempts: 10}, edge.CallFigures)
		assert.Equal(t, SamplingCounted, edge.Sampling)
		assert.InDelta(t, 10, edge.Counts.Failed, 1e-9)
		assert.Equal(t, 10.0, root.Requests)
		assert.Equal(t, SamplingCounted, root.Sampling)
		require.Len(t, audit, 1)
		assert.Equal(t, 1.0, audit[0].Weight)
		claims := frontClaims(t, s, from, to)
		assert.Equal(t, 1.0, claims.Accuracy())
		assert.Equal(t, 4.0, claims.Requests[ownership.ClaimClaimed][dependencyanalysis.VerdictCoincidental])
		model, err := s.EdgeModel(ctx, from, 0, dependencyanalysis.DefaultConfig().EdgeModel)
		require.NoError(t, err)
		require.Len(t, model, 1)
		assert.InDelta(t, 10, model[0].Counts.Failed, 1e-9)
		assert.InDelta(t, 10, model[0].Counts.Samples, 1e-9)
	})
	t.Run("a weighted flush merged into them", func(t *testing.T) {
		// Two traces of 1 in 16, front failing in one: the version-3
		// row's counts keep their weight of 1.
		names := dependencyanalysis.NewSymbols(0)
		stats := engineStats(t, names, t0.Add(time.Second), sampledTrace{state: th16, frontFails: true}, sampledTrace{state: th16})
		dup, err := s.Write(ctx, Flush{Instance: "v4", Seq: 1, Bucket: t0, Stats: stats, Names: names})
		require.NoError(t, err)
		require.False(t, dup)
		front, edge, root, audit := read(t)
		assert.InDelta(t, 10+32, front.Served, 1e-9)
		assert.InDelta(t, 4+16, front.Failed, 1e-9)
		assert.Equal(t, int64(12), front.Seen.Served)
		assert.Equal(t, SamplingMixed, front.Sampling)
		assert.InDelta(t, 10+32, edge.Calls, 1e-9)
		assert.InDelta(t, 10+32, edge.Counts.Failed, 1e-9)
		assert.InDelta(t, 12, edge.Counts.Samples, 1e-9)
		assert.InDelta(t, 10+32, root.Requests, 1e-9)
		var weights float64
		for _, a := range audit {
			weights += a.Weight
		}
		assert.InDelta(t, 1+16, weights, 1e-9)
		claims := frontClaims(t, s, from, to)
		assert.InDelta(t, 4+16, claims.Requests[ownership.ClaimClaimed][dependencyanalysis.VerdictCoincidental], 1e-9)
		assert.Equal(t, int64(5), claims.Seen.Requests[ownership.ClaimClaimed][dependencyanalysis.VerdictCoincidental])
		assert.Equal(t, SamplingMixed, claims.Sampling)
		assert.False(t, math.IsNaN(claims.Accuracy()))
	})
}
