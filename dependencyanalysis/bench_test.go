// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis_test

import (
	"runtime"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	da "github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/internal/testsupport/scenario"
)

// BenchmarkExtractAndAnalyze measures the engine's whole path on a realistic
// mix (20-span traces over 7 services, about 5 % errors, retries): records
// from pdata, grouping by trace, linking, learning, verdicts and statistics.
// Targets: ≤ 400 ns/span, ≤ 2 allocs/span, ≤ 160 B per buffered span.
func BenchmarkExtractAndAnalyze(b *testing.B) {
	td := scenario.Mix(benchTraces, 1)
	spansPerOp := td.SpanCount()
	cfg := da.DefaultConfig()
	syms := da.NewSymbols(0)
	ex := da.NewExtractor(cfg, syms)
	an := da.NewAnalyzer()
	model := da.NewEdgeModel(cfg.EdgeModel)
	stats := da.NewStats()
	var spans []da.Record
	analyze := func() {
		spans = ex.Append(spans[:0], td)
		da.ForEachTrace(spans, func(id pcommon.TraceID, trace []da.Span) {
			tr := an.Link(id, trace)
			model.Observe(tr)
			stats.Add(tr, an.Judge(tr, model))
		})
	}
	analyze() // warm the symbol table, buffers and maps, as a running collector is

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		analyze()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	total := float64(b.N) * float64(spansPerOp)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/span")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/total, "allocs/span")
	b.ReportMetric(retainedPerSpan(cfg, syms), "B/buffered-span")
}

// retainedPerSpan is the heap a buffered span costs once its pdata is gone:
// the records of 100,000 spans, extracted batch by batch as they arrive.
func retainedPerSpan(cfg da.Config, syms *da.Symbols) float64 {
	ex := da.NewExtractor(cfg, syms)
	batch := scenario.Mix(100, 2)
	var spans []da.Record
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for len(spans) < 100_000 {
		spans = ex.Append(spans, batch)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := len(spans)
	runtime.KeepAlive(spans)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// benchTraces is a batch as an SDK's batch span processor exports it: at
// most 512 spans. The collector analyses a batch right after the receiver
// decoded it, so the benchmark reuses one batch, as warm as that.
var benchTraces = 25

// BenchmarkExtract measures extraction alone, the per-attribute hot path:
// one lookup of every attribute of every span of a realistic batch,
// written with the current names only.
func BenchmarkExtract(b *testing.B) {
	td := scenario.Mix(benchTraces, 1)
	ex := da.NewExtractor(da.DefaultConfig(), da.NewSymbols(0))
	var batch da.Batch
	ex.Extract(&batch, td)
	b.ResetTimer()
	for b.Loop() {
		batch.Reset()
		ex.Extract(&batch, td)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(td.SpanCount()), "ns/span")
}
