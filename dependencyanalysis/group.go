package dependencyanalysis

import (
	"cmp"
	"encoding/binary"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// ForEachTrace sorts spans by trace ID, keeping the order of spans within a
// trace, and calls fn with each trace's spans in turn.
func ForEachTrace(spans []Span, fn func(trace []Span)) {
	byTrace := func(a, b Span) int { return compareTraceIDs(a.TraceID, b.TraceID) }
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

// compareTraceIDs orders trace IDs as bytes.Compare would, in two word
// comparisons.
func compareTraceIDs(a, b pcommon.TraceID) int {
	if c := cmp.Compare(binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])); c != 0 {
		return c
	}
	return cmp.Compare(binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:]))
}
