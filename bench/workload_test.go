// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/internal/testsupport/scenario"
)

// spanBatches maps each span ID to the batches it is in and each trace ID
// to the batches it has spans in.
func spanBatches(batches []ptrace.Traces) (spans map[pcommon.SpanID][]int, traces map[pcommon.TraceID]map[int]bool) {
	spans, traces = map[pcommon.SpanID][]int{}, map[pcommon.TraceID]map[int]bool{}
	for i, td := range batches {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					spans[sp.SpanID()] = append(spans[sp.SpanID()], i)
					if traces[sp.TraceID()] == nil {
						traces[sp.TraceID()] = map[int]bool{}
					}
					traces[sp.TraceID()][i] = true
				}
			}
		}
	}
	return spans, traces
}

func TestWholeTraceBatches(t *testing.T) {
	for _, tc := range []struct {
		name     string
		td       ptrace.Traces
		maxSpans int
	}{
		{"mix", scenario.Mix(200, 1), wholeBatchSpans},
		{"one-span traces", treeTraces("t/1", 1, 1_200), wholeBatchSpans},
		{"traces larger than a batch", treeTraces("t/1200", 1_200, 3), wholeBatchSpans},
		{"small batches", scenario.Mix(50, 2), 64},
		{"traces larger than a small batch", scenario.Mix(30, 7), 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.td.SpanCount()
			sizes := map[pcommon.TraceID]int{}
			for _, rs := range tc.td.ResourceSpans().All() {
				for _, ss := range rs.ScopeSpans().All() {
					for _, sp := range ss.Spans().All() {
						sizes[sp.TraceID()]++
					}
				}
			}
			batches := wholeTraceBatches(tc.td, tc.maxSpans)
			total := 0
			for _, b := range batches {
				n := b.SpanCount()
				assert.LessOrEqual(t, n, tc.maxSpans)
				assert.Positive(t, n)
				total += n
			}
			assert.Equal(t, want, total, "every span, once")
			spans, traces := spanBatches(batches)
			for id, in := range spans {
				assert.Len(t, in, 1, "span %s", id)
			}
			for id, in := range traces {
				size := sizes[id]
				if size <= tc.maxSpans {
					assert.Len(t, in, 1, "trace %s of %d spans is whole in one batch", id, size)
				} else {
					assert.Len(t, in, (size+tc.maxSpans-1)/tc.maxSpans, "trace %s of %d spans in consecutive full batches", id, size)
				}
			}
			assert.Len(t, traces, len(sizes))
		})
	}
}

func TestSpreadBatches(t *testing.T) {
	for _, tc := range []struct {
		name     string
		traces   int
		perBatch int
	}{
		{"sdk batches", 400, sdkBatchSpans},
		{"small batches", 100, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := scenario.Mix(tc.traces, 3)
			batches := spreadBatches(td, tc.perBatch)
			total := 0
			lastEnd := map[string]pcommon.Timestamp{}
			for _, b := range batches {
				require.Equal(t, 1, b.ResourceSpans().Len(), "one service a batch")
				rs := b.ResourceSpans().At(0)
				require.Equal(t, 1, rs.ScopeSpans().Len())
				spans := rs.ScopeSpans().At(0).Spans()
				assert.LessOrEqual(t, spans.Len(), tc.perBatch)
				total += spans.Len()
				svc := serviceName(rs.Resource())
				for _, sp := range spans.All() {
					assert.GreaterOrEqual(t, sp.EndTimestamp(), lastEnd[svc], "a service sends its spans as they end")
					lastEnd[svc] = sp.EndTimestamp()
				}
			}
			assert.Equal(t, td.SpanCount(), total)
			_, traces := spanBatches(batches)
			assert.Len(t, traces, tc.traces)
			for id, in := range traces {
				assert.GreaterOrEqual(t, len(in), 2, "trace %s arrives in several batches", id)
			}
		})
	}
}

func TestInputRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		batches []ptrace.Traces
	}{
		{"batches", wholeTraceBatches(scenario.Mix(60, 4), wholeBatchSpans)},
		{"none", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			require.NoError(t, writeInput(path, tc.batches))
			in, err := openInput(path)
			require.NoError(t, err)
			defer in.close()
			require.Len(t, in.batches, len(tc.batches))
			want := 0
			for i, b := range tc.batches {
				td, err := in.decode(i)
				require.NoError(t, err)
				assert.Equal(t, b, td)
				assert.Equal(t, b.SpanCount(), in.batches[i].spans)
				want += b.SpanCount()
			}
			assert.Equal(t, want, in.spans)
			if len(tc.batches) > 1 {
				s := in.slice(1, 2)
				assert.Equal(t, tc.batches[1].SpanCount(), s.spans)
				td, err := s.decode(0)
				require.NoError(t, err)
				assert.Equal(t, tc.batches[1], td)
			}
		})
	}
}

func TestOpenInputTruncated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "whole")
	require.NoError(t, writeInput(path, wholeTraceBatches(scenario.Mix(30, 5), wholeBatchSpans)))
	b, err := os.ReadFile(path) //nolint:gosec // G304: the input file the test just wrote into t.TempDir
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		keep int
	}{
		{"inside a header", 3},
		{"inside a batch", len(b) - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			require.NoError(t, os.WriteFile(p, b[:tc.keep], 0o644)) //nolint:gosec // G703: p is in t.TempDir, named after a case of the test
			_, err := openInput(p)
			assert.Error(t, err)
		})
	}
}

func TestDecodeAhead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "whole")
	batches := wholeTraceBatches(scenario.Mix(1_000, 6), wholeBatchSpans)
	require.Greater(t, len(batches), decodeChunk, "more than one chunk")
	require.NoError(t, writeInput(path, batches))
	in, err := openInput(path)
	require.NoError(t, err)
	defer in.close()
	chunks, used := decodeAhead(in)
	var got []ptrace.Traces
	for c := range chunks {
		require.NoError(t, c.err)
		assert.LessOrEqual(t, len(c.batches), decodeChunk)
		got = append(got, c.batches...)
	}
	assert.Positive(t, <-used)
	require.Len(t, got, len(batches))
	for i := range got {
		assert.Equal(t, batches[i], got[i])
	}
}

func TestGroupbytraceEvents(t *testing.T) {
	mix := scenario.Mix(40, 12)
	rsCount := mix.ResourceSpans().Len()
	for _, tc := range []struct {
		name string
		td   ptrace.Traces
		want int
	}{
		{"empty", ptrace.NewTraces(), 0},
		{"a trace's resources, one event each", mix, rsCount},
		{"one service's spans of many traces", spreadBatches(scenario.Mix(40, 13), 10_000)[0], 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, groupbytraceEvents(tc.td))
		})
	}
}

func TestRandomIDs(t *testing.T) {
	td := scenario.Mix(50, 14)
	orig := ptrace.NewTraces()
	td.CopyTo(orig)
	randomIDs(td)
	spanOf := map[pcommon.SpanID]pcommon.SpanID{} // new → old
	traces := map[pcommon.TraceID]pcommon.TraceID{}
	for i, rs := range td.ResourceSpans().All() {
		for j, ss := range rs.ScopeSpans().All() {
			for k, sp := range ss.Spans().All() {
				o := orig.ResourceSpans().At(i).ScopeSpans().At(j).Spans().At(k)
				assert.NotEqual(t, o.SpanID(), sp.SpanID())
				_, dup := spanOf[sp.SpanID()]
				assert.False(t, dup, "distinct span IDs stay distinct")
				spanOf[sp.SpanID()] = o.SpanID()
				if prev, ok := traces[sp.TraceID()]; ok {
					assert.Equal(t, prev, o.TraceID(), "one trace stays one trace")
				}
				traces[sp.TraceID()] = o.TraceID()
				assert.Equal(t, o.ParentSpanID().IsEmpty(), sp.ParentSpanID().IsEmpty(), "roots stay roots")
			}
		}
	}
	assert.Len(t, traces, 50)
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				if sp.ParentSpanID().IsEmpty() {
					continue
				}
				_, ok := spanOf[sp.ParentSpanID()]
				assert.True(t, ok, "a parent is still a span of the trace")
			}
		}
	}
}
