// SPDX-License-Identifier: Apache-2.0

// Package dependencyanalysis is the error-ownership engine: it turns spans
// into compact records, links them into requests and logical calls, learns
// per edge whether a dependency's failure fails the request (fail-close) or is
// tolerated (fail-open), and gives every failed inbound request a verdict:
// own, propagated or coincidental. It also measures claim accuracy and retry
// amplification.
//
// The engine is a plain library. It knows nothing of the collector pipeline
// or of any database; the processor and the CLI feed it and read its results.
//
// The flow for one trace:
//
//	ex := NewExtractor(cfg, symbols)        // one per goroutine
//	ex.Extract(&batch, td)                  // ptrace.Traces → Spans, in runs by trace
//	tr := an.Link(id, spans)                // a trace's: requests, logical calls
//	model.Observe(tr)                       // learn the edges
//	verdicts := an.Judge(tr, model)         // own / propagated / coincidental
//	stats.Add(tr, verdicts)                 // accuracy and amplification
package dependencyanalysis
