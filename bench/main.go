// SPDX-License-Identifier: Apache-2.0

// Command bench-peers measures the errorownership processor side by side
// with its peers — the contrib spanmetrics connector, the contrib
// groupbytrace processor and a no-op processor — on the same batches, and
// writes RESULTS.md and the growth curves' SVG files.
//
// The parent process generates the workload once into a temporary
// directory, then runs itself twice as a child: on one core (GOMAXPROCS=1,
// pinned to CPU 0 with taskset when there is one) and on all cores. Each
// child alternates the contenders round by round and writes its figures
// for the parent, which summarises both. See README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	var (
		out    = flag.String("out", ".", "directory for RESULTS.md and the growth curves' SVG files")
		rounds = flag.Int("rounds", 9, "rounds of the side-by-side and pipeline comparisons")
		quick  = flag.Bool("quick", false, "a tenth of the workload and two rounds: to try the harness, not to quote")

		child  = flag.Bool("child", false, "measure at this process's GOMAXPROCS (run by the parent)")
		data   = flag.String("data", "", "child: the workload directory")
		result = flag.String("result", "", "child: where to write the figures")
		curves = flag.Bool("curves", false, "child: measure the growth curves too")
		pinned = flag.Bool("pinned", false, "child: the parent pinned this process to one CPU")
	)
	flag.StringVar(&profileDir, "profiles", "", "write the CPU profiles behind RESULTS.md's \"Where our CPU goes\" to this directory, for go tool pprof")
	flag.Parse()
	if *quick {
		scaleWorkload(10)
		*rounds = min(*rounds, 2)
	}
	ctx := context.Background()
	var err error
	if *child {
		err = runChild(ctx, childConfig{data: *data, result: *result, rounds: *rounds, curves: *curves, pinned: *pinned})
	} else {
		err = runParent(ctx, *out, *rounds, *quick)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-peers:", err)
		os.Exit(1)
	}
}

// scaleWorkload divides every workload size by div.
func scaleWorkload(div int) {
	mixTracesPerSet /= div
	curveSpans /= div
	bufferedSpans /= div
	traceSizes = slicesUpTo(traceSizes, curveSpans)
	edgeCounts = slicesUpTo(edgeCounts, curveSpans)
	curves[0].points, curves[1].points = floats(traceSizes), floats(edgeCounts)
}

func slicesUpTo(xs []int, limit int) []int {
	var out []int
	for _, x := range xs {
		if x <= limit {
			out = append(out, x)
		}
	}
	return out
}

// runParent generates the workload, runs the two children and writes the
// report.
func runParent(ctx context.Context, out string, rounds int, quick bool) error {
	start := time.Now()
	lg := progress("[parent]")
	m := describeMachine()
	dir, err := os.MkdirTemp("", "bench-peers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	lg("generating the workload in %s", dir)
	spans, err := generate(dir)
	if err != nil {
		return err
	}
	m.SpansPerSet, m.Sets = spans, mixSets
	lg("workload ready: %d sets of %d spans, and the growth curves' inputs", mixSets, spans)

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	_, tasksetErr := exec.LookPath("taskset")
	m.Taskset = tasksetErr == nil
	var settings []*childResults
	for _, procs := range []int{1, runtime.NumCPU()} {
		if procs > 1 && len(settings) > 0 && runtime.NumCPU() == 1 {
			break
		}
		res, err := runChildProcess(ctx, exe, dir, procs, rounds, quick, procs == 1 && m.Taskset)
		if err != nil {
			return err
		}
		settings = append(settings, res)
	}

	m.LoadAfter = loadAverage()
	m.Duration = time.Since(start)
	m.Runs = 0
	for _, s := range settings {
		for _, byKey := range s.Runs {
			for _, rs := range byKey {
				m.Runs += len(rs)
			}
		}
	}
	md := report(m, settings, rounds)
	if err := os.WriteFile(filepath.Join(out, "RESULTS.md"), []byte(md), 0o644); err != nil {
		return err
	}
	for _, s := range settings {
		if s.Curves == nil {
			continue
		}
		for _, c := range curves {
			if err := plotCurve(out, c, s.Curves[c.key]); err != nil {
				return err
			}
		}
	}
	fmt.Print(md)
	lg("wrote %s and the growth curves in %v", filepath.Join(out, "RESULTS.md"), time.Since(start).Round(time.Second))
	return nil
}

// runChildProcess runs this program as a child at GOMAXPROCS procs, pinned
// to CPU 0 if pin, and reads its figures. The one-core child measures the
// growth curves too.
func runChildProcess(ctx context.Context, exe, dir string, procs, rounds int, quick, pin bool) (*childResults, error) {
	result := filepath.Join(dir, fmt.Sprintf("result-%d.json", procs))
	args := []string{"-child", "-data", dir, "-result", result, "-rounds", strconv.Itoa(rounds),
		"-curves=" + strconv.FormatBool(procs == 1), "-pinned=" + strconv.FormatBool(pin), "-quick=" + strconv.FormatBool(quick),
		"-profiles=" + profileDir}
	cmd := exec.CommandContext(ctx, exe, args...) //nolint:gosec // G204: this program itself, as a child, with the flags built here
	if pin {
		cmd = exec.CommandContext(ctx, "taskset", append([]string{"-c", "0", exe}, args...)...) //nolint:gosec // G204: this program as a child, pinned to CPU 0 by taskset
	}
	// The runtime's defaults, but for GOMAXPROCS: figures measured
	// under someone's GOGC would not compare.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMAXPROCS=") && !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(procs))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("child at GOMAXPROCS=%d: %w", procs, err)
	}
	b, err := os.ReadFile(result) //nolint:gosec // G304: the result file the child was told to write in dir
	if err != nil {
		return nil, err
	}
	var res childResults
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// generate writes every input and the manifest to dir and returns the
// spans of one set of the side-by-side workload. The inputs are generated
// in parallel, one per CPU at a time.
func generate(dir string) (int, error) {
	var (
		mu    sync.Mutex
		man   = manifest{Traces: map[string]int{}}
		spans int
		errs  []error
	)
	jobs := make(chan func() error)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for job := range jobs {
				if err := job(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for set := range mixSets {
		jobs <- func() error {
			inputs := mixInputs(set)
			for name, batches := range inputs {
				if err := writeInput(filepath.Join(dir, inputName(name, set)), batches); err != nil {
					return err
				}
			}
			if set == 0 {
				mu.Lock()
				for _, b := range inputs["whole"] {
					spans += b.SpanCount()
				}
				mu.Unlock()
			}
			return nil
		}
	}
	for _, gen := range curveInputs() {
		jobs <- func() error {
			batches, traces := gen.make()
			if err := writeInput(filepath.Join(dir, gen.name), batches); err != nil {
				return err
			}
			mu.Lock()
			man.Traces[gen.name] = traces
			mu.Unlock()
			return nil
		}
	}
	close(jobs)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	b, err := json.Marshal(man)
	if err != nil {
		return 0, err
	}
	return spans, os.WriteFile(filepath.Join(dir, manifestName), b, 0o644)
}
