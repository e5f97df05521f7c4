// SPDX-License-Identifier: Apache-2.0

// Package collectorproc runs the custom collector (bin/otelcol-errorownership,
// built by `make otelcol`) as a child process, as users run it: with its
// configuration files, its health check, its Prometheus telemetry, and
// SIGTERM to stop. The end-to-end tests and `make scale-demo` start their
// collectors with it.
package collectorproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build runs `make otelcol` in the repository at root and returns the
// binary's absolute path. make skips the build when nothing changed; a
// cold build takes a few minutes.
func Build(ctx context.Context, root string) (string, error) {
	cmd := exec.CommandContext(ctx, "make", "otelcol")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make otelcol: %w\n%s", err, out)
	}
	return filepath.Abs(filepath.Join(root, "bin", "otelcol-errorownership"))
}

// Options say how to start a collector.
type Options struct {
	// Name names the collector in errors.
	Name string
	// Configs are the configuration sources, merged in order as the
	// collector merges repeated --config flags: file paths, or
	// "yaml:…" strings. Maps merge key by key; a later list replaces an
	// earlier one.
	Configs []string
	// HealthAddr is the health_check extension's endpoint: Start returns
	// once it answers 200. Empty: Start returns once the process runs.
	HealthAddr string
	// MetricsAddr is where the configuration has the collector serve its
	// Prometheus telemetry (service::telemetry::metrics).
	MetricsAddr string
}

// Process is one running collector.
type Process struct {
	opts    Options
	cmd     *exec.Cmd
	log     *syncBuffer
	started time.Time
	exited  chan struct{} // closed once the process has exited
	err     error         // its exit status, once exited is closed
}

// Start starts the collector and waits, until ctx ends, for its health
// check to answer 200. An error carries the end of the collector's log.
func Start(ctx context.Context, bin string, o Options) (*Process, error) {
	p := &Process{opts: o, log: &syncBuffer{}, exited: make(chan struct{})}
	var args []string
	for _, c := range o.Configs {
		args = append(args, "--config", c)
	}
	p.cmd = exec.Command(bin, args...) //nolint:gosec // G204: the collector binary the caller built, with its config files
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	if o.HealthAddr == "" {
		return p, nil
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: time.Second}
	for {
		if res, err := client.Get("http://" + o.HealthAddr + "/"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-p.exited:
			err := p.err
			if err == nil {
				err = errors.New("exit status 0")
			}
			return nil, fmt.Errorf("%s exited while starting (%w):\n%s", o.Name, err, p.LogTail(4<<10))
		case <-ctx.Done():
			p.Kill()
			return nil, fmt.Errorf("%s: the health check at %s never answered 200 (%w):\n%s", o.Name, o.HealthAddr, context.Cause(ctx), p.LogTail(4<<10))
		case <-tick.C:
		}
	}
}

// Name returns the name Start was given.
func (p *Process) Name() string { return p.opts.Name }

// Started returns when the process was started.
func (p *Process) Started() time.Time { return p.started }

// Log returns everything the collector wrote to its standard output and
// error.
func (p *Process) Log() string { return p.log.String() }

// LogTail returns the last n bytes of Log.
func (p *Process) LogTail(n int) string {
	s := p.Log()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Signal sends sig to the collector.
func (p *Process) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits until the collector exits or limit passes, and returns its
// exit status, or an error saying it still runs.
func (p *Process) Wait(limit time.Duration) error {
	if !p.Running() {
		return p.err
	}
	select {
	case <-p.exited:
		return p.err
	case <-time.After(limit):
		return fmt.Errorf("%s was still running %v later", p.opts.Name, limit)
	}
}

// Terminate sends SIGTERM, as an orchestrator stopping the collector does,
// and waits for it to exit: it returns how long that took and the exit
// status. A collector still running after limit is killed, and the error
// says so.
func (p *Process) Terminate(limit time.Duration) (time.Duration, error) {
	start := time.Now()
	if !p.Running() {
		return 0, p.err
	}
	if err := p.Signal(syscall.SIGTERM); err != nil && p.Running() {
		return 0, fmt.Errorf("%s: SIGTERM: %w", p.opts.Name, err)
	}
	if err := p.Wait(limit); p.Running() {
		p.Kill()
		return time.Since(start), fmt.Errorf("%w after SIGTERM; killed", err)
	}
	return time.Since(start), p.err
}

// Kill kills the collector if it runs and waits for it to exit.
func (p *Process) Kill() {
	if p.Running() {
		_ = p.cmd.Process.Kill()
	}
	<-p.exited
}

// Metric sums the samples of the collector's Prometheus metric name (or
// name_total, a counter's exposition: "…_spans_late" is "…_spans_late_total")
// whose line contains every one of labels, such as `verdict="own"`. Another
// metric whose name merely starts with name ("…_verdicts_corrected" for
// "…_verdicts") is not summed. It fails when the
// telemetry cannot be read, for example once the collector has stopped.
func (p *Process) Metric(name string, labels ...string) (float64, error) {
	samples, err := p.Samples(name, labels...)
	sum := 0.0
	for _, s := range samples {
		sum += s.Value
	}
	return sum, err
}

// Sample is one line of Prometheus telemetry.
type Sample struct {
	// Series is the metric name with its labels, as the line has them.
	Series string
	Value  float64
}

// Samples returns the samples Metric would sum.
func (p *Process) Samples(name string, labels ...string) ([]Sample, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	res, err := client.Get("http://" + p.opts.MetricsAddr + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("%s: telemetry: %w", p.opts.Name, err)
	}
	defer res.Body.Close()
	var out []Sample
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !isMetric(line, name) || !containsAll(line, labels) {
			continue
		}
		cut := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[cut+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: telemetry: cannot read %q", p.opts.Name, line)
		}
		out = append(out, Sample{Series: line[:cut], Value: v})
	}
	return out, sc.Err()
}

// isMetric reports whether the exposition line is a sample of name, or of
// name_total.
func isMetric(line, name string) bool {
	series, _, _ := strings.Cut(line, " ")
	series, _, _ = strings.Cut(series, "{")
	return series == name || series == name+"_total"
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// syncBuffer is a bytes.Buffer the process writes while others read it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
