// SPDX-License-Identifier: Apache-2.0

package simulation

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/probabilisticsamplerprocessor"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/processor"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/errorownership/errorownership/extension/errorownershiphintsextension"
	"github.com/errorownership/errorownership/extension/errorownershipstoreextension"
	"github.com/errorownership/errorownership/internal/portlock"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor"
	"github.com/errorownership/errorownership/store"
)

// Collector is the collector part of the simulation, in process: an OTLP/HTTP
// trace receiver at /v1/traces feeding the errorownership processor (the
// same component the built collector runs), which writes to PostgreSQL, and
// the errorownership_hints extension serving its model as ownership hints.
// With CollectorConfig.Sample below 1, contrib's probabilistic_sampler
// processor stands in front of the errorownership processor, as in a
// pipeline that samples before it analyses.
type Collector struct {
	// OTLPEndpoint is the receiver's URL, http://127.0.0.1:PORT/v1/traces.
	OTLPEndpoint string
	// HintsURL is the hints endpoint's base URL, http://127.0.0.1:PORT.
	HintsURL string
	// Spans counts the spans received, Kept those the sampler passed on to
	// the errorownership processor (all of them without a sampler).
	Spans, Kept atomic.Int64
	// Threshold is the sampling threshold the sampler writes into each kept
	// span's tracestate (ot=th), AlwaysSampleThreshold without a sampler.
	Threshold sampling.Threshold

	// first is what the receiver hands spans to: the sampler, or proc.
	first    processor.Traces
	sampler  processor.Traces
	proc     processor.Traces
	hints    extension.Extension
	storeExt extension.Extension
	srv      *http.Server
	ln       net.Listener

	hintsPort *portlock.Port
}

// CollectorConfig is what the demo tunes.
type CollectorConfig struct {
	DSN           string
	DecisionWait  time.Duration
	FlushInterval time.Duration
	// BudgetRatio and BudgetMin are the retry budget the hints announce.
	BudgetRatio, BudgetMin float64
	// Bucket is the store's bucket width [store.DefaultConfig's].
	Bucket time.Duration
	// Sample is the share of traces kept, in (0, 1]; 0 and 1 keep all.
	// Below 1, contrib's probabilistic_sampler in proportional mode keeps
	// a trace iff its trace ID's randomness passes the threshold for
	// Sample, as OpenTelemetry's consistent probability sampling does,
	// and writes the threshold (ot=th) into each kept span's tracestate:
	// the errorownership processor weighs each kept trace by it
	// (docs/design.md §8.1).
	Sample float64
}

// SampleThreshold returns the threshold the probabilistic sampler uses for
// a share p of traces, with its default precision of four hex digits (th:e666
// for 0.1: each kept trace weighs 65536/6554).
func SampleThreshold(p float64) (sampling.Threshold, error) {
	if !(p > 0 && p <= 1) {
		return sampling.AlwaysSampleThreshold, fmt.Errorf("sample %v: give the share of traces to keep, in (0, 1]", p)
	}
	if p == 1 {
		return sampling.AlwaysSampleThreshold, nil
	}
	th, err := sampling.ProbabilityToThresholdWithPrecision(p, samplerPrecision)
	if err != nil {
		return sampling.AlwaysSampleThreshold, fmt.Errorf("sample %v: %w", p, err)
	}
	return th, nil
}

// samplerPrecision is the probabilistic sampler's default sampling_precision.
const samplerPrecision = 4

// KeptTrace reports whether the sampler keeps trace id (every trace without one).
func (c *Collector) KeptTrace(id pcommon.TraceID) bool {
	return c.Threshold.ShouldSample(sampling.TraceIDToRandomness(id))
}

// decisionWait is the in-process processor's decision_wait. The services
// export every 200 ms, each its own batch, so a trace's spans arrive up to
// a few hundred milliseconds apart, more on a loaded machine; a trace whose
// spans come further apart than decision_wait is analysed in parts, and a
// part is set apart as incomplete, not judged (docs/design.md §8.1).
const decisionWait = time.Second

