// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
	"github.com/errorownership/errorownership/store/pgtest"
)

// learningFirst returns the coincidental scenario's traces with the
// coincidental ones first — judged before the model has seen the tolerated
// edge fail — then the rest in three parts, and the number of coincidental
// failures, as offline analysis of all of it finds them.
func learningFirst(t *testing.T) (parts [][]ptrace.Traces, coincidental int) {
	t.Helper()
	batches := scenarioBatches(t, "coincidental")
	cfg := testConfig(nil).Engine()
	syms := dependencyanalysis.NewSymbols(0)
	ex := dependencyanalysis.NewExtractor(cfg, syms)
	var recs []dependencyanalysis.Record
	for _, td := range batches {
		recs = ex.Append(recs, td)
	}
	model := dependencyanalysis.NewEdgeModel(cfg.EdgeModel)
	an := dependencyanalysis.NewAnalyzer()
	dependencyanalysis.ForEachTrace(recs, func(id pcommon.TraceID, spans []dependencyanalysis.Span) { model.Observe(an.Link(id, spans)) })
	coinc := map[pcommon.TraceID]bool{}
	dependencyanalysis.ForEachTrace(recs, func(id pcommon.TraceID, spans []dependencyanalysis.Span) {
		for _, v := range an.Judge(an.Link(id, spans), model) {
			if v.Kind == dependencyanalysis.VerdictCoincidental {
				coinc[id] = true
				coincidental++
			}
		}
	})
	var first, rest []ptrace.Traces
	for _, td := range batches {
		if coinc[td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()] {
			first = append(first, td)
		} else {
			rest = append(rest, td)
		}
	}
	n := len(rest) / 3
	return [][]ptrace.Traces{first, rest[:n], rest[n : 2*n], rest[2*n:]}, coincidental
}

