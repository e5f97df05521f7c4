// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/internal/testsupport/scenario"
)

// spanInfo is a span with its service, for finding edges.
type spanInfo struct {
	span    ptrace.Span
	service string
}

// edgesOf returns the distinct edges of td as a service graph pairs client
// and server spans: the caller's inbound span, then the callee's.
func edgesOf(td ptrace.Traces) map[string]bool {
	byID := map[pcommon.SpanID]spanInfo{}
	for _, rs := range td.ResourceSpans().All() {
		svc := serviceName(rs.Resource())
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				byID[sp.SpanID()] = spanInfo{sp, svc}
			}
		}
	}
	edges := map[string]bool{}
	for _, s := range byID {
		if s.span.Kind() != ptrace.SpanKindServer {
			continue
		}
		client, ok := byID[s.span.ParentSpanID()]
		if !ok || client.span.Kind() != ptrace.SpanKindClient {
			continue
		}
		caller, ok := byID[client.span.ParentSpanID()]
		if !ok {
			continue
		}
		edges[fmt.Sprintf("%s %s -> %s %s", caller.service, caller.span.Name(), s.service, s.span.Name())] = true
	}
	return edges
}

func TestTreeTraces(t *testing.T) {
	for _, size := range []int{1, 10, 100, 1_000, 10_000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			const n = 3
			td := treeTraces(fmt.Sprint("tree/", size), size, n)
			assert.Equal(t, n, traceCount(td))
			assert.Equal(t, n*(1+2*(size/2)), td.SpanCount(), "a root and a client and server span a call")
			assert.LessOrEqual(t, len(edgesOf(td)), 9, "one edge a level")
		})
	}
}

func TestEdgeTraces(t *testing.T) {
	for _, edges := range []int{10, 100, 1_000} {
		t.Run(fmt.Sprint(edges), func(t *testing.T) {
			n := edges / edgeCallsPerTrace
			td := edgeTraces(fmt.Sprint("edges/", edges), edges, n, true)
			assert.Equal(t, n, traceCount(td))
			assert.Equal(t, n*(1+2*edgeCallsPerTrace), td.SpanCount())
			assert.Len(t, edgesOf(td), edges)
		})
	}
}

func TestFleetTraces(t *testing.T) {
	const services, spans = 500, 20_000
	td := fleetTraces("fleet/test", services, spans)
	sizes := map[pcommon.TraceID]int{}
	names := map[string]bool{}
	for _, rs := range td.ResourceSpans().All() {
		names[serviceName(rs.Resource())] = true
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				sizes[sp.TraceID()]++
			}
		}
	}
	one, big := 0, 0
	for _, n := range sizes {
		assert.LessOrEqual(t, n, fleetMaxSpans)
		if n == 1 {
			one++
		}
		if n >= 1_000 {
			big += n
		}
	}
	assert.GreaterOrEqual(t, td.SpanCount(), spans)
	assert.Less(t, td.SpanCount(), spans+fleetMaxSpans)
	assert.Greater(t, float64(one)/float64(len(sizes)), 0.4, "most traces hold a span or a few")
	assert.Greater(t, big, 0, "some traces hold thousands")
	assert.LessOrEqual(t, len(names), services)
	assert.Greater(t, len(names), services/2, "calls reach much of the fleet")
}

func TestSplitLate(t *testing.T) {
	td := scenario.Mix(300, 9)
	var prev map[pcommon.SpanID]bool
	for _, f := range lateFractions {
		t.Run(fmt.Sprint(f), func(t *testing.T) {
			onTime, late := splitLate(td, f)
			assert.Equal(t, td.SpanCount(), onTime.SpanCount()+late.SpanCount())
			assert.InDelta(t, f, float64(late.SpanCount())/float64(td.SpanCount()), 0.02)
			lateIDs, _ := spanBatches([]ptrace.Traces{late})
			got := map[pcommon.SpanID]bool{}
			for id := range lateIDs {
				got[id] = true
			}
			for id := range prev {
				assert.True(t, got[id], "a larger fraction takes the spans of a smaller one too")
			}
			prev = got
			for _, part := range []ptrace.Traces{onTime, late} {
				for _, rs := range part.ResourceSpans().All() {
					require.Equal(t, 1, rs.ScopeSpans().Len())
					spans := rs.ScopeSpans().At(0).Spans()
					for _, sp := range spans.All() {
						assert.Equal(t, spans.At(0).TraceID(), sp.TraceID(), "a resource holds one trace's spans")
					}
				}
			}
		})
	}
}
