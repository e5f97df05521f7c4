// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

import (
	"compress/gzip"
	"context"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/errorownership/errorownership/internal/testsupport/scenario"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/metadatatest"
)

// Pipeline benchmark workload: batches of 50 traces of 20 spans over 7
// services, about 5 % with errors, some retried (scenario.Mix).
const (
	benchBatches        = 16
	benchTracesPerBatch = 50
)

func benchWorkload(b *testing.B) []ptrace.Traces {
	b.Helper()
	batches := make([]ptrace.Traces, benchBatches)
	for i := range batches {
		batches[i] = scenario.Mix(benchTracesPerBatch, int64(i+1))
	}
	return batches
}

// marshalOnly is the cheapest exporter there is: it marshals the batch to
// OTLP protobuf and discards the bytes. Against it the processor's cost
// looks largest.
func marshalOnly() consumer.Traces {
	var m ptrace.ProtoMarshaler
	next, _ := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		_, err := m.MarshalTraces(td)
		return err
	})
	return next
}

// otlpGzip does what the OTLP exporters do by default: marshal the batch to
// protobuf and compress it with gzip, their default compression.
func otlpGzip() consumer.Traces {
	var m ptrace.ProtoMarshaler
	zw := gzip.NewWriter(io.Discard)
	next, _ := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		b, err := m.MarshalTraces(td)
		if err != nil {
			return err
		}
		zw.Reset(io.Discard)
		if _, err := zw.Write(b); err != nil {
			return err
		}
		return zw.Close()
	})
	return next
}

// nopProcessor passes batches on, through the same processorhelper wrapper
// as the processor under test, so that the two differ only by the analysis.
func nopProcessor(b *testing.B, tt *componenttest.Telemetry, next consumer.Traces) processor.Traces {
	b.Helper()
	p, err := processorhelper.NewTraces(context.Background(), metadatatest.NewSettings(tt), nil, next,
		func(_ context.Context, td ptrace.Traces) (ptrace.Traces, error) { return td, nil },
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}))
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func ownershipUnderTest(b *testing.B, tt *componenttest.Telemetry, next consumer.Traces, mutate func(*Config)) processor.Traces {
	b.Helper()
	cfg := createDefaultConfig().(*Config)
	if mutate != nil {
		mutate(cfg)
	}
	set := metadatatest.NewSettings(tt)
	p, err := newOwnershipProcessor(set, cfg)
	if err != nil {
		b.Fatal(err)
	}
	tp, err := wrap(context.Background(), set, cfg, next, p)
	if err != nil {
		b.Fatal(err)
	}
	return tp
}

