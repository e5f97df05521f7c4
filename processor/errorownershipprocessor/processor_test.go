// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/goleak"

	"github.com/errorownership/errorownership/internal/testsupport/scenario"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/metadatatest"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/sink"
)

var (
	own          = attribute.String("verdict", "own")
	propagated   = attribute.String("verdict", "propagated")
	coincidental = attribute.String("verdict", "coincidental")
)

func TestLifecycle(t *testing.T) {
	tests := []struct {
		name   string
		start  bool
		traces int
	}{
		{name: "start, consume, shutdown", start: true, traces: 3},
		{name: "start and shutdown with nothing consumed", start: true},
		{name: "shutdown without start", start: false},
		{name: "consume without start: shutdown still analyses", start: false, traces: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
			sink := new(consumertest.TracesSink)
			proc, _ := newTestProcessor(t, tt, testConfig(nil), sink)
			ctx := context.Background()
			if tc.start {
				require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
			}
			for i := range tc.traces {
				td := ptrace.NewTraces()
				failingChain(td, traceID(uint64(i+1)))
				require.NoError(t, proc.ConsumeTraces(ctx, td))
			}
			// Passed on at once, analysed not yet: decision_wait is an hour.
			assert.Equal(t, 5*tc.traces, sink.SpanCount())
			assert.Zero(t, counter(t, tt, "traces_analyzed"))
			assert.EqualValues(t, tc.traces, counter(t, tt, "buffer_traces"))
			assert.EqualValues(t, 5*tc.traces, counter(t, tt, "buffer_spans"))

			require.NoError(t, proc.Shutdown(ctx))
			require.NoError(t, proc.Shutdown(ctx), "a second shutdown is harmless")

			assert.EqualValues(t, tc.traces, counter(t, tt, "traces_analyzed"))
			assert.EqualValues(t, tc.traces, counter(t, tt, "verdicts", own))
			assert.EqualValues(t, 2*tc.traces, counter(t, tt, "verdicts", propagated))
			assert.EqualValues(t, 5*tc.traces, counter(t, tt, "spans_seen"))

			// After shutdown spans still pass, unanalysed.
			td := ptrace.NewTraces()
			failingChain(td, traceID(99))
			require.NoError(t, proc.ConsumeTraces(ctx, td))
			assert.Equal(t, 5*(tc.traces+1), sink.SpanCount())
		})
	}
}

