// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"

	"github.com/errorownership/errorownership/internal/portlock"
	eo "github.com/errorownership/errorownership/processor/errorownershipprocessor"
)

// marshalExporter is the cheapest exporter there is: it marshals the batch
// to OTLP protobuf and discards the bytes. Against it the processor's cost
// looks largest.
func marshalExporter() consumer.Traces {
	var m ptrace.ProtoMarshaler
	next, _ := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		_, err := m.MarshalTraces(td)
		return err
	})
	return next
}

// marshalOnly measures what our processor costs the goroutine that calls
// it, the pipeline's: a no-op processor and ours, each followed by a
// marshal-only exporter, are handed the same batch one after the other,
// which goes first alternating from batch to batch. Each call is timed by
// the calling thread's CPU clock (the goroutine is locked to it), so that
// neither our workers' analysis nor the machine's other work is counted.
// The batches are split into rounds, each giving one ratio.
func marshalOnly(ctx context.Context, in *input, rounds int) ([]pipelineRound, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tel := newTelemetry()
	defer tel.shutdown()
	set := processortest.NewNopSettings(processortest.NopType)
	set.TelemetrySettings = tel.settings()
	nopProc, err := newNop(ctx, set, marshalExporter())
	if err != nil {
		return nil, err
	}
	f := eo.NewFactory()
	oursSet := processortest.NewNopSettings(f.Type())
	oursSet.TelemetrySettings = tel.settings()
	oursProc, err := f.CreateTraces(ctx, oursSet, f.CreateDefaultConfig(), marshalExporter())
	if err != nil {
		return nil, err
	}
	procs := [2]processor.Traces{nopProc, oursProc}
	for _, p := range procs {
		if err := p.Start(ctx, componenttest.NewNopHost()); err != nil {
			return nil, err
		}
	}
	// Both warm up on batches of their own first: names interned, pools
	// and maps grown, as in a collector that has been running.
	warmup := pipelineWarmup(len(in.batches))
	for i := range warmup {
		td, err := in.decode(len(in.batches) - 1 - i)
		if err != nil {
			return nil, err
		}
		for _, p := range procs {
			if err := p.ConsumeTraces(ctx, td); err != nil {
				return nil, err
			}
		}
	}
	measured := in.slice(0, len(in.batches)-warmup)
	out := make([]pipelineRound, rounds)
	for i := range measured.batches {
		td, err := measured.decode(i)
		if err != nil {
			return nil, err
		}
		r := &out[i*rounds/len(measured.batches)]
		r.Spans += measured.batches[i].spans
		for k := range procs {
			which := (k + i) % 2
			start := threadCPU()
			if err := procs[which].ConsumeTraces(ctx, td); err != nil {
				return nil, err
			}
			if d := threadCPU() - start; which == 0 {
				r.Without += d
			} else {
				r.With += d
			}
		}
	}
	for _, p := range procs {
		if err := p.Shutdown(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pipelineWarmup is how many batches of n warm the pipelines up: ten, or
// a quarter of a short input.
func pipelineWarmup(n int) int { return min(10, n/4) }

// fullPipeline measures a collector's whole work with and without our
// processor, all in this process over loopback: an OTLP/gRPC client sends
// the encoded requests to an otlpreceiver, which hands them to our
// processor (or straight on) and an otlpexporter (its defaults: a sending
// queue, gzip) sends them to a second otlpreceiver with a counting
// consumer. The two pipelines run side by side and are sent the same
// batch one after the other, which first alternating from batch to batch;
// the process's CPU time from sending a batch until its last span has
// arrived is the pipeline's. Our processor waits an hour before analysing,
// so that its analysis happens in its shutdown, whose CPU time is then
// shared out over the rounds by their spans: analysing later would put it
// in whichever pipeline's time it fell. The batches are split into rounds,
// each giving one ratio.
func fullPipeline(ctx context.Context, in *input, rounds int) (_ []pipelineRound, err error) {
	arrived := newArrivals()
	downTel := newTelemetry()
	defer downTel.shutdown()
	downAddr, down, err := startReceiver(ctx, downTel, arrived.consumer())
	if err != nil {
		return nil, err
	}
	defer shutdownInto(ctx, down, &err)

	tel := newTelemetry()
	defer tel.shutdown()
	host := componenttest.NewNopHost()
	var conns [2]*grpc.ClientConn // without, with
	var oursProc processor.Traces
	drained := false // oursProc shut down, its drain measured
	for k := range conns {
		exp, err := startExporter(ctx, tel, downAddr)
		if err != nil {
			return nil, err
		}
		defer shutdownInto(ctx, exp, &err)
		next := consumer.Traces(exp)
		if k == 1 {
			f := eo.NewFactory()
			set := processortest.NewNopSettings(f.Type())
			set.TelemetrySettings = tel.settings()
			if oursProc, err = f.CreateTraces(ctx, set, oursConfig(time.Hour), exp); err != nil {
				return nil, err
			}
			if err := oursProc.Start(ctx, host); err != nil {
				return nil, err
			}
			defer func() {
				if !drained {
					shutdownInto(ctx, oursProc, &err)
				}
			}()
			next = oursProc
		}
		addr, recv, err := startReceiver(ctx, tel, next)
		if err != nil {
			return nil, err
		}
		defer shutdownInto(ctx, recv, &err)
		if conns[k], err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return nil, err
		}
		defer conns[k].Close()
	}
	send := func(k int, b batchRef) error {
		want := arrived.load() + int64(b.spans)
		if err := export(ctx, conns[k], in.bytes(b)); err != nil {
			return err
		}
		return arrived.wait(want, time.Minute)
	}
	// Connections opened, names interned, pools and maps grown first.
	warmup := pipelineWarmup(len(in.batches))
	warm := in.batches[len(in.batches)-warmup:]
	warmSpans := 0
	for _, b := range warm {
		warmSpans += b.spans
		for k := range conns {
			if err := send(k, b); err != nil {
				return nil, err
			}
		}
	}
	measured := in.batches[:len(in.batches)-warmup]
	out := make([]pipelineRound, rounds)
	for i, b := range measured {
		r := &out[i*rounds/len(measured)]
		r.Spans += b.spans
		for k := range conns {
			which := (k + i) % 2
			start := processCPU()
			if err := send(which, b); err != nil {
				return nil, err
			}
			if d := processCPU() - start; which == 0 {
				r.Without += d
			} else {
				r.With += d
			}
		}
	}
	start := processCPU()
	drained = true
	if err := oursProc.Shutdown(ctx); err != nil {
		return nil, err
	}
	drain := processCPU() - start
	total := warmSpans
	for _, r := range out {
		total += r.Spans
	}
	for i := range out {
		out[i].With += time.Duration(float64(drain) * float64(out[i].Spans) / float64(total))
	}
	return out, nil
}

// shutdownInto shuts c down and joins its error into *err, so that a
// component that does not stop cleanly fails the run.
func shutdownInto(ctx context.Context, c component.Component, err *error) {
	*err = errors.Join(*err, c.Shutdown(ctx))
}

// arrivals counts the spans that reached the end of a pipeline, and lets
// the harness wait for them without polling.
type arrivals struct {
	n      atomic.Int64
	notify chan struct{}
}

func newArrivals() *arrivals { return &arrivals{notify: make(chan struct{}, 1)} }

func (a *arrivals) load() int64 { return a.n.Load() }

func (a *arrivals) consumer() consumer.Traces {
	c, _ := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		a.n.Add(int64(td.SpanCount()))
		select {
		case a.notify <- struct{}{}:
		default:
		}
		return nil
	})
	return c
}

