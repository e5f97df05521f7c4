// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/connector/spanmetricsconnector"
	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/groupbytraceprocessor"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"

	eo "github.com/errorownership/errorownership/processor/errorownershipprocessor"
)

// The contenders, by key.
const (
	ours         = "errorownership"
	spanmetrics  = "spanmetrics"
	groupbytrace = "groupbytrace"
	nop          = "no-op"
)

// contenderKeys is the contenders in the order of the tables; rounds
// rotate it.
var contenderKeys = []string{ours, spanmetrics, groupbytrace, nop}

// running is a started component under test, with what the harness needs
// around it.
type running struct {
	consumer.Traces
	component.Component
	tel *telemetry
	// settle waits, before the shutdown, until the component has done
	// what the fed spans ask of it where its shutdown would not:
	// groupbytrace releases every trace. Ours analyses in its shutdown
	// whatever it still holds; the others have nothing left to do.
	settle func(fed int) error
	// around, when set, is told when feed's measurement begins (true,
	// after the collections that precede it) and ends (false, after the
	// shutdown): the profiler's window (profile.go).
	around func(begin bool)
	// problems reads the component's telemetry for work it skipped.
	problems func(fed int) []string
	// filed waits until the component holds what it was given, for the
	// buffered-heap measurement: groupbytrace files spans from a queue of
	// its own after ConsumeTraces has returned, as events (how many, the
	// caller counts with groupbytraceEvents).
	filed func(events int) error
}

// options are what a run sets besides the components' defaults.
type options struct {
	// wait is our decision_wait and groupbytrace's wait_duration.
	wait time.Duration
	// hold makes the buffering components keep every span: limits beyond
	// the input, for the buffered-heap measurement.
	hold bool
	// maxTraces, when positive, is our max_traces.
	maxTraces int
}

