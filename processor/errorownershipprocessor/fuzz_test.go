// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

import (
	"context"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store/pgtest"
)

// hostileTraces is a batch of what a broken or hostile sender may send,
// all at once: zero, duplicate, self-parent and cyclic IDs, every span
// kind and one that is none, absurd timestamps, enormous and invalid
// UTF-8 names and values, attributes of every type under the keys the
// extractor reads, and resources without a service.name.
func hostileTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	huge := strings.Repeat("x", 64<<10)
	invalid := "bad\xff\xfe\x00utf8"
	tid := pcommon.TraceID{1, 2, 3}
	for _, svc := range []string{"", invalid, huge[:5000]} {
		rs := td.ResourceSpans().AppendEmpty()
		if svc != "" {
			rs.Resource().Attributes().PutStr("service.name", svc)
		}
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		add := func(id, parent byte, kind ptrace.SpanKind, name string, start, end uint64) ptrace.Span {
			sp := spans.AppendEmpty()
			sp.SetTraceID(tid)
			sp.SetSpanID(pcommon.SpanID{7: id})
			if parent != 0 {
				sp.SetParentSpanID(pcommon.SpanID{7: parent})
			}
			sp.SetKind(kind)
			sp.SetName(name)
			sp.SetStartTimestamp(pcommon.Timestamp(start))
			sp.SetEndTimestamp(pcommon.Timestamp(end))
			return sp
		}
		add(0, 0, ptrace.SpanKindServer, "zero span ID", 1, 2)
		root := add(1, 0, ptrace.SpanKindServer, invalid, 0, math.MaxUint64)
		root.Status().SetCode(ptrace.StatusCodeError)
		root.Attributes().PutStr(ownership.AttrClaim, invalid)
		add(1, 0, ptrace.SpanKindClient, "duplicate", 5, 3)
		add(2, 2, ptrace.SpanKindInternal, "self parent", math.MaxUint64, 0)
		add(3, 4, ptrace.SpanKindProducer, huge, 10, 20)
		add(4, 3, ptrace.SpanKindConsumer, "cycle", 10, 20)
		add(5, 1, ptrace.SpanKind(99), "no such kind", 10, 20)
		cl := add(6, 1, ptrace.SpanKindClient, "GET", 10, 20)
		cl.Status().SetCode(ptrace.StatusCodeError)
		a := cl.Attributes()
		a.PutStr("server.address", huge)
		a.PutInt("server.port", -5)
		a.PutStr("http.response.status_code", "five hundred")
		a.PutDouble("rpc.grpc.status_code", math.Inf(1))
		a.PutBool("http.request.resend_count", true)
		a.PutEmptyMap("url.template").PutStr("nested", invalid)
		a.PutEmptySlice("peer.service").AppendEmpty().SetStr(invalid)
		a.PutStr("url.full", "http://"+invalid+"/a?b#c")
		a.PutStr(ownership.AttrRetryDecision, huge)
		a.PutInt(ownership.AttrRetryAttempt, math.MaxInt64)
		a.PutStr("error.type", invalid)
		add(7, 6, ptrace.SpanKindServer, "GET /callee", 12, 18).Attributes().PutInt("http.response.status_code", math.MinInt64)
	}
	return td
}

// fuzzSeeds adds the bundled scenarios and the hostile batch, as OTLP
// protobuf and as OTLP JSON; inputs the fuzzer found are kept beside them
// in testdata/fuzz.
func fuzzSeeds(f *testing.F) {
	var pm ptrace.ProtoMarshaler
	var jm ptrace.JSONMarshaler
	add := func(td ptrace.Traces) {
		for _, m := range []ptrace.Marshaler{&pm, &jm} {
			b, err := m.MarshalTraces(td)
			require.NoError(f, err)
			f.Add(b)
		}
	}
	add(hostileTraces())
	paths, err := filepath.Glob(filepath.Join("..", "..", "testdata", "scenarios", "*.json"))
	require.NoError(f, err)
	for _, path := range paths {
		if strings.HasSuffix(path, ".expected.json") {
			continue
		}
		// One seed a scenario, its requests in one batch: a seed each
		// would make thousands, and the store's variant starts a
		// processor for each.
		all := ptrace.NewTraces()
		for _, td := range readScenario(f, path) {
			td.ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
		}
		add(all)
	}
}

// decodeOTLP reads data as OTLP protobuf or, failing that, OTLP JSON, as
// the OTLP receiver would take it.
func decodeOTLP(data []byte) (ptrace.Traces, bool) {
	if td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data); err == nil {
		return td, true
	}
	if td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(data); err == nil {
		return td, true
	}
	return ptrace.Traces{}, false
}

// fuzzProcessor feeds one decoded batch through a processor built as the
// collector builds it, shuts it down (which analyses everything buffered
// and flushes), and checks that nothing panicked, that every span was
// passed on unchanged, and that every span was seen: analysed, or counted
// as malformed.
func fuzzProcessor(t *testing.T, data []byte, mutate func(*Config)) {
	td, ok := decodeOTLP(data)
	if !ok {
		return
	}
	// A hang is a failure too: the fuzzer saves the input that caused it
	// only if the worker dies, so the watchdog crashes it with every
	// goroutine's stack.
	watchdog := time.AfterFunc(time.Minute, func() {
		buf := make([]byte, 1<<20)
		panic("the processor hung on this input:\n" + string(buf[:runtime.Stack(buf, true)]))
	})
	defer watchdog.Stop()
	want := ptrace.NewTraces()
	td.CopyTo(want)
	want.MarkReadOnly()
	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
	sink := new(consumertest.TracesSink)
	proc, p := newTestProcessor(t, tt, testConfig(func(c *Config) {
		c.DecisionWait = 100 * time.Millisecond
		if mutate != nil {
			mutate(c)
		}
	}), sink)
	ctx := context.Background()
	require.NoError(t, proc.Start(ctx, hostFor(t, p.cfg)))
	td.MarkReadOnly() // the pipeline may fan it out: the processor must not change it
	require.NoError(t, proc.ConsumeTraces(ctx, td))
	require.NoError(t, proc.Shutdown(ctx))

	require.Zero(t, counter(t, tt, "panics_recovered"), "the processor panicked")
	require.Len(t, sink.AllTraces(), 1)
	require.Equal(t, want, sink.AllTraces()[0], "the batch was passed on unchanged")
	require.EqualValues(t, want.SpanCount(), counter(t, tt, "spans_seen"))
	if p.storeSink != nil {
		st := p.storeSink.Writer.Stats()
		require.Zero(t, st.RejectedFlushes, "the database rejected a flush")
		require.Zero(t, st.DroppedFlushes, "a flush was dropped")
	}
}

// FuzzProcessor feeds arbitrary OTLP through the processor without a store.
func FuzzProcessor(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzProcessor(t, data, nil) })
}

// FuzzProcessorWithStore feeds arbitrary OTLP through the processor
// writing to a real PostgreSQL: a name the database cannot store must not
// cost a flush.
func FuzzProcessorWithStore(f *testing.F) {
	dsn := pgtest.Start(f).DSN()
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzProcessor(t, data, func(c *Config) {
			storeConfig(dsn)(c)
			c.FlushInterval = time.Second
		})
	})
}