func TestVerdictsEndToEnd(t *testing.T) {
	const traces = 40
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	sink := new(consumertest.TracesSink)
	proc, _ := newTestProcessor(t, tt, testConfig(func(c *Config) { c.DecisionWait = 20 * time.Millisecond }), sink)
	ctx := context.Background()
	require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, proc.Shutdown(ctx)) })

	// A batch of whole traces and a trace split over batches by service.
	td := ptrace.NewTraces()
	for i := range traces - 1 {
		failingChain(td, traceID(uint64(i+1)))
	}
	require.NoError(t, proc.ConsumeTraces(ctx, td))
	whole := ptrace.NewTraces()
	failingChain(whole, traceID(1000))
	for i := range whole.ResourceSpans().Len() {
		part := ptrace.NewTraces()
		whole.ResourceSpans().At(i).CopyTo(part.ResourceSpans().AppendEmpty())
		require.NoError(t, proc.ConsumeTraces(ctx, part))
	}

	// Analysed once decision_wait has passed, without a shutdown.
	require.Eventually(t, func() bool { return counter(t, tt, "traces_analyzed") == traces },
		5*time.Second, 5*time.Millisecond)
	metadatatest.AssertEqualProcessorErrorownershipVerdicts(t, tt, []metricdata.DataPoint[int64]{
		{Attributes: attribute.NewSet(own), Value: traces},
		{Attributes: attribute.NewSet(propagated), Value: 2 * traces},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorErrorownershipSpansSeen(t, tt, []metricdata.DataPoint[int64]{
		{Value: 5 * traces},
	}, metricdatatest.IgnoreTimestamp())
	assert.Zero(t, counter(t, tt, "spans_late"))
	assert.Zero(t, counter(t, tt, "spans_unlinked", attribute.String("reason", "orphan")))
	metadatatest.AssertEqualProcessorErrorownershipBufferTraces(t, tt, []metricdata.DataPoint[int64]{{Value: 0}},
		metricdatatest.IgnoreTimestamp())
	// frontend → api and api → db, however many traces and workers.
	metadatatest.AssertEqualProcessorErrorownershipEdges(t, tt, []metricdata.DataPoint[int64]{{Value: 2}},
		metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorErrorownershipEdgesEvicted(t, tt, []metricdata.DataPoint[int64]{{Value: 0}},
		metricdatatest.IgnoreTimestamp())

	hist, err := tt.GetMetric("otelcol_processor_errorownership_analysis_duration")
	require.NoError(t, err)
	timed := 0
	for i := range traces - 1 {
		if durationSampled(traceID(uint64(i + 1))) {
			timed++
		}
	}
	if durationSampled(traceID(1000)) {
		timed++
	}
	require.NotZero(t, timed, "the test's trace IDs include timed ones")
	assert.EqualValues(t, timed, hist.Data.(metricdata.Histogram[float64]).DataPoints[0].Count,
		"one analysis duration per timed trace")
}

// TestDecisionWaitAndLateSpans moves the buffer's clock by hand, so that
// what it proves does not depend on how fast a loaded machine runs.
func TestDecisionWaitAndLateSpans(t *testing.T) {
	const wait = 200 * time.Millisecond
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	proc, p := newTestProcessor(t, tt, testConfig(func(c *Config) { c.DecisionWait = wait }), consumertest.NewNop())
	var clock atomic.Int64
	p.buffer.SetClock(clock.Load)
	at := func(d time.Duration) {
		clock.Store(int64(d))
		p.buffer.Wake()
	}
	ctx := context.Background()
	require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, proc.Shutdown(ctx)) })

	whole := ptrace.NewTraces()
	failingChain(whole, traceID(7))
	// One resource a service: frontend's, api's and db's spans, sent apart.
	parts := make([]ptrace.Traces, whole.ResourceSpans().Len())
	for i := range parts {
		parts[i] = ptrace.NewTraces()
		whole.ResourceSpans().At(i).CopyTo(parts[i].ResourceSpans().AppendEmpty())
	}
	first := parts[0]
	analysed := func() int64 { return counter(t, tt, "traces_analyzed") }

	// Spans that keep arriving within decision_wait hold the analysis
	// back: the trace is due decision_wait after its last span, not its
	// first. Had it been judged when the first was due, it would have
	// been analysed in two parts.
	require.NoError(t, proc.ConsumeTraces(ctx, parts[0]))
	at(wait - time.Millisecond)
	require.NoError(t, proc.ConsumeTraces(ctx, parts[1]))
	at(2*wait - 2*time.Millisecond) // past the first part's due time, not the second's
	require.Never(t, func() bool { return analysed() > 0 }, 50*time.Millisecond, time.Millisecond,
		"analysed before decision_wait had passed since its last span")
	require.NoError(t, proc.ConsumeTraces(ctx, parts[2]))
	at(3*wait - 2*time.Millisecond) // the last part's due time
	require.Eventually(t, func() bool { return analysed() == 1 }, 10*time.Second, time.Millisecond)
	assert.EqualValues(t, 1, counter(t, tt, "verdicts", own), "analysed whole")
	assert.Zero(t, counter(t, tt, "spans_late", lateDecisionWait))

	// A span of an analysed trace is late and starts a new entry.
	require.NoError(t, proc.ConsumeTraces(ctx, first))
	assert.EqualValues(t, 2, counter(t, tt, "spans_late", lateDecisionWait))
	assert.Zero(t, counter(t, tt, "spans_late", lateEvicted))
	at(5 * wait)
	require.Eventually(t, func() bool { return analysed() == 2 }, 10*time.Second, time.Millisecond)
}

