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
		out[c.key] = make([][]float64, len(c.points))
	}
	for rep := range curveRepeats {
		for _, c := range curves {
			for k := range c.points {
				i := (k + rep) % len(c.points)
				ns, problems, err := curvePoint(ctx, open, man, c.key, i)
				if err != nil {
					return nil, fmt.Errorf("curve %s, point %v: %w", c.key, c.points[i], err)
				}
				for _, p := range problems {
					*notes = append(*notes, fmt.Sprintf("growth curve %s, point %v: %s", c.key, c.points[i], p))
				}
				out[c.key][i] = append(out[c.key][i], ns)
			}
		}
		lg("growth curves, repetition %d of %d done", rep+1, curveRepeats)
	}
	return out, nil
}

// curvePoint measures our CPU per span over point i of curve key: the
// warm-up input is fed and analysed first; then the measured input, and
// for the late curve, once its traces have been analysed, the spans that
// arrive late.
func curvePoint(ctx context.Context, open func(string) (*input, error), man manifest, key string, i int) (nsPerSpan float64, problems []string, err error) {
	warmName, measuredName := curveInput(key, i, "warmup"), curveInput(key, i, "measured")
	warm, err := open(warmName)
	if err != nil {
		return 0, nil, err
	}
	measured, err := open(measuredName)
	if err != nil {
		return 0, nil, err
	}
	phases := []*input{measured}
	if key == "late" {
		late, err := open(curveInput(key, i, "late"))
		if err != nil {
			return 0, nil, err
		}
		if late.spans > 0 {
			phases = append(phases, late)
		}
	}
	c, err := build(ctx, ours, options{wait: curveWait, maxTraces: curveMaxTraces})
	if err != nil {
		return 0, nil, err
	}
	defer c.tel.shutdown()
	for b := range warm.batches {
		td, err := warm.decode(b)
		if err != nil {
			return 0, nil, err
		}
		if err := c.ConsumeTraces(ctx, td); err != nil {
			return 0, nil, err
		}
	}
	analysed := man.Traces[warmName]
	if err := waitAnalysed(c, analysed); err != nil {
		return 0, nil, err
	}
	between := func(int) error { return waitAnalysed(c, analysed+man.Traces[measuredName]) }
	st, err := feed(ctx, c, phases, between, allocs{})
	if err != nil {
		return 0, nil, err
	}
	// The late spans must have been taken as late, and no others: a
	// machine so busy that the harness stalled for decision_wait would
	// make spans late that were not meant to be.
	if late, counted := st.Spans-measured.spans, c.tel.sum("otelcol_processor_errorownership_spans_late"); int64(late) != counted {
		st.Problems = append(st.Problems, fmt.Sprintf("%d spans sent late, %d counted in spans_late", late, counted))
	}
	return float64(st.CPU.Nanoseconds()) / float64(st.Spans), st.Problems, nil
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
