// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"encoding/binary"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/dependencyanalysis"
)

// BenchmarkBuffer feeds traces through a two-shard buffer and takes them
// out as the workers do once due: traces of 21 spans over 7 services in
// the two shapes batches come in, whole traces and spread, where each
// service's SDK exports its own spans, so that a trace comes in 7 batches
// of 3 spans; and one-span traces, 64,000 of them waiting, where what each
// trace costs whatever its size counts most.
func BenchmarkBuffer(b *testing.B) {
	const traces = 512 // in a round
	for _, shape := range []struct {
		name             string
		services, perSvc int
		spread           bool
		rounds           int64 // a trace waits
	}{
		{"whole", 7, 3, false, 1},
		{"spread", 7, 3, true, 1},
		{"one-span", 1, 1, false, 125},
	} {
		services, perSvc := shape.services, shape.perSvc
		b.Run(shape.name, func(b *testing.B) {
			buf := New(2, 2*traces*int(shape.rounds+1), 2*traces*int(shape.rounds+1)*services*perSvc, time.Duration(10*shape.rounds))
			var now int64
			buf.SetClock(func() int64 { return now })
			var sc Scratch
			var c Counts
			take := make([]*Entry, 0, 64)
			var batch dependencyanalysis.Batch
			next := uint64(1)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				first := next
				next += traces
				if shape.spread {
					for range services {
						batch.Reset()
						for t := first; t < next; t++ {
							appendSpans(&batch, t, perSvc)
						}
						buf.Add(&batch, &sc, now, &c)
					}
				} else {
					batch.Reset()
					for t := first; t < next; t++ {
						appendSpans(&batch, t, services*perSvc)
					}
					buf.Add(&batch, &sc, now, &c)
				}
				now += 10
				var scratch []dependencyanalysis.Span
				for _, s := range buf.Shards() {
					for {
						got, _, _ := s.TakeDue(now, take[:0])
						if len(got) == 0 {
							break
						}
						for _, e := range got {
							_ = e.Spans(&scratch)
						}
						s.Recycle(got)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*traces*services*perSvc), "ns/span")
			if c != (Counts{}) {
				b.Fatalf("the buffer lost spans: %+v", c)
			}
		})
	}
}

// appendSpans appends n spans of trace t to batch, allocating nothing
// once batch has grown. Trace IDs are random, as W3C Trace Context has
// them: sequential ones would give the buffer's tables a locality real
// traffic does not have.
func appendSpans(batch *dependencyanalysis.Batch, t uint64, n int) {
	var id pcommon.TraceID
	binary.LittleEndian.PutUint64(id[:8], splitMix(t))
	binary.LittleEndian.PutUint64(id[8:], splitMix(^t))
	for i := range n {
		batch.Append(dependencyanalysis.Record{TraceID: id, Span: dependencyanalysis.Span{SpanID: pcommon.SpanID{7: byte(i + 1)}}})
	}
}

// splitMix is SplitMix64's output for state x: a random-looking function.
func splitMix(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}