func TestPassThroughScenarios(t *testing.T) {
	type input struct {
		name    string
		batches []ptrace.Traces
		want    *scenario.Expected
	}
	inputs := []input{{name: "mix", batches: []ptrace.Traces{scenario.Mix(200, 1), scenario.Mix(200, 2)}}}
	chain := ptrace.NewTraces()
	failingChain(chain, traceID(1))
	inputs = append(inputs, input{name: "hand-built chain", batches: []ptrace.Traces{chain}})
	files := scenarioFiles(t)
	require.NotEmpty(t, files, "no scenarios in testdata/scenarios")
	for _, f := range files {
		in := input{name: strings.TrimSuffix(filepath.Base(f), ".json"), batches: readScenario(t, f)}
		raw, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".expected.json")
		require.NoError(t, err)
		in.want = new(scenario.Expected)
		require.NoError(t, json.Unmarshal(raw, in.want))
		inputs = append(inputs, in)
	}

	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			tt := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
			sink := new(consumertest.TracesSink)
			proc, _ := newTestProcessor(t, tt, testConfig(nil), sink)
			ctx := context.Background()
			require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))

			var m ptrace.ProtoMarshaler
			spans := 0
			for i, td := range in.batches {
				before, err := m.MarshalTraces(td)
				require.NoError(t, err)
				// A processor that declares it does not mutate may be given
				// data read-only, as the pipeline does when it fans out: any
				// write to it panics (and is counted below).
				td.MarkReadOnly()
				require.NoError(t, proc.ConsumeTraces(ctx, td))
				require.Len(t, sink.AllTraces(), i+1, "passed on at once")
				after, err := m.MarshalTraces(sink.AllTraces()[i])
				require.NoError(t, err)
				require.Equal(t, before, after, "batch %d changed on its way through", i)
				spans += td.SpanCount()
			}
			require.NoError(t, proc.Shutdown(ctx))
			assert.Equal(t, spans, sink.SpanCount())
			assert.EqualValues(t, spans, counter(t, tt, "spans_seen"))
			assert.Zero(t, counter(t, tt, "spans_malformed"))
			assert.Zero(t, counter(t, tt, "spans_legacy_attributes"), "the scenarios use the current names")
			assert.Zero(t, counter(t, tt, "panics_recovered"))
			if in.want == nil {
				return
			}
			// The verdicts depend on what the model had learned when
			// each trace was judged, but their total does not.
			failed := 0
			for _, svc := range in.want.Services {
				for _, n := range svc.Verdicts {
					failed += n
				}
			}
			assert.EqualValues(t, failed, counter(t, tt, "verdicts", own)+
				counter(t, tt, "verdicts", propagated)+counter(t, tt, "verdicts", coincidental))
			assert.EqualValues(t, in.want.BrokenContext, counter(t, tt, "spans_unlinked", attribute.String("reason", "root_outbound")))
			assert.EqualValues(t, in.want.OrphanSpans, counter(t, tt, "spans_unlinked", attribute.String("reason", "orphan")))
		})
	}
}

func TestBoundedBuffer(t *testing.T) {
	const traces, batch = 200_000, 1000
	tests := []struct {
		name                string
		maxTraces, maxSpans int
	}{
		{name: "max_traces", maxTraces: 1000, maxSpans: 1_000_000},
		{name: "max_spans", maxTraces: 50_000, maxSpans: 1500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
			sink := new(consumertest.TracesSink)
			proc, p := newTestProcessor(t, tt, testConfig(func(c *Config) {
				c.MaxTraces, c.MaxSpans = tc.maxTraces, tc.maxSpans
			}), sink)
			ctx := context.Background()
			require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))

			// Watch the gauges while the flood runs.
			stop := make(chan struct{})
			var watched sync.WaitGroup
			var peakTraces, peakSpans atomic.Int64
			watched.Add(1)
			go func() {
				defer watched.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
						peakTraces.Store(max(peakTraces.Load(), counter(t, tt, "buffer_traces")))
						peakSpans.Store(max(peakSpans.Load(), counter(t, tt, "buffer_spans")))
					}
				}
			}()
			for i := 0; i < traces; i += batch {
				require.NoError(t, proc.ConsumeTraces(ctx, singleSpans(uint64(i+1), batch)))
			}
			close(stop)
			watched.Wait()
			require.NoError(t, proc.Shutdown(ctx))

			assert.LessOrEqual(t, peakTraces.Load(), int64(tc.maxTraces))
			assert.LessOrEqual(t, peakSpans.Load(), int64(tc.maxSpans))
			totalTraces, totalSpans := 0, 0
			for _, s := range p.buffer.Shards() {
				shareTraces, shareSpans := s.Capacity()
				peakTraces, peakSpans := s.Peak()
				assert.LessOrEqual(t, peakTraces, shareTraces)
				assert.LessOrEqual(t, peakSpans, shareSpans)
				totalTraces += shareTraces
				totalSpans += shareSpans
			}
			assert.Equal(t, tc.maxTraces, totalTraces, "the shards' shares add up to max_traces")
			assert.Equal(t, tc.maxSpans, totalSpans, "the shards' shares add up to max_spans")

			assert.Equal(t, traces, sink.SpanCount(), "the pass-through lost nothing")
			evicted := counter(t, tt, "traces_evicted")
			assert.Greater(t, evicted, int64(traces/2))
			// Every trace was analysed or, when the workers fell behind, dropped.
			analysed, dropped := counter(t, tt, "traces_analyzed"), counter(t, tt, "spans_dropped")
			assert.EqualValues(t, traces, analysed+dropped)
			assert.LessOrEqual(t, dropped, evicted)
			assert.Zero(t, counter(t, tt, "spans_late", lateDecisionWait))
			t.Logf("evicted %d, analysed %d, dropped %d", evicted, analysed, dropped)
		})
	}
}

