// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"time"
)

// Growth-curve measurement: our processor alone, fed each point's input
// with the shortest decision_wait, so that traces are analysed while the
// input arrives, as in a steady stream.
const (
	curveRepeats = 3
	curveWait    = 100 * time.Millisecond
	// curveMaxTraces holds a point's every trace (100,000 one-span traces
	// at most), so that none is analysed early because the buffer is full.
	curveMaxTraces = 1_000_000
)

// measureCurves measures every point of every growth curve curveRepeats
// times, the points' order rotated from one repetition to the next.
func measureCurves(ctx context.Context, open func(string) (*input, error), man manifest, notes *[]string, lg func(string, ...any)) (map[string][][]float64, error) {
	out := map[string][][]float64{}
	for _, c := range curves {
		for _, key := range []string{c.key, c.key + curveFlush, c.key + curveEdges, c.key + curveHeap} {
			out[key] = make([][]float64, len(c.points))
		}
	}
	for rep := range curveRepeats {
		for _, c := range curves {
			for k := range c.points {
				i := (k + rep) % len(c.points)
				pt, problems, err := curvePoint(ctx, open, man, c.key, i, nil)
				if err != nil {
					return nil, fmt.Errorf("curve %s, point %v: %w", c.key, c.points[i], err)
				}
				for _, p := range problems {
					*notes = append(*notes, fmt.Sprintf("growth curve %s, point %v: %s", c.key, c.points[i], p))
				}
				out[c.key][i] = append(out[c.key][i], pt.ns)
				out[c.key+curveFlush][i] = append(out[c.key+curveFlush][i], pt.flushMs)
				out[c.key+curveEdges][i] = append(out[c.key+curveEdges][i], pt.edges)
				out[c.key+curveHeap][i] = append(out[c.key+curveHeap][i], pt.peakHeap)
			}
		}
		lg("growth curves, repetition %d of %d done", rep+1, curveRepeats)
	}
	return out, nil
}

// The figures of a point besides its CPU per span, kept under the curve's
// key with these suffixes.
const (
	curveFlush = "/flush-ms" // CPU of the shutdown, which flushes the bucket, in ms
	curveEdges = "/edges"    // edges the model held before the shutdown
	curveHeap  = "/heap"     // the run's peak heap, in bytes
)

// point is what one run of a growth curve's point measured.
type point struct {
	ns, flushMs, edges, peakHeap float64
}

// curvePoint measures our CPU per span over point i of curve key: the
// warm-up input is fed and analysed first; then the measured input, and
// for the late curve, once its traces have been analysed, the spans that
// arrive late. The CPU per span runs until every trace is analysed; the
// shutdown after it, which flushes the statistics of everything fed (a
// collector does so once every flush_interval, over far more spans), is
// measured apart.
//
// around, when not nil, is called with true as the measurement begins and
// with false once every trace is analysed, before the shutdown.
func curvePoint(ctx context.Context, open func(string) (*input, error), man manifest, key string, i int, around func(begin bool)) (pt point, problems []string, err error) {
	warmName, measuredName := curveInput(key, i, "warmup"), curveInput(key, i, "measured")
	warm, err := open(warmName)
	if err != nil {
		return point{}, nil, err
	}
	measured, err := open(measuredName)
	if err != nil {
		return point{}, nil, err
	}
	phases := []*input{measured}
	if key == "late" {
		late, err := open(curveInput(key, i, "late"))
		if err != nil {
			return point{}, nil, err
		}
		if late.spans > 0 {
			phases = append(phases, late)
		}
	}
	c, err := build(ctx, ours, options{wait: curveWait, maxTraces: curveMaxTraces})
	if err != nil {
		return point{}, nil, err
	}
	defer c.tel.shutdown()
	for b := range warm.batches {
		td, err := warm.decode(b)
		if err != nil {
			return point{}, nil, err
		}
		if err := c.ConsumeTraces(ctx, td); err != nil {
			return point{}, nil, err
		}
	}
	analysed := man.Traces[warmName]
	if err := waitAnalysed(c, analysed); err != nil {
		return point{}, nil, err
	}
	between := func(int) error { return waitAnalysed(c, analysed+man.Traces[measuredName]) }
	var edges int64
	c.settle = func(int) error {
		err := waitIdle(c)
		edges = c.tel.gauge("otelcol_processor_errorownership_edges")
		if around != nil {
			around(false)
		}
		return err
	}
	c.around = around
	st, err := feed(ctx, c, phases, between, allocs{})
	if err != nil {
		return point{}, nil, err
	}
	// The late spans must have been taken as late, and no others: a
	// machine so busy that the harness stalled for decision_wait would
	// make spans late that were not meant to be.
	if late, counted := st.Spans-measured.spans, c.tel.sum("otelcol_processor_errorownership_spans_late"); int64(late) != counted {
		st.Problems = append(st.Problems, fmt.Sprintf("%d spans sent late, %d counted in spans_late", late, counted))
	}
	return point{
		ns:       float64((st.CPU - st.ShutdownCPU).Nanoseconds()) / float64(st.Spans),
		flushMs:  float64(st.ShutdownCPU.Microseconds()) / 1000,
		edges:    float64(edges),
		peakHeap: float64(st.PeakHeap),
	}, st.Problems, nil
}

// waitIdle waits until our processor holds no trace and has analysed none
// for a while: everything fed is analysed.
func waitIdle(c *running) error {
	deadline := time.Now().Add(time.Minute)
	last := int64(-1)
	for {
		time.Sleep(20 * time.Millisecond)
		analysed := c.tel.sum("otelcol_processor_errorownership_traces_analyzed")
		if analysed == last && c.tel.gauge("otelcol_processor_errorownership_buffer_traces") == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still analysing after a minute (%d traces analysed)", analysed)
		}
		last = analysed
	}
}

// waitAnalysed waits until our processor has analysed n traces, by its own
// count: the spans that follow are then late.
func waitAnalysed(c *running, n int) error {
	time.Sleep(curveWait)
	deadline := time.Now().Add(time.Minute)
	for {
		got := c.tel.sum("otelcol_processor_errorownership_traces_analyzed")
		if got >= int64(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d traces analysed after a minute", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
