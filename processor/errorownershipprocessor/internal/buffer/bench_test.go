// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"testing"

	"github.com/errorownership/errorownership/dependencyanalysis"
)

// BenchmarkBuffer feeds traces of 21 spans over 7 services through a
// two-shard buffer and takes them out as the workers do, in the two shapes
// batches come in: whole traces, and spread, where each service's SDK
// exports its own spans, so that a trace comes in 7 batches of 3 spans.
func BenchmarkBuffer(b *testing.B) {
	const (
		traces   = 512 // in a round
		services = 7
		perSvc   = 3
	)
	for _, shape := range []struct {
		name   string
		spread bool
	}{{"whole", false}, {"spread", true}} {
		b.Run(shape.name, func(b *testing.B) {
			buf := New(2, 4*traces, 4*traces*services*perSvc, 1)
			var now int64
			buf.SetClock(func() int64 { return now })
			var sc Scratch
			var c Counts
			take := make([]*Entry, 0, 64)
			batch := make([]dependencyanalysis.Record, 0, traces*services*perSvc)
			next := uint64(1)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				first := next
				next += traces
				if shape.spread {
					for range services {
						batch = batch[:0]
						for t := first; t < next; t++ {
							batch = append(batch, records(t, perSvc)...)
						}
						buf.Add(batch, &sc, now, &c)
					}
				} else {
					batch = batch[:0]
					for t := first; t < next; t++ {
						batch = append(batch, records(t, services*perSvc)...)
					}
					buf.Add(batch, &sc, now, &c)
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