// panicSink panics on Flush.
type panicSink struct{}

func (panicSink) Flush(context.Context, *sink.Snapshot) error { panic("sink broke") }

func TestPanicsRecovered(t *testing.T) {
	tests := []struct {
		name     string
		sabotage func(p *ownershipProcessor)
	}{
		{name: "extraction", sabotage: func(p *ownershipProcessor) {
			p.scratch.New = func() any { return &scratch{} } // nil extractor
		}},
		{name: "analysis", sabotage: func(p *ownershipProcessor) { p.edges = nil }},
		{name: "sink", sabotage: func(p *ownershipProcessor) { p.sink = panicSink{} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
			sink := new(consumertest.TracesSink)
			proc, p := newTestProcessor(t, tt, testConfig(nil), sink)
			tc.sabotage(p)
			ctx := context.Background()
			require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
			td := ptrace.NewTraces()
			failingChain(td, traceID(1))
			require.NoError(t, proc.ConsumeTraces(ctx, td))
			require.NoError(t, proc.Shutdown(ctx))
			assert.Equal(t, 5, sink.SpanCount(), "spans pass whatever the analysis does")
			assert.EqualValues(t, 1, counter(t, tt, "panics_recovered"))
		})
	}
}

// recordingSink keeps what the processor flushed.
type recordingSink struct {
	mu      sync.Mutex
	buckets []bucket
	fail    bool
}

type bucket struct {
	start, end time.Time
	traces     uint64
	services   []string
}

func (s *recordingSink) Flush(_ context.Context, snap *sink.Snapshot) error {
	b := bucket{start: snap.Start, end: snap.End, traces: snap.Stats.Traces}
	for k := range snap.Stats.Operations {
		b.services = append(b.services, snap.Symbols.Name(k.Service))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buckets = append(s.buckets, b)
	if s.fail {
		return errors.New("database unreachable")
	}
	return nil
}

func (s *recordingSink) all() []bucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bucket(nil), s.buckets...)
}

func TestFlushToSink(t *testing.T) {
	tests := []struct {
		name string
		fail bool
	}{
		{name: "sink accepts"},
		{name: "sink fails: logged, analysis goes on", fail: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
			proc, p := newTestProcessor(t, tt, testConfig(func(c *Config) {
				c.DecisionWait = 5 * time.Millisecond
				c.FlushInterval = 20 * time.Millisecond
			}), consumertest.NewNop())
			rec := &recordingSink{fail: tc.fail}
			p.sink = rec
			ctx := context.Background()
			require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))

			sum := func() (n uint64) {
				for _, b := range rec.all() {
					n += b.traces
				}
				return n
			}
			for i := range 3 {
				td := ptrace.NewTraces()
				failingChain(td, traceID(uint64(i+1)))
				require.NoError(t, proc.ConsumeTraces(ctx, td))
			}
			require.Eventually(t, func() bool { return sum() == 3 }, 5*time.Second, time.Millisecond, "periodic flush")

			// What is analysed at shutdown reaches the sink in the final flush.
			td := ptrace.NewTraces()
			failingChain(td, traceID(100))
			require.NoError(t, proc.ConsumeTraces(ctx, td))
			require.NoError(t, proc.Shutdown(ctx))
			assert.EqualValues(t, 4, sum())

			buckets := rec.all()
			for i, b := range buckets {
				assert.True(t, b.start.Before(b.end), "bucket %d", i)
				if i > 0 {
					assert.False(t, b.start.Before(buckets[i-1].end), "buckets %d and %d overlap", i-1, i)
				}
				assert.ElementsMatch(t, []string{"frontend", "api", "db"}, b.services)
			}
		})
	}
}