// wait waits until want spans have arrived in all.
func (a *arrivals) wait(want int64, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for a.n.Load() < want {
		select {
		case <-a.notify:
		case <-deadline.C:
			return fmt.Errorf("full pipeline: %d spans of %d arrived in %v", a.n.Load(), want, timeout)
		}
	}
	return nil
}

// startExporter starts an OTLP/gRPC exporter, with its defaults but for
// the endpoint.
func startExporter(ctx context.Context, tel *telemetry, endpoint string) (exporter.Traces, error) {
	f := otlpexporter.NewFactory()
	cfg := f.CreateDefaultConfig()
	if err := confmap.NewFromStringMap(map[string]any{
		"endpoint": endpoint,
		"tls":      map[string]any{"insecure": true},
	}).Unmarshal(cfg); err != nil {
		return nil, err
	}
	set := exportertest.NewNopSettings(f.Type())
	set.TelemetrySettings = tel.settings()
	exp, err := f.CreateTraces(ctx, set, cfg)
	if err != nil {
		return nil, err
	}
	return exp, exp.Start(ctx, componenttest.NewNopHost())
}

// startReceiver starts an OTLP/gRPC receiver on a loopback port reserved
// (internal/portlock) until the receiver shuts down: the receiver binds
// the endpoint its configuration names and never says which port it got.
func startReceiver(ctx context.Context, tel *telemetry, next consumer.Traces) (string, component.Component, error) {
	port, err := portlock.Reserve()
	if err != nil {
		return "", nil, err
	}
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig()
	if err := confmap.NewFromStringMap(map[string]any{
		"protocols": map[string]any{"grpc": map[string]any{"endpoint": port.Addr()}},
	}).Unmarshal(cfg); err != nil {
		port.Release()
		return "", nil, err
	}
	set := receivertest.NewNopSettings(f.Type())
	set.TelemetrySettings = tel.settings()
	r, err := f.CreateTraces(ctx, set, cfg, next)
	if err != nil {
		port.Release()
		return "", nil, err
	}
	if err := r.Start(ctx, componenttest.NewNopHost()); err != nil {
		_ = r.Shutdown(ctx)
		port.Release()
		return "", nil, err
	}
	return port.Addr(), reservedReceiver{Component: r, port: port}, nil
}

// reservedReceiver gives its port back once shut down.
type reservedReceiver struct {
	component.Component
	port *portlock.Port
}

func (r reservedReceiver) Shutdown(ctx context.Context) error {
	err := r.Component.Shutdown(ctx)
	r.port.Release()
	return err
}

// exportMethod is the OTLP/gRPC trace export method.
const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// export sends one encoded ExportTraceServiceRequest as it is: the client
// does no encoding, so that the measurement is the collector's work.
func export(ctx context.Context, conn *grpc.ClientConn, request []byte) error {
	var response []byte
	return conn.Invoke(ctx, exportMethod, request, &response, grpc.ForceCodecV2(rawCodec{}))
}

// rawCodec passes encoded protobuf messages through gRPC unchanged.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, _ := v.([]byte)
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: cannot decode into %T", v)
	}
	*p = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }
