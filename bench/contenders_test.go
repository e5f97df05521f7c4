// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/internal/testsupport/scenario"
)

// smallInput writes traces of scenario.Mix in whole-trace batches and maps
// them.
func smallInput(t *testing.T, traces int) *input {
	t.Helper()
	path := filepath.Join(t.TempDir(), "whole")
	require.NoError(t, writeInput(path, wholeTraceBatches(scenario.Mix(traces, 11), wholeBatchSpans)))
	in, err := openInput(path)
	require.NoError(t, err)
	t.Cleanup(func() { in.close() })
	return in
}

func TestFeed(t *testing.T) {
	ctx := context.Background()
	in := smallInput(t, 200)
	dec, err := decodeAllocs(in)
	require.NoError(t, err)
	for _, key := range contenderKeys {
		t.Run(key, func(t *testing.T) {
			c, err := build(ctx, key, options{wait: 100 * time.Millisecond})
			require.NoError(t, err)
			defer c.tel.shutdown()
			st, err := feed(ctx, c, []*input{in}, nil, dec)
			require.NoError(t, err)
			assert.Equal(t, in.spans, st.Spans)
			assert.Positive(t, st.CPU)
			assert.Positive(t, st.PeakHeap)
			assert.Empty(t, st.Problems)
		})
	}
}

func TestFeedPhases(t *testing.T) {
	ctx := context.Background()
	in := smallInput(t, 100)
	c, err := build(ctx, ours, options{wait: 100 * time.Millisecond})
	require.NoError(t, err)
	defer c.tel.shutdown()
	first, second := in.slice(0, 2), in.slice(2, len(in.batches))
	var between []int
	st, err := feed(ctx, c, []*input{first, second}, func(phase int) error {
		between = append(between, phase)
		return nil
	}, allocs{})
	require.NoError(t, err)
	assert.Equal(t, []int{0}, between, "called between the phases only")
	assert.Equal(t, in.spans, st.Spans)
	assert.Equal(t, int64(in.spans), c.tel.sum("otelcol_processor_errorownership_spans_seen"))
}

func TestBufferedHeap(t *testing.T) {
	ctx := context.Background()
	in := smallInput(t, 1_000)
	for _, key := range []string{ours, groupbytrace} {
		t.Run(key, func(t *testing.T) {
			perSpan, err := bufferedHeap(ctx, key, in.slice(0, 2), in.slice(2, len(in.batches)))
			require.NoError(t, err)
			assert.Positive(t, perSpan)
		})
	}
}

func TestPipelines(t *testing.T) {
	ctx := context.Background()
	in := smallInput(t, 600)
	for _, tc := range []struct {
		name string
		run  func(context.Context, *input, int) ([]pipelineRound, error)
	}{
		{"marshal-only", marshalOnly},
		{"full", fullPipeline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rounds, err := tc.run(ctx, in, 3)
			require.NoError(t, err)
			require.Len(t, rounds, 3)
			for _, r := range rounds {
				assert.Positive(t, r.Spans)
				assert.Positive(t, r.Without)
				assert.Positive(t, r.With)
			}
		})
	}
}
