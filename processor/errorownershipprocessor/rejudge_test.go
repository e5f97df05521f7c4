// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

import (
	"context"
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