// TestRejudgedInTheLearningPhase: failures judged while their edge had no
// mode are held and judged again once the model has learned it, so the
// figures equal what offline analysis of the whole run finds, and each is
// counted in the bucket its trace was analysed in, exactly once. Without
// holding, the first ones would stay propagated for good.
func TestRejudgedInTheLearningPhase(t *testing.T) {
	parts, want := learningFirst(t)
	require.Equal(t, 10, want, "the scenario's coincidental failures")
	tests := []struct {
		name      string
		rejudge   RejudgeConfig
		withStore bool
		want      int // coincidental verdicts counted
	}{
		{"held and judged again", RejudgeConfig{MaxHeld: 1000, MaxAge: time.Hour}, false, want},
		{"held and judged again, into the store's buckets", RejudgeConfig{MaxHeld: 1000, MaxAge: time.Hour}, true, want},
		{"judged once", RejudgeConfig{}, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dsn := ""
			if tc.withStore {
				dsn = pgtest.Start(t).DSN()
			}
			tt := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
			proc, p := newTestProcessor(t, tt, testConfig(func(c *Config) {
				c.DecisionWait = 10 * time.Millisecond
				c.FlushInterval = time.Hour // the test flushes
				c.Rejudge = tc.rejudge
				if tc.withStore {
					storeConfig(dsn, func(sc *store.Config) {
						sc.Bucket = time.Second
						sc.AuditPerServicePerMinute = 0
						sc.Retention = 0 // the scenario's spans are dated on its own day
					})(c)
				}
			}), new(consumertest.TracesSink))
			ctx := context.Background()
			require.NoError(t, proc.Start(ctx, hostFor(t, p.cfg)))
			analysed := 0
			for i, part := range parts {
				for _, td := range part {
					require.NoError(t, proc.ConsumeTraces(ctx, td))
				}
				analysed += len(part)
				require.Eventually(t, func() bool { return counter(t, tt, "traces_analyzed") == int64(analysed) },
					10*time.Second, 5*time.Millisecond)
				if tc.withStore && i > 0 {
					// The model is the store's: let it read the buckets written.
					require.True(t, p.storeModel.Read(ctx))
				}
				p.flush(ctx, false)
				time.Sleep(1100 * time.Millisecond) // the next part in a bucket of its own
			}
			require.NoError(t, proc.Shutdown(ctx))

			got := counter(t, tt, "verdicts", attribute.String("verdict", "coincidental"))
			assert.EqualValues(t, tc.want, got, "coincidental verdicts")
			if tc.rejudge.MaxHeld > 0 {
				assert.GreaterOrEqual(t, counter(t, tt, "verdicts_held"), int64(want), "held")
				assert.EqualValues(t, counter(t, tt, "verdicts_held"),
					counter(t, tt, "verdicts_rejudged", attribute.String("cause", "settled"))+
						counter(t, tt, "verdicts_rejudged", attribute.String("cause", "shutdown")), "every held request judged for good")
			}
			if !tc.withStore {
				return
			}
			conn, err := pgx.Connect(ctx, dsn)
			require.NoError(t, err)
			defer conn.Close(ctx)
			var first time.Time
			require.NoError(t, conn.QueryRow(ctx, `SELECT min(bucket) FROM operation_stats`).Scan(&first))
			var inFirst, total, audited int
			require.NoError(t, conn.QueryRow(ctx,
				`SELECT coalesce(sum(verdict_coincidental) FILTER (WHERE bucket = $1), 0), coalesce(sum(verdict_coincidental), 0) FROM operation_stats WHERE service = 'checkout'`,
				first).Scan(&inFirst, &total))
			require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM coincidental_audit`).Scan(&audited))
			assert.Equal(t, want, total, "the store's coincidental verdicts")
			assert.Equal(t, want, inFirst, "counted in the bucket their traces were analysed in")
			assert.Equal(t, want, audited, "audited once each")
		})
	}
}

// TestHeldBoundedByCount: past max_held the oldest held request is judged
// for the last time at once, so that a flood of failures on an edge that
// never gets a mode holds no more than the bound.
func TestHeldBoundedByCount(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	proc, p := newTestProcessor(t, tt, testConfig(func(c *Config) {
		c.DecisionWait = 10 * time.Millisecond
		c.NumWorkers = 1
		c.Rejudge = RejudgeConfig{MaxHeld: 5, MaxAge: time.Hour}
		c.EdgeModel.MinSamples = 1 << 20 // the edges never get a mode
	}), new(consumertest.TracesSink))
	ctx := context.Background()
	require.NoError(t, proc.Start(ctx, hostFor(t, p.cfg)))
	const traces = 40
	td := ptrace.NewTraces()
	for i := range traces {
		failingChain(td, traceID(uint64(i+1)))
	}
	require.NoError(t, proc.ConsumeTraces(ctx, td))
	require.Eventually(t, func() bool { return counter(t, tt, "traces_analyzed") == traces }, 10*time.Second, 5*time.Millisecond)
	p.workers[0].mu.Lock()
	held := len(p.workers[0].held)
	p.workers[0].mu.Unlock()
	assert.Equal(t, 5, held, "no more held than max_held")
	evicted := counter(t, tt, "verdicts_rejudged", attribute.String("cause", "evicted"))
	assert.EqualValues(t, counter(t, tt, "verdicts_held")-5, evicted, "the rest judged for the last time")
	require.NoError(t, proc.Shutdown(ctx))
	assert.EqualValues(t, 5, counter(t, tt, "verdicts_rejudged", attribute.String("cause", "shutdown")), "the last five at shutdown")
	assert.EqualValues(t, 2*traces, counter(t, tt, "verdicts", attribute.String("verdict", "propagated")), "every failure counted once")
}

// verdictFigures are the verdict figures of a store, or of offline
// analysis, by name: per "service operation" its requests served, failed,
// own, propagated, coincidental, claims correct, expected claimed and
// unclaimed; the claim-accuracy cells that count requests, per "service
// operation claim_sent verdict"; the audit entries, per request.
type verdictFigures struct {
	ops    map[string][8]int64
	claims map[string]int64
	audit  map[string]int
}

// offlineFigures judges the coincidental scenario's traces, each once, by
// the modes a model learned over all of them (learned), or by a model
// that knows no edge: the figures once every request is judged for good,
// and the figures of every request judged as it first is while the model
// learns.
func offlineFigures(t *testing.T, learned bool) verdictFigures {
	t.Helper()
	cfg := testConfig(nil).Engine()
	syms := dependencyanalysis.NewSymbols(0)
	ex := dependencyanalysis.NewExtractor(cfg, syms)
	var recs []dependencyanalysis.Record
	for _, td := range scenarioBatches(t, "coincidental") {
		recs = ex.Append(recs, td)
	}
	model := dependencyanalysis.NewEdgeModel(cfg.EdgeModel)
	an := dependencyanalysis.NewAnalyzer()
	if learned {
		dependencyanalysis.ForEachTrace(recs, func(id pcommon.TraceID, spans []dependencyanalysis.Span) { model.Observe(an.Link(id, spans)) })
	}
	stats := dependencyanalysis.NewStats()
	dependencyanalysis.ForEachTrace(recs, func(id pcommon.TraceID, spans []dependencyanalysis.Span) {
		tr := an.Link(id, spans)
		stats.Add(tr, an.Judge(tr, model))
	})
	f := verdictFigures{ops: map[string][8]int64{}, claims: map[string]int64{}, audit: map[string]int{}}
	for k, op := range stats.Operations {
		name := syms.Name(k.Service) + " " + syms.Name(k.Operation)
		f.ops[name] = [8]int64{int64(op.Served), int64(op.Failed),
			int64(op.Verdicts[dependencyanalysis.VerdictOwn]), int64(op.Verdicts[dependencyanalysis.VerdictPropagated]), int64(op.Verdicts[dependencyanalysis.VerdictCoincidental]),
			int64(op.ClaimsCorrect), int64(op.ExpectedClaims[ownership.ClaimClaimed]), int64(op.ExpectedClaims[ownership.ClaimUnclaimed])}
		for sent := ownership.ClaimMissing; sent <= ownership.ClaimUnclaimed; sent++ {
			for kind := dependencyanalysis.VerdictOwn; kind <= dependencyanalysis.VerdictCoincidental; kind++ {
				if n := op.Claims[sent][kind]; n > 0 {
					f.claims[name+" "+sent.String()+" "+kind.String()] = int64(n)
				}
			}
		}
	}
	for _, e := range stats.Audit {
		f.audit[strings.Join([]string{hex.EncodeToString(e.TraceID[:]), hex.EncodeToString(e.SpanID[:]), syms.Name(e.Service),
			syms.Name(e.PeerService), e.ClaimSent.String(), e.ClaimExpected.String()}, " ")]++
	}
	return f
}

// storedFigures reads verdictFigures from the store, summed over buckets,
// and fails the test if a row holds a negative count or a claim cell none.
func storedFigures(ctx context.Context, t *testing.T, conn *pgx.Conn) verdictFigures {
	t.Helper()
	f := verdictFigures{ops: map[string][8]int64{}, claims: map[string]int64{}, audit: map[string]int{}}
	rows, err := conn.Query(ctx, `SELECT service || ' ' || operation, sum(served), sum(failed), sum(verdict_own), sum(verdict_propagated),
		sum(verdict_coincidental), sum(claims_correct), sum(expected_claimed), sum(expected_unclaimed)
		FROM operation_stats GROUP BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		var v [8]int64
		require.NoError(t, rows.Scan(&name, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]))
		f.ops[name] = v
	}
	require.NoError(t, rows.Err())
	rows, err = conn.Query(ctx, `SELECT service || ' ' || operation || ' ' || claim_sent || ' ' || verdict, sum(requests) FROM claim_accuracy GROUP BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var cell string
		var n int64
		require.NoError(t, rows.Scan(&cell, &n))
		f.claims[cell] = n
	}
	require.NoError(t, rows.Err())
	rows, err = conn.Query(ctx, `SELECT concat_ws(' ', trace_id, span_id, service, peer_service, claim_sent, claim_expected) FROM coincidental_audit`)
	require.NoError(t, err)
	for rows.Next() {
		var entry string
		require.NoError(t, rows.Scan(&entry))
		f.audit[entry]++
	}
	require.NoError(t, rows.Err())
	var bad int
	require.NoError(t, conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM operation_stats
		WHERE least(failed, verdict_own, verdict_propagated, verdict_coincidental, claims_correct, expected_claimed, expected_unclaimed) < 0)
		+ (SELECT count(*) FROM claim_accuracy WHERE requests <= 0)`).Scan(&bad))
	assert.Zero(t, bad, "rows with a negative count, or claim cells with none")
	return f
}