// StartCollector starts the processor and the receiver on free loopback ports.
func StartCollector(ctx context.Context, cc CollectorConfig) (_ *Collector, err error) {
	// The hints extension binds the endpoint its configuration names and
	// never says which port it got: its port is reserved (internal/portlock)
	// until Shutdown, so that no other process of ours, a test running at the
	// same time, takes it first.
	hintsPort, err := portlock.Reserve()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			hintsPort.Release()
		}
	}()
	hintsAddr := hintsPort.Addr()
	f := errorownershipprocessor.NewFactory()
	cfg := f.CreateDefaultConfig().(*errorownershipprocessor.Config)
	cfg.DecisionWait = cc.DecisionWait
	cfg.FlushInterval = cc.FlushInterval
	sc := store.DefaultConfig()
	sc.DSN = configopaque.String(cc.DSN)
	sc.AuditPerServicePerMinute = 1_000_000 // the demo audits every coincidental error
	sc.ModelRefresh = cc.FlushInterval      // the demo's minutes are seconds
	if cc.Bucket > 0 {
		sc.Bucket = cc.Bucket
	}
	sf := errorownershipstoreextension.NewFactory()
	scfg := sf.CreateDefaultConfig().(*errorownershipstoreextension.Config)
	scfg.Config = sc
	storeID := component.NewID(sf.Type())
	cfg.Store = errorownershipstoreextension.NewRef(storeID)
	hf := errorownershiphintsextension.NewFactory()
	hcfg := hf.CreateDefaultConfig().(*errorownershiphintsextension.Config)
	hcfg.NetAddr.Endpoint = hintsAddr
	hcfg.TTL = time.Second
	hcfg.Refresh = time.Second
	hcfg.RetryBudget.Ratio = cc.BudgetRatio
	hcfg.RetryBudget.MinRetriesPerSecond = cc.BudgetMin
	if err := hcfg.Validate(); err != nil {
		return nil, fmt.Errorf("hints extension config: %w", err)
	}
	hintsID := component.NewID(hf.Type())
	cfg.HintsExtension = &hintsID
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("processor config: %w", err)
	}
	// The settings a collector would give, built here rather than with the
	// collector's test helpers, which would link the testing package into
	// the CLI.
	tel := component.TelemetrySettings{
		Logger:         zap.NewNop(),
		TracerProvider: tracenoop.NewTracerProvider(),
		MeterProvider:  metricnoop.NewMeterProvider(),
	}
	if err := errors.Join(scfg.Config.Validate(), scfg.Validate()); err != nil {
		return nil, fmt.Errorf("store extension config: %w", err)
	}
	storeExt, err := sf.Create(ctx, extension.Settings{ID: storeID, TelemetrySettings: tel, BuildInfo: component.NewDefaultBuildInfo()}, scfg)
	if err != nil {
		return nil, fmt.Errorf("create store extension: %w", err)
	}
	if err := storeExt.Start(ctx, host{}); err != nil {
		return nil, fmt.Errorf("start store extension: %w", err)
	}
	hints, err := hf.Create(ctx, extension.Settings{ID: hintsID, TelemetrySettings: tel, BuildInfo: component.NewDefaultBuildInfo()}, hcfg)
	if err != nil {
		_ = storeExt.Shutdown(ctx)
		return nil, fmt.Errorf("create hints extension: %w", err)
	}
	h := host{hintsID: hints, storeID: storeExt}
	if err := hints.Start(ctx, h); err != nil {
		_ = storeExt.Shutdown(ctx)
		return nil, fmt.Errorf("start hints extension: %w", err)
	}
	set := processor.Settings{ID: component.NewID(f.Type()), TelemetrySettings: tel, BuildInfo: component.NewDefaultBuildInfo()}
	discard, err := consumer.NewTraces(func(context.Context, ptrace.Traces) error { return nil })
	if err != nil {
		return nil, err
	}
	proc, err := f.CreateTraces(ctx, set, cfg, discard)
	if err != nil {
		_ = hints.Shutdown(ctx)
		_ = storeExt.Shutdown(ctx)
		return nil, fmt.Errorf("create processor: %w", err)
	}
	if err := proc.Start(ctx, h); err != nil {
		_ = hints.Shutdown(ctx)
		_ = storeExt.Shutdown(ctx)
		return nil, fmt.Errorf("start processor: %w", err)
	}
	c := &Collector{proc: proc, first: proc, hints: hints, storeExt: storeExt, hintsPort: hintsPort,
		HintsURL: "http://" + hintsAddr, Threshold: sampling.AlwaysSampleThreshold}
	stop := func() {
		if c.sampler != nil {
			_ = c.sampler.Shutdown(ctx)
		}
		_ = proc.Shutdown(ctx)
		_ = hints.Shutdown(ctx)
		_ = storeExt.Shutdown(ctx)
	}
	if cc.Sample > 0 && cc.Sample < 1 {
		if err := c.startSampler(ctx, tel, cc.Sample, h); err != nil {
			stop()
			return nil, err
		}
	}
	c.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stop()
		return nil, err
	}
	c.OTLPEndpoint = "http://" + c.ln.Addr().String() + "/v1/traces"
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", c.receive)
	c.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.srv.Serve(c.ln) }()
	return c, nil
}

