// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"

	"github.com/google/pprof/profile"
)

// Where our CPU goes: after the measured runs, the one-core child runs our
// processor again, unmeasured, under the CPU profiler, over each shape of
// the side-by-side runs and over the growth curves' points that their
// targets compare, and splits the profile's samples into the parts of the
// processor. RESULTS.md shows the split beside each target, so that a
// target missed comes with what the time went on.

// cpuParts are the parts a sample is counted in: the first pattern found,
// going up its stack from the leaf, names the part, so that a map look-up
// inside the statistics counts as statistics and an allocation inside
// extraction as extraction.
var cpuParts = []struct {
	name     string
	patterns []string
}{
	{"extraction", []string{"dependencyanalysis.(*Extractor)", "dependencyanalysis.(*Batch)", "dependencyanalysis.(*symbolCache)", "dependencyanalysis.(*Symbols)"}},
	{"buffering", []string{"errorownershipprocessor/internal/buffer."}},
	{"edge model", []string{"dependencyanalysis.(*EdgeModel)"}},
	{"statistics", []string{"dependencyanalysis.(*Stats)"}},
	{"linking and judging", []string{"dependencyanalysis.(*Analyzer)", "dependencyanalysis.(*Trace)", "dependencyanalysis.Hold"}},
	{"telemetry", []string{"go.opentelemetry.io/otel/sdk/metric"}},
	{"flushing", []string{"errorownershipprocessor.(*ownershipProcessor).flush"}},
	{"processor, other", []string{"errorownershipprocessor."}},
	{"garbage collection", []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcAssist"}},
	{"pipeline wrapper", []string{"processorhelper."}},
}

// otherPart holds what no part claims: the harness, the scheduler.
const otherPart = "other (harness, scheduler)"

// cpuSplit is the share of our CPU each part takes; RESULTS.md scales it to
// the measured CPU per span of the same runs.
type cpuSplit map[string]float64

// profiler profiles the parts of runs that are measured, between
// measured(true) and measured(false): a profile each.
type profiler struct {
	profiles []*bytes.Buffer
	on       bool
	err      error
}

func (p *profiler) measured(begin bool) {
	switch {
	case begin && !p.on && p.err == nil:
		buf := new(bytes.Buffer)
		// Ten times the default rate, so that a run of 100,000 spans
		// leaves a few hundred samples. StartCPUProfile then says on
		// standard error that it cannot set the rate (go.dev/issue/40094)
		// and keeps this one.
		runtime.SetCPUProfileRate(profileHz)
		if p.err = pprof.StartCPUProfile(buf); p.err == nil {
			p.profiles, p.on = append(p.profiles, buf), true
		}
	case !begin && p.on:
		pprof.StopCPUProfile()
		p.on = false
	}
}

// merged parses and merges the profiles.
func (p *profiler) merged() (*profile.Profile, error) {
	var all []*profile.Profile
	for _, buf := range p.profiles {
		one, err := profile.Parse(buf)
		if err != nil {
			return nil, err
		}
		all = append(all, one)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("nothing was profiled")
	}
	return profile.Merge(all)
}

// profiled runs fn, which calls measured around what it measures, and
// splits the CPU profile's samples into parts. The decoding of the
// batches, which the figures leave out, and the profiler's own work are
// left out of the samples.
func profiled(name string, fn func(measured func(begin bool)) error) (cpuSplit, error) {
	var prof profiler
	err := fn(prof.measured)
	prof.measured(false)
	if err == nil {
		err = prof.err
	}
	if err != nil {
		return nil, err
	}
	p, err := prof.merged()
	if err != nil {
		return nil, err
	}
	if profileDir != "" {
		if err := writeProfile(filepath.Join(profileDir, "cpu-"+strings.ReplaceAll(name, "/", "-")+".pb.gz"), p); err != nil {
			return nil, err
		}
	}
	cpu := len(p.SampleType) - 1 // cpu/nanoseconds, after samples/count
	split := cpuSplit{}
	var total float64
	for _, s := range p.Sample {
		part := partOf(s)
		if part == notOurs {
			continue
		}
		v := float64(s.Value[cpu])
		split[part] += v
		total += v
	}
	if total == 0 {
		return nil, fmt.Errorf("the profile holds no sample")
	}
	for k, v := range split {
		split[k] = v / total
	}
	return split, nil
}

// profileDir, when set (-profiles), is where the merged profiles are
// written, for go tool pprof.
var profileDir string

func writeProfile(path string, p *profile.Profile) error {
	f, err := os.Create(path) //nolint:gosec // G304: the directory -profiles names
	if err != nil {
		return err
	}
	if err := p.Write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// notOurs marks the samples left out: the harness's decoding of the
// batches (package main's decodeAhead) and the profiler writing.
const notOurs = "not ours"

// partOf names the part sample s counts in.
func partOf(s *profile.Sample) string {
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function != nil && (strings.HasPrefix(line.Function.Name, "main.decodeAhead") ||
				strings.HasPrefix(line.Function.Name, "runtime/pprof.")) {
				return notOurs
			}
		}
	}
	for _, loc := range s.Location { // leaf first
		for _, line := range loc.Line { // innermost inlined function first
			if line.Function == nil {
				continue
			}
			for _, part := range cpuParts {
				for _, pat := range part.patterns {
					if strings.Contains(line.Function.Name, pat) {
						return part.name
					}
				}
			}
		}
	}
	return otherPart
}

// profileHz is the profiler's sampling rate.
const profileHz = 1000

// profileRuns is how many times a profiled run is repeated, so that the
// profile holds a few hundred samples.
const profileRuns = 5

// profileShapes profiles our processor over each side-by-side shape.
func profileShapes(ctx context.Context, open func(string) (*input, error)) (map[string]cpuSplit, error) {
	out := map[string]cpuSplit{}
	for _, sh := range shapes {
		in, err := open(inputName(sh.input, 0))
		if err != nil {
			return nil, err
		}
		split, err := profiled(sh.key, func(measured func(bool)) error {
			for range profileRuns {
				c, err := build(ctx, ours, options{wait: sh.wait})
				if err != nil {
					return err
				}
				c.around = measured
				// No allocation counts are read: no decoding's to take out.
				_, err = feed(ctx, c, []*input{in}, nil, allocs{})
				c.tel.shutdown()
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("profiling %s: %w", sh.key, err)
		}
		out[sh.key] = split
	}
	return out, nil
}

// profileCurvePoints profiles the growth curves' points that the flat
// targets compare, keyed "curve/x".
func profileCurvePoints(ctx context.Context, open func(string) (*input, error), man manifest) (map[string]cpuSplit, error) {
	out := map[string]cpuSplit{}
	for _, ft := range flatTargets {
		c := curveByKey(ft.curve)
		for _, x := range []float64{ft.x, ft.of} {
			i := indexOf(c.points, x)
			if i < 0 {
				continue
			}
			split, err := profiled(curveProfileKey(c.key, x), func(measured func(bool)) error {
				for range profileRuns {
					if _, _, err := curvePoint(ctx, open, man, c.key, i, measured); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("profiling curve %s, point %v: %w", c.key, x, err)
			}
			out[curveProfileKey(c.key, x)] = split
		}
	}
	return out, nil
}

func curveProfileKey(curve string, x float64) string { return fmt.Sprintf("%s/%g", curve, x) }

func indexOf(xs []float64, x float64) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}
