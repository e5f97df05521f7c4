// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

import (
	"bufio"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/metadatatest"
)

// span describes a span for tests; IDs are small numbers within a trace.
type span struct {
	service      string
	id, parent   byte
	kind         ptrace.SpanKind
	name         string
	peer         string
	failed       bool
	startMs, end int
}

func traceID(n uint64) pcommon.TraceID {
	var id pcommon.TraceID
	binary.BigEndian.PutUint64(id[8:], n)
	id[0] = 1
	return id
}

// appendTrace adds one trace to td, a ResourceSpans per run of spans of the
// same service, as SDKs export them.
func appendTrace(td ptrace.Traces, tid pcommon.TraceID, spans ...span) {
	var ss ptrace.SpanSlice
	prev := ""
	for _, s := range spans {
		if s.service != prev || prev == "" {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", s.service)
			ss = rs.ScopeSpans().AppendEmpty().Spans()
			prev = s.service
		}
		sp := ss.AppendEmpty()
		sp.SetTraceID(tid)
		sp.SetSpanID(pcommon.SpanID{7: s.id})
		if s.parent != 0 {
			sp.SetParentSpanID(pcommon.SpanID{7: s.parent})
		}
		sp.SetName(s.name)
		sp.SetKind(s.kind)
		base := time.Unix(1_700_000_000, 0)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Duration(s.startMs) * time.Millisecond)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Duration(s.end) * time.Millisecond)))
		if s.peer != "" {
			sp.Attributes().PutStr("service.peer.name", s.peer)
		}
		if s.failed {
			sp.Status().SetCode(ptrace.StatusCodeError)
		}
	}
}

// failingChain is frontend → api → db, where db fails on its own and the
// two callers above it fail because it did: one own and two propagated
// verdicts.
func failingChain(td ptrace.Traces, tid pcommon.TraceID) {
	appendTrace(td, tid,
		span{service: "frontend", id: 1, kind: ptrace.SpanKindServer, name: "GET /home", failed: true, end: 10},
		span{service: "frontend", id: 2, parent: 1, kind: ptrace.SpanKindClient, name: "GET /api", peer: "api", failed: true, startMs: 1, end: 9},
		span{service: "api", id: 3, parent: 2, kind: ptrace.SpanKindServer, name: "GET /api", failed: true, startMs: 2, end: 8},
		span{service: "api", id: 4, parent: 3, kind: ptrace.SpanKindClient, name: "GET /db", peer: "db", failed: true, startMs: 3, end: 7},
		span{service: "db", id: 5, parent: 4, kind: ptrace.SpanKindServer, name: "GET /db", failed: true, startMs: 4, end: 6},
	)
}

// singleSpans returns n traces of one span each, IDs from first on.
func singleSpans(first uint64, n int) ptrace.Traces {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty()
	ss.Resource().Attributes().PutStr("service.name", "flood")
	spans := ss.ScopeSpans().AppendEmpty().Spans()
	spans.EnsureCapacity(n)
	for i := range n {
		sp := spans.AppendEmpty()
		sp.SetTraceID(traceID(first + uint64(i)))
		sp.SetSpanID(pcommon.SpanID{7: 1})
		sp.SetName("GET /")
		sp.SetKind(ptrace.SpanKindServer)
	}
	return td
}

// newTestProcessor builds the processor through its factory, with its
// telemetry recorded in tt, and starts it.
func newTestProcessor(t testing.TB, tt *componenttest.Telemetry, cfg *Config, next consumer.Traces, opts ...func(*processor.Settings)) (processor.Traces, *ownershipProcessor) {
	t.Helper()
	set := metadatatest.NewSettings(tt)
	for _, o := range opts {
		o(&set)
	}
	p, err := newOwnershipProcessor(set, cfg)
	require.NoError(t, err)
	tp, err := wrap(context.Background(), set, cfg, next, p)
	require.NoError(t, err)
	return tp, p
}

func testConfig(mutate func(*Config)) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.DecisionWait = time.Hour // only Shutdown analyses, unless a test says otherwise
	cfg.NumWorkers = 2
	// Each verdict counted when its trace is analysed, as the tests of the
	// rest assume; the tests of holding (rejudge_test.go) turn it on.
	cfg.Rejudge = RejudgeConfig{}
	if mutate != nil {
		mutate(cfg)
	}
	return cfg
}

// The causes of late spans, as spans_late tells them.
var (
	lateDecisionWait = attribute.String("cause", "decision_wait")
	lateEvicted      = attribute.String("cause", "evicted")
)

// counter reads an Int64 counter's value for attrs; 0 if never recorded.
func counter(t testing.TB, tt *componenttest.Telemetry, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	m, err := tt.GetMetric("otelcol_processor_errorownership_" + name)
	if err != nil {
		return 0
	}
	want := attribute.NewSet(attrs...)
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			if dp.Attributes.Equals(&want) {
				return dp.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			if dp.Attributes.Equals(&want) {
				return dp.Value
			}
		}
	default:
		t.Fatalf("%s is a %T, not an int64 sum or gauge", name, m.Data)
	}
	return 0
}

// scenarioFiles lists the OTLP JSON scenarios in the repository's testdata.
func scenarioFiles(t testing.TB) []string {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "scenarios", "*.json"))
	require.NoError(t, err)
	var out []string
	for _, f := range files {
		if filepath.Ext(f[:len(f)-len(".json")]) != ".expected" {
			out = append(out, f)
		}
	}
	return out
}

// readScenario reads one ptrace.Traces per line of an OTLP JSON file.
func readScenario(t testing.TB, path string) []ptrace.Traces {
	f, err := os.Open(path) //nolint:gosec // G304: a scenario file of the repository's testdata
	require.NoError(t, err)
	defer f.Close()
	var out []ptrace.Traces
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var u ptrace.JSONUnmarshaler
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		td, err := u.UnmarshalTraces(sc.Bytes())
		require.NoError(t, err, path)
		out = append(out, td)
	}
	require.NoError(t, sc.Err())
	return out
}
