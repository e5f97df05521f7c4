// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// childResults is everything one child process measured, at one core
// setting.
type childResults struct {
	// GOMAXPROCS is the child's; Pinned says whether it ran under taskset.
	GOMAXPROCS int  `json:"gomaxprocs"`
	Pinned     bool `json:"pinned"`
	// Runs are the side-by-side runs: shape, contender, one per round.
	Runs map[string]map[string][]runStats `json:"runs"`
	// Buffered is the heap per buffered span, in bytes: shape, contender
	// (ours and groupbytrace), one per repetition.
	Buffered map[string]map[string][]float64 `json:"buffered"`
	// MarshalOnly and Full are the pipeline rounds.
	MarshalOnly []pipelineRound `json:"marshal_only"`
	Full        []pipelineRound `json:"full"`
	// Curves are our CPU per span in nanoseconds: curve, point, one per
	// repetition. Only the one-core child measures them.
	Curves map[string][][]float64 `json:"curves,omitempty"`
	// Profiles split our CPU per span into the processor's parts, by
	// shape and by the growth curves' compared points ("curve/x"). Only
	// the one-core child profiles.
	Profiles map[string]cpuSplit `json:"profiles,omitempty"`
	// Notes are what the growth curves' runs did not do as meant.
	Notes []string `json:"notes,omitempty"`
}

// pipelineRound is one round of a with/without comparison: CPU time
// without and with our processor for the same spans.
type pipelineRound struct {
	Spans   int           `json:"spans"`
	Without time.Duration `json:"without_ns"`
	With    time.Duration `json:"with_ns"`
}

// childConfig is what the parent tells a child.
type childConfig struct {
	data   string // the workload directory
	result string // where the child writes its results
	rounds int
	curves bool
	pinned bool
}

// manifest is the workload directory's index: the traces of each input,
// which the growth curves wait for.
type manifest struct {
	Traces map[string]int `json:"traces"`
}

const manifestName = "manifest.json"

// runChild measures everything at the process's GOMAXPROCS and writes the
// results for the parent.
func runChild(ctx context.Context, cfg childConfig) error {
	var man manifest
	b, err := os.ReadFile(filepath.Join(cfg.data, manifestName))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &man); err != nil {
		return err
	}
	res := &childResults{GOMAXPROCS: runtime.GOMAXPROCS(0), Pinned: cfg.pinned}
	lg := progress(fmt.Sprintf("[GOMAXPROCS=%d]", res.GOMAXPROCS))

	inputs := map[string]*input{}
	defer func() {
		for _, in := range inputs {
			in.close()
		}
	}()
	open := func(name string) (*input, error) {
		if in, ok := inputs[name]; ok {
			return in, nil
		}
		in, err := openInput(filepath.Join(cfg.data, name))
		if err != nil {
			return nil, err
		}
		inputs[name] = in
		return in, nil
	}

	if res.Runs, err = sideBySide(ctx, open, cfg.rounds, lg); err != nil {
		return err
	}
	set0, err := open(inputName("whole", 0))
	if err != nil {
		return err
	}
	if res.MarshalOnly, err = marshalOnly(ctx, set0, cfg.rounds); err != nil {
		return err
	}
	lg("marshal-only pipeline done")
	if res.Full, err = fullPipeline(ctx, set0, cfg.rounds); err != nil {
		return err
	}
	lg("full OTLP pipeline done")
	if cfg.curves {
		if res.Curves, err = measureCurves(ctx, open, man, &res.Notes, lg); err != nil {
			return err
		}
		// Unmeasured: the profiler's own cost stays out of every figure.
		if res.Profiles, err = profileShapes(ctx, open); err != nil {
			return err
		}
		points, err := profileCurvePoints(ctx, open, man)
		if err != nil {
			return err
		}
		maps.Copy(res.Profiles, points)
		lg("profiles done")
	}
	// Last: groupbytrace with a wait of an hour leaves its timers, and
	// through them the spans it held, behind for an hour after shutdown.
	if res.Buffered, err = bufferedHeaps(ctx, open, lg); err != nil {
		return err
	}
	out, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(cfg.result, out, 0o644)
}

// progress returns a logger that prints to standard error with the time
// since it was made.
func progress(prefix string) func(format string, args ...any) {
	start := time.Now()
	return func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %6.1fs  %s\n", prefix, time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
}

// sideBySide runs every contender over every shape in each round, the
// contenders' order rotated from round to round so that none always runs
// first (or last) after the machine's other work. Round r feeds set r
// modulo mixSets to every contender.
func sideBySide(ctx context.Context, open func(string) (*input, error), rounds int, lg func(string, ...any)) (map[string]map[string][]runStats, error) {
	// The first decoding in a process allocates a little more than the
	// others: the calibration starts after one.
	if in, err := open(inputName("whole", 0)); err != nil {
		return nil, err
	} else if _, err := decodeAllocs(in.slice(0, min(len(in.batches), decodeChunk))); err != nil {
		return nil, err
	}
	dec := map[string]allocs{}
	for set := range mixSets {
		for _, name := range []string{"whole", "spread"} {
			in, err := open(inputName(name, set))
			if err != nil {
				return nil, err
			}
			if dec[in.name], err = decodeAllocs(in); err != nil {
				return nil, err
			}
		}
	}
	out := map[string]map[string][]runStats{}
	for _, sh := range shapes {
		out[sh.key] = map[string][]runStats{}
	}
	for r := range rounds {
		set := r % mixSets
		for _, sh := range shapes {
			in, err := open(inputName(sh.input, set))
			if err != nil {
				return nil, err
			}
			for k := range contenderKeys {
				key := contenderKeys[(k+r)%len(contenderKeys)]
				c, err := build(ctx, key, options{wait: sh.wait})
				if err != nil {
					return nil, err
				}
				st, err := feed(ctx, c, []*input{in}, nil, dec[in.name])
				c.tel.shutdown()
				if err != nil {
					return nil, fmt.Errorf("%s, %s: %w", sh.key, key, err)
				}
				out[sh.key][key] = append(out[sh.key][key], st)
			}
		}
		lg("side-by-side round %d of %d done", r+1, rounds)
	}
	return out, nil
}
