package dependencyanalysis

import (
	"bytes"
	"slices"
)

// ForEachTrace sorts spans by trace ID, keeping the order of spans within a
// trace, and calls fn with each trace's spans in turn.
func ForEachTrace(spans []Span, fn func(trace []Span)) {
	byTrace := func(a, b Span) int { return bytes.Compare(a.TraceID[:], b.TraceID[:]) }
	if !slices.IsSortedFunc(spans, byTrace) {
		slices.SortStableFunc(spans, byTrace)
	}
	for lo := 0; lo < len(spans); {
		hi := lo + 1
		for hi < len(spans) && spans[hi].TraceID == spans[lo].TraceID {
			hi++
		}
		fn(spans[lo:hi:hi])
		lo = hi
	}
}
