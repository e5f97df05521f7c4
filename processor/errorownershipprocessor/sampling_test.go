// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
)

// setTraceState sets the W3C tracestate of every span of trace tid in td,
// as a sampler upstream does.
func setTraceState(td ptrace.Traces, tid pcommon.TraceID, ts string) {
	for i := range td.ResourceSpans().Len() {
		sss := td.ResourceSpans().At(i).ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			for k := range spans.Len() {
				if sp := spans.At(k); sp.TraceID() == tid {
					sp.TraceState().FromRaw(ts)
				}
			}
		}
	}
}

// TestSamplingTelemetry: whole traces are counted by how their weight was
// known, incomplete ones by why they were set apart and not judged.
func TestSamplingTelemetry(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	proc, _ := newTestProcessor(t, tt, testConfig(nil), consumertest.NewNop())
	ctx := context.Background()
	require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))

	td := ptrace.NewTraces()
	// 10 %, randomness given by rv: db's own error and two propagated.
	failingChain(td, traceID(1))
	setTraceState(td, traceID(1), "ot=th:e666;rv:ffffffffffffff")
	// No sampling information: counted, and failed.
	failingChain(td, traceID(2))
	// The api's server span never came: two trees.
	appendTrace(td, traceID(3),
		span{service: "frontend", id: 1, kind: ptrace.SpanKindServer, name: "GET /home", failed: true, end: 10},
		span{service: "frontend", id: 2, parent: 1, kind: ptrace.SpanKindClient, name: "GET /api", peer: "api", failed: true, startMs: 1, end: 9},
		span{service: "api", id: 4, parent: 3, kind: ptrace.SpanKindClient, name: "GET /db", peer: "db", failed: true, startMs: 3, end: 7},
		span{service: "db", id: 5, parent: 4, kind: ptrace.SpanKindServer, name: "GET /db", failed: true, startMs: 4, end: 6},
	)
	// A threshold the trace ID's randomness (its last 56 bits, small here)
	// contradicts.
	failingChain(td, traceID(4))
	setTraceState(td, traceID(4), "ot=th:e666")
	require.NoError(t, proc.ConsumeTraces(ctx, td))
	require.NoError(t, proc.Shutdown(ctx))

	for _, c := range []struct {
		name   string
		metric string
		attr   attribute.KeyValue
		want   int64
	}{
		{"extrapolated", "traces_sampling", attribute.String("sampling_method", "extrapolated"), 1},
		{"counted", "traces_sampling", attribute.String("sampling_method", "counted"), 1},
		{"missing parent", "traces_incomplete", attribute.String("incomplete", "missing_parent"), 1},
		{"inconsistent sampling", "traces_incomplete", attribute.String("incomplete", "inconsistent_sampling"), 1},
		{"missing callee", "traces_incomplete", attribute.String("incomplete", "missing_callee"), 0},
		{"own verdicts, of the whole traces only", "verdicts", attribute.String("verdict", "own"), 2},
		{"propagated verdicts", "verdicts", attribute.String("verdict", "propagated"), 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, counter(t, tt, c.metric, c.attr))
		})
	}
	assert.EqualValues(t, 1, counter(t, tt, "traces_counted_failed"))
	assert.EqualValues(t, 4, counter(t, tt, "traces_analyzed"))
}

// statusHost keeps the status events the processor reports.
type statusHost struct {
	component.Host
	mu     sync.Mutex
	events []*componentstatus.Event
}

func (h *statusHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
}

func (h *statusHost) last() *componentstatus.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) == 0 {
		return nil
	}
	return h.events[len(h.events)-1]
}

// TestSamplingWarning: a flush whose traces carry no sampling information
// while most of them failed, as behind a tail sampler that keeps errors,
// makes the status say the figures are not estimates of traffic; a flush
// that does not look so clears it.
func TestSamplingWarning(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	cfg := testConfig(func(c *Config) { c.DecisionWait = minDecisionWait })
	proc, p := newTestProcessor(t, tt, cfg, consumertest.NewNop())
	ctx := context.Background()
	host := &statusHost{Host: componenttest.NewNopHost()}
	require.NoError(t, proc.Start(ctx, host))
	t.Cleanup(func() { require.NoError(t, proc.Shutdown(ctx)) })

	next := uint64(1)
	send := func(failing, ok int, traceState string) {
		td := ptrace.NewTraces()
		for i := range failing + ok {
			tid := traceID(next)
			next++
			if i < failing {
				failingChain(td, tid)
			} else {
				appendTrace(td, tid, span{service: "frontend", id: 1, kind: ptrace.SpanKindServer, name: "GET /home", end: 10})
			}
			if traceState != "" {
				setTraceState(td, tid, traceState)
			}
		}
		require.NoError(t, proc.ConsumeTraces(ctx, td))
		require.Eventually(t, func() bool { return counter(t, tt, "traces_analyzed") == int64(next-1) },
			time.Minute, 10*time.Millisecond, "the traces are analysed")
		p.flush(ctx, false)
	}

	for _, step := range []struct {
		name          string
		failing, ok   int
		traceState    string
		want          componentstatus.Status
		wantInMessage string
	}{
		{"too few traces to tell", 60, 10, "", componentstatus.StatusNone, ""},
		{"most counted traces fail", 160, 40, "", componentstatus.StatusRecoverableError, "sampling.warn_failed_share"},
		{"a flush of extrapolated traces leaves it as it was", 200, 0, "ot=th:8;rv:ffffffffffffff", componentstatus.StatusRecoverableError, "sampling"},
		{"a flush that fails as traffic does clears it", 10, 190, "", componentstatus.StatusOK, ""},
	} {
		t.Run(step.name, func(t *testing.T) {
			send(step.failing, step.ok, step.traceState)
			ev := host.last()
			if step.want == componentstatus.StatusNone {
				assert.Nil(t, ev, "nothing reported")
				return
			}
			require.NotNil(t, ev)
			assert.Equal(t, step.want, ev.Status())
			if step.wantInMessage != "" {
				require.Error(t, ev.Err())
				assert.True(t, strings.Contains(ev.Err().Error(), step.wantInMessage), ev.Err().Error())
			}
		})
	}
}
