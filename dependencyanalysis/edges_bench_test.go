// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// edgeBenchCalls is how many services the root request of a trace of
// BenchmarkObserveAndCount calls, as in bench-peers' edges curve.
const edgeBenchCalls = 10

// edgeBenchTraces returns the traces of bench-peers' edges curve, as
// records: edges/edgeBenchCalls root operations over 50 services, each
// calling edgeBenchCalls operations of other services, every fifth trace
// with a failed call.
func edgeBenchTraces(syms *Symbols, edges int) [][]Span {
	const services = 50
	svc := func(i int) Symbol { return syms.Intern("svc-" + strconv.Itoa(i%services)) }
	callee := make([]Symbol, edgeBenchCalls)
	for j := range callee {
		callee[j] = syms.Intern("GET /callee/" + strconv.Itoa(j))
	}
	roots := edges / edgeBenchCalls
	out := make([][]Span, roots)
	for k := range roots {
		spans := make([]Span, 0, 1+2*edgeBenchCalls)
		id := func(n int) pcommon.SpanID { return pcommon.SpanID{0: byte(n + 1)} }
		root := Span{SpanID: id(0), Service: svc(k), Operation: syms.Intern("GET /root/" + strconv.Itoa(k)),
			Kind: KindServer, Attempt: AttemptUnknown, Flags: FlagCompleted}
		root.SetEnd(pcommon.Timestamp(10_000_000))
		spans = append(spans, root)
		for j := range edgeBenchCalls {
			c := Span{SpanID: id(1 + 2*j), ParentID: id(0), Service: svc(k), PeerOperation: callee[j],
				Kind: KindClient, Attempt: AttemptUnknown, Flags: FlagCompleted, Start: pcommon.Timestamp(j * 100_000)}
			s := Span{SpanID: id(2 + 2*j), ParentID: c.SpanID, Service: svc(k + 1 + j), Operation: callee[j],
				Kind: KindServer, Attempt: AttemptUnknown, Flags: FlagCompleted, Start: c.Start}
			if j == 1 && k%5 == 0 {
				c.Flags, s.Flags = FlagFailed, FlagFailed
			}
			c.SetEnd(c.Start + 50_000)
			s.SetEnd(s.Start + 40_000)
			spans = append(spans, c, s)
		}
		out[k] = spans
	}
	return out
}

// BenchmarkObserveAndCount measures what a worker does with a linked
// trace once per call — the edge model's observation, the judgement and
// the bucket's statistics — over a thousand and a million distinct edges,
// every edge observed and counted once before the timer starts, as in
// bench-peers' edges curve. ns/span is per span of the traces.
func BenchmarkObserveAndCount(b *testing.B) {
	for _, edges := range []int{1_000, 1_000_000} {
		b.Run("edges="+strconv.Itoa(edges), func(b *testing.B) {
			syms := NewSymbols(0)
			traces := edgeBenchTraces(syms, edges)
			model := NewEdgeModel(DefaultConfig().EdgeModel)
			stats := NewStats()
			a := NewAnalyzer()
			count := func(k int) {
				t := a.Link(pcommon.TraceID{0: 1, 8: byte(k), 9: byte(k >> 8), 10: byte(k >> 16)}, traces[k])
				model.Observe(t)
				stats.Add(t, a.Judge(t, model))
			}
			for k := range traces {
				count(k)
			}
			rng := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // G404: a benchmark's draw
			order := make([]int, 1<<16)
			for i := range order {
				order[i] = rng.IntN(len(traces))
			}
			b.ResetTimer()
			for i := range b.N {
				count(order[i%len(order)])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(traces[0])), "ns/span")
		})
	}
}
