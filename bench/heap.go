// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Buffered-heap measurement: how many spans are fed, after how many
// warm-up batches, and how often it is repeated.
var bufferedSpans = 100_000

const (
	bufferedWarmup  = 2
	bufferedRepeats = 3
)

// bufferedShapes are the shapes the buffered heap is measured in: the two
// ways of batching.
var bufferedShapes = []shape{shapes[0], shapes[2]}

// bufferedHeaps measures, for ours and groupbytrace in each batching, the
// heap a buffered span costs: with a wait of an hour nothing is released,
// so the heap that a component keeps after the spans were fed, collected
// twice, is what it takes to hold them.
func bufferedHeaps(ctx context.Context, open func(string) (*input, error), lg func(string, ...any)) (map[string]map[string][]float64, error) {
	out := map[string]map[string][]float64{}
	for _, sh := range bufferedShapes {
		all, err := open(inputName(sh.input, 0))
		if err != nil {
			return nil, err
		}
		hi, spans := bufferedWarmup, 0
		for hi < len(all.batches) && spans < bufferedSpans {
			spans += all.batches[hi].spans
			hi++
		}
		out[sh.key] = map[string][]float64{}
		for rep := range bufferedRepeats {
			order := []string{ours, groupbytrace}
			if rep%2 == 1 {
				order[0], order[1] = order[1], order[0]
			}
			for _, key := range order {
				perSpan, err := bufferedHeap(ctx, key, all.slice(0, bufferedWarmup), all.slice(bufferedWarmup, hi))
				if err != nil {
					return nil, fmt.Errorf("buffered heap, %s, %s: %w", sh.key, key, err)
				}
				out[sh.key][key] = append(out[sh.key][key], perSpan)
			}
		}
		lg("buffered heap, %s, done", sh.title)
	}
	return out, nil
}

// bufferedHeap feeds warm then in to a component that holds everything
// and returns the heap growth per span of in. The warm-up batches give
// the heap what any running component has (its names, pools, maps) before
// the baseline is taken.
func bufferedHeap(ctx context.Context, key string, warm, in *input) (float64, error) {
	c, err := build(ctx, key, options{wait: time.Hour, hold: true})
	if err != nil {
		return 0, err
	}
	defer c.tel.shutdown()
	events := 0
	consume := func(in *input) error {
		for i := range in.batches {
			td, err := in.decode(i)
			if err != nil {
				return err
			}
			events += groupbytraceEvents(td)
			if err := c.ConsumeTraces(ctx, td); err != nil {
				return err
			}
		}
		return c.filed(events)
	}
	if err := consume(warm); err != nil {
		return 0, err
	}
	quiesce()
	before := liveHeap()
	if err := consume(in); err != nil {
		return 0, err
	}
	after := liveHeap()
	if err := c.Shutdown(ctx); err != nil {
		return 0, err
	}
	if p := c.problems(in.spans); len(p) > 0 {
		return 0, fmt.Errorf("%v", p)
	}
	return (float64(after) - float64(before)) / float64(in.spans), nil
}

// groupbytraceEvents is how many events groupbytrace makes of td: one for
// each trace in each scope of each resource.
func groupbytraceEvents(td ptrace.Traces) int {
	n := 0
	seen := map[pcommon.TraceID]struct{}{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			clear(seen)
			for _, sp := range ss.Spans().All() {
				seen[sp.TraceID()] = struct{}{}
			}
			n += len(seen)
		}
	}
	return n
}
