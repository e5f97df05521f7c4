// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/internal/testsupport/scenario"
)

// judgeAll learns over all spans, then judges every trace into stats.
func judgeAll(spans []Record, stats *Stats) {
	model := NewEdgeModel(ModelConfig{MinSamples: 20, Confidence: 0.95, FailCloseThreshold: 0.8, FailOpenThreshold: 0.2})
	an := NewAnalyzer()
	ForEachTrace(spans, func(id pcommon.TraceID, tr []Span) { model.Observe(an.Link(id, tr)) })
	ForEachTrace(spans, func(id pcommon.TraceID, tr []Span) {
		t := an.Link(id, tr)
		stats.Add(t, an.Judge(t, model))
	})
}

func TestStatsMergeEqualsWhole(t *testing.T) {
	syms := NewSymbols(0)
	spans := NewExtractor(DefaultConfig(), syms).Append(nil, scenario.Coincidental().Traces)
	whole := NewStats()
	judgeAll(spans, whole)

	// The same verdicts split over two Stats, as two workers would hold them.
	model := NewEdgeModel(DefaultConfig().EdgeModel)
	an := NewAnalyzer()
	ForEachTrace(spans, func(id pcommon.TraceID, tr []Span) { model.Observe(an.Link(id, tr)) })
	parts := [2]*Stats{NewStats(), NewStats()}
	i := 0
	ForEachTrace(spans, func(id pcommon.TraceID, tr []Span) {
		t := an.Link(id, tr)
		parts[i%2].Add(t, an.Judge(t, model))
		i++
	})
	merged := NewStats()
	merged.Merge(parts[0])
	merged.Merge(parts[1])

	assert.Equal(t, whole.Traces, merged.Traces)
	assert.Equal(t, whole.Link, merged.Link)
	assert.Equal(t, whole.Operations, merged.Operations)
	assert.Equal(t, whole.Edges, merged.Edges)
	assert.Equal(t, whole.Depths, merged.Depths)
	assert.Equal(t, whole.Roots, merged.Roots)
	assert.ElementsMatch(t, whole.Audit, merged.Audit)

	checkout := OperationKey{syms.Intern("checkout"), syms.Intern("POST /checkout")}
	op := whole.Operations[checkout]
	require.NotNil(t, op)
	assert.EqualValues(t, 10, op.Verdicts[VerdictCoincidental])
	assert.Len(t, whole.Audit, 10, "every coincidental error is audited")
	for _, e := range whole.Audit {
		assert.Equal(t, "recommendations", syms.Name(e.PeerService))
	}

	merged.Reset()
	assert.True(t, merged.Empty())
	assert.Empty(t, merged.Audit)
	assert.Empty(t, merged.Operations)
}

func TestStatsAuditLimit(t *testing.T) {
	syms := NewSymbols(0)
	spans := NewExtractor(DefaultConfig(), syms).Append(nil, scenario.Coincidental().Traces)
	stats := NewStats()
	stats.AuditLimit = 3
	judgeAll(spans, stats)
	assert.Len(t, stats.Audit, 3)
	assert.EqualValues(t, 7, stats.AuditDropped)
}