// startSampler puts contrib's probabilistic_sampler in front of the
// errorownership processor, keeping a share sample of the traces.
func (c *Collector) startSampler(ctx context.Context, tel component.TelemetrySettings, sample float64, h host) error {
	th, err := SampleThreshold(sample)
	if err != nil {
		return err
	}
	f := probabilisticsamplerprocessor.NewFactory()
	cfg := f.CreateDefaultConfig().(*probabilisticsamplerprocessor.Config)
	// Proportional mode reads each span's randomness from its trace ID (or
	// an rv), so that a trace is kept or dropped whole, and writes ot=th;
	// the default hash_seed mode hashes instead, which OpenTelemetry's
	// consistent sampling cannot reproduce.
	cfg.Mode = probabilisticsamplerprocessor.Proportional
	cfg.SamplingPercentage = float32(sample * 100)
	cfg.SamplingPrecision = samplerPrecision
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("probabilistic_sampler config: %w", err)
	}
	kept, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		c.Kept.Add(int64(td.SpanCount()))
		return c.proc.ConsumeTraces(ctx, td)
	})
	if err != nil {
		return err
	}
	set := processor.Settings{ID: component.NewID(f.Type()), TelemetrySettings: tel, BuildInfo: component.NewDefaultBuildInfo()}
	sampler, err := f.CreateTraces(ctx, set, cfg, kept)
	if err != nil {
		return fmt.Errorf("create probabilistic_sampler: %w", err)
	}
	if err := sampler.Start(ctx, h); err != nil {
		return fmt.Errorf("start probabilistic_sampler: %w", err)
	}
	c.sampler, c.first, c.Threshold = sampler, sampler, th
	return nil
}

// receive decodes one OTLP/HTTP protobuf export and hands it to the
// pipeline: the sampler, if there is one, then the processor.
func (c *Collector) receive(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	td := req.Traces()
	n := int64(td.SpanCount()) // the sampler removes spans from td
	if err := c.first.ConsumeTraces(r.Context(), td); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	c.Spans.Add(n)
	if c.sampler == nil {
		c.Kept.Add(n)
	}
	out, _ := ptraceotlp.NewExportResponse().MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Shutdown stops the receiver, then the sampler, then the processor, which
// analyses every trace still buffered and writes the last statistics to
// the store, then the hints extension and the store extension, in the
// collector's order.
func (c *Collector) Shutdown(ctx context.Context) error {
	err := c.srv.Shutdown(ctx)
	if c.sampler != nil {
		err = errors.Join(err, c.sampler.Shutdown(ctx))
	}
	err = errors.Join(err, c.proc.Shutdown(ctx), c.hints.Shutdown(ctx), c.storeExt.Shutdown(ctx))
	c.hintsPort.Release()
	return err
}

// host is the collector host the components run in: its extensions, the
// hints and the store.
type host map[component.ID]component.Component

func (h host) GetExtensions() map[component.ID]component.Component { return h }
