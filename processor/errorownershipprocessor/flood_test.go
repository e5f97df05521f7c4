// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

import (
	"context"
	"encoding/binary"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/errorownership/errorownership/dependencyanalysis"
)

// liveHeap is the heap the last garbage collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapWatch samples the live heap, collecting garbage before each sample,
// until stopped, and keeps the most it saw.
type heapWatch struct {
	base, peak atomic.Uint64
	stop       chan struct{}
	done       sync.WaitGroup
}

func watchHeap() *heapWatch {
	runtime.GC()
	w := &heapWatch{stop: make(chan struct{})}
	w.base.Store(liveHeap())
	w.done.Go(func() {
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
				runtime.GC()
				w.peak.Store(max(w.peak.Load(), liveHeap()))
			}
		}
	})
	return w
}

// grown stops the watch and reports the most the live heap grew by.
func (w *heapWatch) grown() uint64 {
	close(w.stop)
	w.done.Wait()
	runtime.GC()
	peak := max(w.peak.Load(), liveHeap())
	return peak - min(peak, w.base.Load())
}

// countingSink counts the spans passed on and keeps none, so that the
// heap measured is the processor's.
type countingSink struct{ spans atomic.Int64 }

func (c *countingSink) consumer(t *testing.T) consumer.Traces {
	next, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		c.spans.Add(int64(td.SpanCount()))
		return nil
	})
	require.NoError(t, err)
	return next
}

// chain returns n spans of trace tid, span IDs from first on: a chain of
// SERVER spans, each calling the next through a CLIENT span, the deepest
// failing, as a very deep or very wide trace reaches the collector a
// batch at a time.
func chain(tid pcommon.TraceID, first uint64, n int, at pcommon.Timestamp) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "deep")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	spans.EnsureCapacity(n)
	for i := range uint64(n) {
		id := first + i
		sp := spans.AppendEmpty()
		sp.SetTraceID(tid)
		var sid, parent pcommon.SpanID
		binary.BigEndian.PutUint64(sid[:], id)
		binary.BigEndian.PutUint64(parent[:], id-1)
		sp.SetSpanID(sid)
		if id > 1 {
			sp.SetParentSpanID(parent)
		}
		sp.SetStartTimestamp(at)
		sp.SetEndTimestamp(at + 1000)
		if id%2 == 1 {
			sp.SetKind(ptrace.SpanKindServer)
			sp.SetName("GET /deep")
		} else {
			sp.SetKind(ptrace.SpanKindClient)
			sp.SetName("GET")
			sp.Attributes().PutStr("server.address", "deep.internal")
		}
		sp.Status().SetCode(ptrace.StatusCodeError)
	}
	return td
}

// floodConfig is the configuration the floods run against: small bounds,
// so that a flood passes them many times over within a test.
func floodConfig(c *Config) {
	c.MaxTraces, c.MaxSpans = 2_000, 40_000
	c.DecisionWait = 100 * time.Millisecond
	c.FlushInterval = time.Second
	c.NumWorkers = 2
	// Failures on edges that never get a mode fill the held requests.
	c.Rejudge = RejudgeConfig{MaxHeld: 10_000, MaxAge: time.Hour}
	c.EdgeModel.MinSamples = 1 << 20
}

// TestFloodsStayWithinTheHeapBound floods the processor in every way the
// README's memory section names and checks that the live heap it holds
// stays under the bound stated there for its configuration, that what it
// could not keep is counted, and that every span was passed on.
func TestFloodsStayWithinTheHeapBound(t *testing.T) {
	hoursAgo := pcommon.NewTimestampFromTime(time.Now().Add(-3 * time.Hour))
	now := pcommon.NewTimestampFromTime(time.Now())
	tests := []struct {
		name string
		// start says whether the workers run: without them nothing is
		// analysed, the most the workers can fall behind.
		start bool
		feed  func(send func(ptrace.Traces))
		// counted are counters, with their attributes, the flood must
		// have moved.
		counted map[string][]attribute.KeyValue
	}{
		{
			name:  "ten times more distinct traces than max_traces",
			start: true,
			feed: func(send func(ptrace.Traces)) {
				for i := 0; i < 20_000; i += 500 {
					send(singleSpans(uint64(i+1), 500))
				}
			},
			counted: map[string][]attribute.KeyValue{"traces_evicted": nil},
		},
		{
			name:  "traces of 100,000 spans",
			start: true,
			feed: func(send func(ptrace.Traces)) {
				for tr := uint64(1); tr <= 3; tr++ {
					for first := uint64(1); first <= 100_000; first += 1000 {
						send(chain(traceID(1_000_000+tr), first, 1000, now))
					}
				}
			},
			counted: map[string][]attribute.KeyValue{"spans_dropped": nil},
		},
		{
			name:  "spans arriving hours late",
			start: true,
			feed: func(send func(ptrace.Traces)) {
				for tr := uint64(1); tr <= 200; tr++ {
					send(chain(traceID(2_000_000+tr), 1, 50, hoursAgo))
				}
				time.Sleep(500 * time.Millisecond) // every trace analysed
				for tr := uint64(1); tr <= 200; tr++ {
					send(chain(traceID(2_000_000+tr), 51, 50, hoursAgo))
				}
			},
			counted: map[string][]attribute.KeyValue{"spans_late": {lateDecisionWait}},
		},
		{
			name:  "more than the workers can analyse",
			start: false,
			feed: func(send func(ptrace.Traces)) {
				for i := 0; i < 300_000; i += 1000 {
					send(singleSpans(uint64(3_000_000+i), 1000))
				}
				for tr := uint64(1); tr <= 100; tr++ {
					send(chain(traceID(4_000_000+tr), 1, 2000, now))
				}
			},
			counted: map[string][]attribute.KeyValue{"traces_evicted": nil, "spans_dropped": nil},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
			var sink countingSink
			cfg := testConfig(floodConfig)
			proc, _ := newTestProcessor(t, tt, cfg, sink.consumer(t))
			ctx := context.Background()
			if tc.start {
				require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
			}
			heap := watchHeap()
			sent := 0
			tc.feed(func(td ptrace.Traces) {
				sent += td.SpanCount()
				require.NoError(t, proc.ConsumeTraces(ctx, td))
			})
			grown := heap.grown()
			require.NoError(t, proc.Shutdown(ctx))

			bound := heapBound(cfg)
			t.Logf("live heap grew by %d KiB; the bound for this configuration is %d KiB", grown>>10, bound>>10)
			assert.LessOrEqual(t, grown, bound, "the live heap passed the README's bound")
			assert.EqualValues(t, sent, sink.spans.Load(), "every span passed on")
			for name, attrs := range tc.counted {
				assert.Positive(t, counter(t, tt, name, attrs...), name)
			}
		})
	}
}

// heapBound is the README's bound on the heap the processor holds (its
// Memory section), for cfg, without a store and with a few dozen names and
// edges.
func heapBound(cfg *Config) uint64 {
	// The floods' requests have at most two failed calls each.
	held := uint64(dependencyanalysis.HeldBytes+2*dependencyanalysis.HeldCallBytes) * uint64(cfg.Rejudge.MaxHeld)
	return (64+256)*uint64(cfg.MaxSpans) + 512*uint64(cfg.MaxTraces) + held + 8<<20
}