func TestShutdownOutOfTime(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	proc, _ := newTestProcessor(t, tt, testConfig(nil), consumertest.NewNop())
	require.NoError(t, proc.Start(context.Background(), componenttest.NewNopHost()))
	const traces = 20_000
	for i := 0; i < traces; i += 1000 {
		require.NoError(t, proc.ConsumeTraces(context.Background(), singleSpans(uint64(i+1), 1000)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, proc.Shutdown(ctx), context.Canceled)
	// Whatever was cut short is counted, and no goroutine is left behind.
	analysed, dropped := counter(t, tt, "traces_analyzed"), counter(t, tt, "spans_dropped")
	assert.EqualValues(t, traces, analysed+dropped)
	assert.Positive(t, dropped)
	goleak.VerifyNone(t)
}

// TestSweepFreesWhatNothingHolds: a burst of high-cardinality span names
// fills the name table; the next flush frees them, keeps the names the
// edge model still holds, and new names are learned again instead of all
// counting as "_other" from then on.
func TestSweepFreesWhatNothingHolds(t *testing.T) {
	defer func(limit int) { symbolLimit = limit }(symbolLimit)
	symbolLimit = 1000
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	proc, p := newTestProcessor(t, tt, testConfig(func(c *Config) {
		c.DecisionWait = 5 * time.Millisecond
		c.FlushInterval = time.Hour // flushed by hand
		c.EdgeModel.HalfLife = 0    // the test's spans are old: keep their edges
	}), consumertest.NewNop())
	rec := &recordingSink{}
	p.sink = rec
	ctx := context.Background()
	require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, proc.Shutdown(ctx)) })
	analysed := func(n int64) {
		require.Eventually(t, func() bool { return counter(t, tt, "traces_analyzed") == n }, 10*time.Second, time.Millisecond)
	}

	chain := ptrace.NewTraces()
	failingChain(chain, traceID(1))
	require.NoError(t, proc.ConsumeTraces(ctx, chain))
	analysed(1)
	const junk = 1100
	for i := 0; i < junk; i += 100 {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "db")
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for j := range 100 {
			sp := spans.AppendEmpty()
			sp.SetTraceID(traceID(uint64(1000 + i + j)))
			sp.SetSpanID(pcommon.SpanID{7: 1})
			sp.SetKind(ptrace.SpanKindServer)
			sp.SetName(fmt.Sprintf("SELECT * FROM orders WHERE id = %d", i+j))
		}
		require.NoError(t, proc.ConsumeTraces(ctx, td))
	}
	analysed(1 + junk)
	require.Positive(t, p.symbols.Overflowed(), "the burst filled the table")

	p.flush(ctx, false)
	assert.Less(t, p.symbols.Len(), 50, "the burst's names are freed")
	view, err := p.edges.View(ctx)
	require.NoError(t, err)
	var peers []string
	for _, e := range view.Edges("frontend") {
		peers = append(peers, e.PeerService)
	}
	assert.Equal(t, []string{"api"}, peers, "the model's names survive the sweep")

	newcomer := ptrace.NewTraces()
	appendTrace(newcomer, traceID(5000), span{service: "newcomer", id: 1, kind: ptrace.SpanKindServer, name: "GET /new", end: 1})
	require.NoError(t, proc.ConsumeTraces(ctx, newcomer))
	analysed(2 + junk)
	p.flush(ctx, false)
	buckets := rec.all()
	assert.Equal(t, []string{"newcomer"}, buckets[len(buckets)-1].services, "a new name is learned after the sweep")
}
