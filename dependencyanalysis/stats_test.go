// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/internal/testsupport/scenario"
	"github.com/errorownership/errorownership/ownership"
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
	assert.Empty(t, merged.Depths)

	// Reset Stats, whose caches held the figures of before, count as new
	// ones do: a cache that outlived Reset would count into figures no
	// longer in the maps.
	judgeAll(spans, merged)
	assert.Equal(t, whole.Operations, merged.Operations)
	assert.Equal(t, whole.Edges, merged.Edges)
	assert.Equal(t, whole.Depths, merged.Depths)
	assert.Equal(t, whole.Roots, merged.Roots)
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

// TestRetriesAfterUnclaimed: a retry counts against the edge when the
// attempt before it received unclaimed, whether the caller's hooks
// recorded the claim or only the callee's server span says it.
func TestRetriesAfterUnclaimed(t *testing.T) {
	un, cl, none := ownership.ClaimUnclaimed, ownership.ClaimClaimed, ownership.ClaimMissing
	for _, c := range []struct {
		name string
		// sent is what the callee's server span sent on each attempt;
		// received what the caller's client span recorded.
		sent, received []ownership.Claim
		want           uint64
	}{
		{"hookless caller retries an unclaimed error", []ownership.Claim{un, un}, []ownership.Claim{none, none}, 1},
		{"hooked caller records unclaimed and retries anyway", []ownership.Claim{un, un, un}, []ownership.Claim{un, un, un}, 2},
		{"retry after a claimed error", []ownership.Claim{cl, cl}, []ownership.Claim{cl, cl}, 0},
		{"unclaimed, then the retry's error claimed", []ownership.Claim{un, cl, cl}, []ownership.Claim{none, none, none}, 1},
		{"unclaimed and not retried", []ownership.Claim{un}, []ownership.Claim{un}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			specs := []sp{{id: 1, kind: KindServer, svc: "a", op: "GET /a", end: 100, failed: true}}
			for i := range c.sent {
				client, server := byte(10+2*i), byte(11+2*i)
				at := 10 * (i + 1)
				specs = append(specs,
					sp{id: client, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b", start: at, end: at + 5,
						failed: true, answered: true, claimRx: c.received[i], try: int8(i + 1)},
					sp{id: server, parent: client, kind: KindServer, svc: "b", op: "GET /b", start: at + 1, end: at + 4,
						failed: true, answered: true, claim: c.sent[i]})
			}
			an := NewAnalyzer()
			tr := an.Link(testTrace, records(specs...))
			stats := NewStats()
			stats.Add(tr, an.Judge(tr, modes{}))
			var got uint64
			for _, e := range stats.Edges {
				got += e.RetriesAfterUnclaimed
				assert.InDelta(t, float64(e.RetriesAfterUnclaimed), e.Estimate().RetriesAfterUnclaimed, 0)
			}
			assert.Equal(t, c.want, got)
		})
	}
}

// TestStatsEdgesAndDepthsPerOperation counts requests whose operation
// has fewer edges and depths than its entry keeps (maxRefs) and more, so
// that both the entry's references and the maps behind them count.
func TestStatsEdgesAndDepthsPerOperation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		peers int
	}{
		{"one peer", 1},
		{"as many peers as an entry keeps", maxRefs},
		{"more peers than an entry keeps", 2*maxRefs + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			specs := []sp{{id: 1, kind: KindServer, svc: "gateway", op: "GET /", end: 100}}
			for i := range tc.peers {
				peer := "svc-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
				specs = append(specs,
					sp{id: byte(2 + 2*i), parent: 1, kind: KindClient, svc: "gateway", peerOp: "GET /x", start: 1, end: 50},
					sp{id: byte(3 + 2*i), parent: byte(2 + 2*i), kind: KindServer, svc: peer, op: "GET /x", start: 2, end: 40})
			}
			spans := records(specs...)
			stats := NewStats()
			an := NewAnalyzer()
			const traces = 3
			for range traces {
				tr := an.Link(testTrace, spans)
				stats.Add(tr, nil)
			}
			require.Len(t, stats.Edges, tc.peers)
			for k, e := range stats.Edges {
				assert.EqualValues(t, traces, e.Calls, "calls to %s", testSymbols.Name(k.PeerService))
			}
			require.Len(t, stats.Depths, tc.peers+1)
			for k, d := range stats.Depths {
				assert.EqualValues(t, traces, d.N, "requests of %s at depth %d", testSymbols.Name(k.Service), k.Depth)
			}
			root := stats.Roots[OperationKey{sym("gateway"), sym("GET /")}]
			require.NotNil(t, root)
			assert.EqualValues(t, traces, root.Requests)

			// Merged into Stats that already count them: twice each.
			stats.Merge(stats.clone(t))
			for _, e := range stats.Edges {
				assert.EqualValues(t, 2*traces, e.Calls)
			}
			for _, d := range stats.Depths {
				assert.EqualValues(t, 2*traces, d.N)
			}
		})
	}
}

// clone returns a copy of s's figures, by merging them into empty Stats.
func (s *Stats) clone(t *testing.T) *Stats {
	t.Helper()
	c := NewStats()
	c.Merge(s)
	return c
}