// build creates and starts contender key, next to a no-op consumer.
func build(ctx context.Context, key string, opt options) (*running, error) {
	tel := newTelemetry()
	r := &running{
		tel:      tel,
		settle:   func(int) error { return nil },
		problems: func(int) []string { return nil },
		filed:    func(int) error { return nil },
	}
	var err error
	switch key {
	case ours:
		err = r.buildOurs(ctx, opt)
	case spanmetrics:
		err = r.buildSpanmetrics(ctx)
	case groupbytrace:
		err = r.buildGroupbytrace(ctx, opt)
	case nop:
		err = r.buildNop(ctx)
	default:
		err = fmt.Errorf("unknown contender %q", key)
	}
	if err == nil {
		err = r.Start(ctx, componenttest.NewNopHost())
	}
	if err != nil {
		tel.shutdown()
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return r, nil
}

// oursConfig is the processor's default configuration with the wait
// given: no store, no hints.
func oursConfig(wait time.Duration) *eo.Config {
	cfg := eo.NewFactory().CreateDefaultConfig().(*eo.Config)
	cfg.DecisionWait = wait
	return cfg
}

func (r *running) buildOurs(ctx context.Context, opt options) error {
	f := eo.NewFactory()
	cfg := oursConfig(opt.wait)
	if opt.maxTraces > 0 {
		cfg.MaxTraces = opt.maxTraces
	}
	if opt.hold {
		cfg.MaxTraces, cfg.MaxSpans = 1<<30, 1<<30
	}
	p, err := f.CreateTraces(ctx, r.processorSettings(f.Type()), cfg, consumertest.NewNop())
	if err != nil {
		return err
	}
	r.Traces, r.Component = p, p
	r.problems = func(int) []string {
		return nonZero(r.tel,
			counter{"otelcol_processor_errorownership_spans_dropped", "spans dropped"},
			counter{"otelcol_processor_errorownership_traces_evicted", "traces evicted"},
			counter{"otelcol_processor_errorownership_panics_recovered", "panics"})
	}
	return nil
}

func (r *running) buildSpanmetrics(ctx context.Context) error {
	f := spanmetricsconnector.NewFactory()
	set := connectortest.NewNopSettings(f.Type())
	set.TelemetrySettings = r.tel.settings()
	c, err := f.CreateTracesToMetrics(ctx, set, f.CreateDefaultConfig(), consumertest.NewNop())
	if err != nil {
		return err
	}
	r.Traces, r.Component = c, c
	return nil
}

func (r *running) buildGroupbytrace(ctx context.Context, opt options) error {
	f := groupbytraceprocessor.NewFactory()
	cfg := f.CreateDefaultConfig().(*groupbytraceprocessor.Config)
	cfg.WaitDuration = opt.wait
	// Its default num_traces (1,000,000) is far above the traces of a
	// run, so nothing is evicted.
	var released atomic.Int64
	next, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		released.Add(int64(td.SpanCount()))
		return nil
	})
	if err != nil {
		return err
	}
	p, err := f.CreateTraces(ctx, r.processorSettings(f.Type()), cfg, next)
	if err != nil {
		return err
	}
	r.Traces, r.Component = p, stopRecorder{p}
	if !opt.hold {
		// Its Shutdown drops what it holds; a fair run waits until it
		// has released everything, as it would in a collector that
		// keeps running.
		r.settle = func(fed int) error {
			// A trace it lost is never released: give up once none
			// has come for longer than the wait (the run's problems
			// then say how many spans are missing).
			last, progress := released.Load(), time.Now()
			for last < int64(fed) && time.Since(progress) < cfg.WaitDuration+2*time.Second {
				time.Sleep(10 * time.Millisecond)
				if n := released.Load(); n != last {
					last, progress = n, time.Now()
				}
			}
			return nil
		}
	}
	r.filed = func(events int) error {
		// It records how long each event took, once handled.
		deadline := time.Now().Add(time.Minute)
		for r.tel.count("otelcol_processor_groupbytrace_event_latency") < uint64(events) {
			if time.Now().After(deadline) {
				return fmt.Errorf("groupbytrace handled %d of %d events in a minute", r.tel.count("otelcol_processor_groupbytrace_event_latency"), events)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}
	r.problems = func(fed int) []string {
		p := nonZero(r.tel, counter{"otelcol_processor_groupbytrace_traces_evicted", "traces evicted"})
		if n := released.Load(); !opt.hold && n != int64(fed) {
			p = append(p, fmt.Sprintf("released %d of %d spans", n, fed))
		}
		return p
	}
	return nil
}

// buildNop is a pass-through through processorhelper, as our processor is
// wrapped: the floor of what calling a processor costs.
func (r *running) buildNop(ctx context.Context) error {
	p, err := newNop(ctx, r.processorSettings(processortest.NopType), consumertest.NewNop())
	if err != nil {
		return err
	}
	r.Traces, r.Component = p, p
	return nil
}

func newNop(ctx context.Context, set processor.Settings, next consumer.Traces) (processor.Traces, error) {
	return processorhelper.NewTraces(ctx, set, nil, next,
		func(_ context.Context, td ptrace.Traces) (ptrace.Traces, error) { return td, nil },
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}))
}

func (r *running) processorSettings(typ component.Type) processor.Settings {
	set := processortest.NewNopSettings(typ)
	set.TelemetrySettings = r.tel.settings()
	return set
}

// groupbytraceStopped is when a groupbytrace processor last shut down. For
// a second after, timers of its own keep its ring buffer of trace IDs
// (16 MiB by default) and its storage alive: a heap measurement waits
// until they have gone (quiesce).
var groupbytraceStopped time.Time

// groupbytraceLinger is how long a groupbytrace processor's timers outlive
// its shutdown: its periodic metrics come every second.
const groupbytraceLinger = 1100 * time.Millisecond

// stopRecorder records when the component shut down in groupbytraceStopped.
type stopRecorder struct{ component.Component }

func (s stopRecorder) Shutdown(ctx context.Context) error {
	err := s.Component.Shutdown(ctx)
	groupbytraceStopped = time.Now()
	return err
}

// quiesce waits until no groupbytrace processor shut down keeps memory.
func quiesce() { time.Sleep(time.Until(groupbytraceStopped.Add(groupbytraceLinger))) }

// counter is a counter of a component's telemetry and what it counts.
type counter struct{ name, what string }

// nonZero lists the counters that are not zero, as "what: n".
func nonZero(t *telemetry, counters ...counter) []string {
	var out []string
	for _, c := range counters {
		if n := t.sum(c.name); n != 0 {
			out = append(out, fmt.Sprintf("%s: %d", c.what, n))
		}
	}
	return out
}