// BenchmarkPipeline runs the same batches through a no-op processor and
// through errorownership, each followed by an exporter, and reports:
//   - nop, errorownership: each pipeline alone, in spans/s;
//   - alternating-*: both in one loop, for three pipelines, and their
//     throughput ratio errorownership/nop (target ≥ 0.85);
//   - retained: heap bytes the buffer keeps per buffered span.
func BenchmarkPipeline(b *testing.B) {
	batches := benchWorkload(b)
	spansPerBatch := batches[0].SpanCount()
	ctx := context.Background()
	host := componenttest.NewNopHost()

	run := func(b *testing.B, p processor.Traces) {
		if err := p.Start(ctx, host); err != nil {
			b.Fatal(err)
		}
		var busy time.Duration
		b.ResetTimer()
		for i := range b.N {
			td := batches[i%len(batches)]
			scenario.Restamp(td, uint32(i/len(batches)+1))
			start := time.Now()
			if err := p.ConsumeTraces(ctx, td); err != nil {
				b.Fatal(err)
			}
			busy += time.Since(start)
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N*spansPerBatch)/busy.Seconds(), "spans/s")
		if err := p.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("nop", func(b *testing.B) {
		tt := componenttest.NewTelemetry()
		defer func() { require.NoError(b, tt.Shutdown(ctx)) }()
		run(b, nopProcessor(b, tt, marshalOnly()))
	})
	b.Run("errorownership", func(b *testing.B) {
		tt := componenttest.NewTelemetry()
		defer func() { require.NoError(b, tt.Shutdown(ctx)) }()
		run(b, ownershipUnderTest(b, tt, marshalOnly(), nil))
	})

	// Both pipelines in one loop, batch by batch, so that their ratio comes
	// from the same moments of the same run. "collector-gzip" is a whole
	// collector's work per batch: the OTLP receiver decoding the request,
	// the processor, and an OTLP exporter encoding it and compressing it
	// with gzip, the exporters' default; "collector-uncompressed" is the
	// same with `compression: none`; "marshal-only" leaves out decoding
	// too, the worst case for the ratio.
	for _, pipeline := range []struct {
		name   string
		decode bool
		export func() consumer.Traces
	}{
		{"alternating-collector-gzip", true, otlpGzip},
		{"alternating-collector-uncompressed", true, marshalOnly},
		{"alternating-marshal-only", false, marshalOnly},
	} {
		b.Run(pipeline.name, func(b *testing.B) {
			tt := componenttest.NewTelemetry()
			defer func() { require.NoError(b, tt.Shutdown(ctx)) }()
			nop := nopProcessor(b, tt, pipeline.export())
			eo := ownershipUnderTest(b, tt, pipeline.export(), nil)
			for _, p := range []processor.Traces{nop, eo} {
				if err := p.Start(ctx, host); err != nil {
					b.Fatal(err)
				}
			}
			requests := make([][]byte, len(batches))
			for i, td := range batches {
				var err error
				if requests[i], err = ptraceotlp.NewExportRequestFromTraces(td).MarshalProto(); err != nil {
					b.Fatal(err)
				}
			}
			var nopBusy, eoBusy time.Duration
			b.ResetTimer()
			for i := range b.N {
				gen := uint64(i/len(batches) + 1)
				// Alternate which goes first, so that neither always meets
				// the caches the other warmed.
				order := [2]processor.Traces{nop, eo}
				if i%2 == 1 {
					order = [2]processor.Traces{eo, nop}
				}
				for k, p := range order {
					start := time.Now()
					td := batches[i%len(batches)]
					if pipeline.decode {
						req := ptraceotlp.NewExportRequest()
						if err := req.UnmarshalProto(requests[i%len(requests)]); err != nil {
							b.Fatal(err)
						}
						td = req.Traces()
					}
					busy := time.Since(start)
					scenario.Restamp(td, uint32(2*gen+uint64(k))) // new traces, as in a live pipeline; not timed
					start = time.Now()
					if err := p.ConsumeTraces(ctx, td); err != nil {
						b.Fatal(err)
					}
					busy += time.Since(start)
					if p == eo {
						eoBusy += busy
					} else {
						nopBusy += busy
					}
				}
			}
			b.StopTimer()
			spans := float64(b.N * spansPerBatch)
			b.ReportMetric(spans/nopBusy.Seconds(), "nop-spans/s")
			b.ReportMetric(spans/eoBusy.Seconds(), "eo-spans/s")
			b.ReportMetric(nopBusy.Seconds()/eoBusy.Seconds(), "ratio")
			for _, p := range []processor.Traces{nop, eo} {
				if err := p.Shutdown(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}

	b.Run("retained", func(b *testing.B) {
		const rounds = 200 // 200 batches of 1,000 spans
		var perSpan float64
		for range b.N {
			tt := componenttest.NewTelemetry()
			p := ownershipUnderTest(b, tt, marshalOnly(), func(c *Config) {
				c.DecisionWait = time.Hour
				c.MaxTraces = 1 << 30
				c.MaxSpans = 1 << 30
			})
			if err := p.Start(ctx, host); err != nil {
				b.Fatal(err)
			}
			// Warm up: intern the names and fill the pools.
			scenario.Restamp(batches[0], 1<<31)
			_ = p.ConsumeTraces(ctx, batches[0])
			before := heapAlloc()
			for i := range rounds {
				td := batches[i%len(batches)]
				scenario.Restamp(td, uint32(i+1))
				_ = p.ConsumeTraces(ctx, td)
			}
			after := heapAlloc()
			perSpan = float64(after-before) / float64(rounds*spansPerBatch)
			runtime.KeepAlive(p)
			_ = p.Shutdown(ctx)
			_ = tt.Shutdown(ctx)
		}
		b.ReportMetric(perSpan, "B/buffered-span")
	})
}

func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
