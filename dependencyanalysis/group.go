// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"cmp"
	"encoding/binary"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// ForEachTrace sorts records by trace ID, keeping the order of the spans
// within a trace, and calls fn with each trace's ID and spans in turn. The
// spans passed to fn are valid until fn returns.
func ForEachTrace(records []Record, fn func(id pcommon.TraceID, spans []Span)) {
	ForEachTraceSampled(records, func(id pcommon.TraceID, spans []Span, _ SamplingClass) { fn(id, spans) })
}

// ForEachTraceSampled is ForEachTrace that also passes each trace's
// sampling class, the strictest of its spans' (CombineSampling), for
// Trace.SetSampling.
func ForEachTraceSampled(records []Record, fn func(id pcommon.TraceID, spans []Span, sampling SamplingClass)) {
	byTrace := func(a, b Record) int { return compareTraceIDs(a.TraceID, b.TraceID) }
	if !slices.IsSortedFunc(records, byTrace) {
		slices.SortStableFunc(records, byTrace)
	}
	var spans []Span
	for lo := 0; lo < len(records); {
		spans = spans[:0]
		sampling := SamplingNone
		hi := lo
		for ; hi < len(records) && records[hi].TraceID == records[lo].TraceID; hi++ {
			spans = append(spans, records[hi].Span)
			sampling = CombineSampling(sampling, records[hi].Sampling)
		}
		fn(records[lo].TraceID, spans, sampling)
		lo = hi
	}
}

// compareTraceIDs orders trace IDs as bytes.Compare would, in two word
// comparisons.
func compareTraceIDs(a, b pcommon.TraceID) int {
	if c := cmp.Compare(binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])); c != 0 {
		return c
	}
	return cmp.Compare(binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:]))
}