// TestNoVerdictLostToACrash: a held request's provisional verdict is in
// the store from its bucket's flush on, and its correction from the flush
// that judges it for good, so that a collector killed at any point leaves
// every request it flushed counted with a verdict. The store's figures —
// verdicts per operation, claim accuracy, audit log — are compared with
// offline analysis of the same traffic: judged for good by the learned
// model, as today's code ends once everything is judged, or judged as
// first, with no edge known, where the kill came before the model learned.
func TestNoVerdictLostToACrash(t *testing.T) {
	parts, _ := learningFirst(t)
	learned, unlearned := offlineFigures(t, true), offlineFigures(t, false)
	require.NotEqual(t, learned.ops, unlearned.ops, "the learning changes verdicts, or nothing is tested")
	tests := []struct {
		name string
		// learn: the store's model is read before each flush, as every
		// store.model_refresh; else never, as while edges are learned.
		learn bool
		// crash: the collector is killed once its flushes are written,
		// instead of shut down.
		crash bool
		want  verdictFigures
	}{
		{"a crash-free finish", true, false, learned},
		{"killed while the edges were being learned: the provisional verdicts", false, true, unlearned},
		{"killed once the model had learned: the corrections written", true, true, learned},
		{"shut down while the edges were being learned: judged once more, nothing changes", false, false, unlearned},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.Start(t).DSN()
			tt := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
			proc, p := newTestProcessor(t, tt, testConfig(func(c *Config) {
				c.DecisionWait = 10 * time.Millisecond
				c.FlushInterval = time.Hour // the test flushes
				c.Rejudge = RejudgeConfig{MaxHeld: 1000, MaxAge: time.Hour}
				storeConfig(dsn, func(sc *store.Config) {
					sc.ModelRefresh = time.Hour // the test reads the model
					sc.AuditPerServicePerMinute = 0
					sc.Retention = 0 // the scenario's spans are dated on its own day
				})(c)
				if !tc.learn {
					// Whatever the model reads, no edge gets a mode (the
					// store extension's edge_model, which hostFor takes
					// from the processor's).
					c.EdgeModel.MinSamples = 1 << 20
				}
			}), new(consumertest.TracesSink))
			ctx := context.Background()
			require.NoError(t, proc.Start(ctx, hostFor(t, p.cfg)))
			analysed := 0
			for _, part := range append(parts, nil) { // a last flush with no new traffic
				for _, td := range part {
					require.NoError(t, proc.ConsumeTraces(ctx, td))
				}
				analysed += len(part)
				require.Eventually(t, func() bool { return counter(t, tt, "traces_analyzed") == int64(analysed) },
					10*time.Second, 5*time.Millisecond)
				if tc.learn {
					require.Eventually(t, func() bool { return p.storeSink.Writer.Stats().PendingFlushes == 0 }, 10*time.Second, 5*time.Millisecond)
					require.True(t, p.storeModel.Read(ctx))
				}
				p.flush(ctx, false)
			}
			require.Eventually(t, func() bool { return p.storeSink.Writer.Stats().PendingFlushes == 0 }, 10*time.Second, 5*time.Millisecond,
				"every flush written")
			if tc.crash {
				// What the process would write from now on dies with it.
				p.flushing.Lock()
				p.sink = nil
				p.flushing.Unlock()
			}
			require.NoError(t, proc.Shutdown(ctx))
			st := p.storeSink.Writer.Stats()
			assert.Zero(t, st.DroppedFlushes+st.RejectedFlushes, "flushes dropped or rejected")
			if tc.learn {
				assert.Positive(t, counter(t, tt, "verdicts_corrected", attribute.String("verdict", "coincidental")), "corrections")
			} else {
				assert.Zero(t, counter(t, tt, "verdicts_corrected", attribute.String("verdict", "coincidental")), "corrections")
			}

			conn, err := pgx.Connect(ctx, dsn)
			require.NoError(t, err)
			defer conn.Close(ctx)
			got := storedFigures(ctx, t, conn)
			assert.Equal(t, tc.want.ops, got.ops, "per operation: served, failed, own, propagated, coincidental, claims correct, expected claimed, unclaimed")
			assert.Equal(t, tc.want.claims, got.claims, "claim accuracy")
			assert.Equal(t, tc.want.audit, got.audit, "audit log")
		})
	}
}
