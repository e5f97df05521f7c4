// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"golang.org/x/sys/unix"
)

// processCPU is the CPU time (user and system) the process has used, in
// all its threads, those that ended included: what getrusage reports as
// ru_utime+ru_stime, to the nanosecond.
func processCPU() time.Duration { return clock(unix.CLOCK_PROCESS_CPUTIME_ID) }

// threadCPU is the CPU time the calling thread has used. It is the calling
// goroutine's only while that goroutine is locked to its thread.
func threadCPU() time.Duration { return clock(unix.CLOCK_THREAD_CPUTIME_ID) }

func clock(id int32) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(%d): %v", id, err))
	}
	return time.Duration(ts.Nano())
}

// The runtime/metrics read by the runs.
const (
	metricAllocObjects = "/gc/heap/allocs:objects"
	metricTinyAllocs   = "/gc/heap/tiny/allocs:objects"
	metricAllocBytes   = "/gc/heap/allocs:bytes"
	metricHeapObjects  = "/memory/classes/heap/objects:bytes"
)

// allocatedObjects counts every heap allocation so far: the tiny ones packed
// into a block are counted apart from the rest, which count the block only
// if it survived a collection.
func allocatedObjects() uint64 {
	s := []metrics.Sample{{Name: metricAllocObjects}, {Name: metricTinyAllocs}}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

func readMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// liveHeap collects garbage twice, so that objects freed by finalizers and
// the sweep are gone too, and returns the bytes of the objects left.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	return readMetric(metricHeapObjects)
}

// heapSampler records the high-water mark of the heap's objects while a run
// goes on: there is no such mark in the runtime, and the heap peaks just
// before each collection, so it is sampled often.
type heapSampler struct {
	stop chan struct{}
	peak chan uint64
}

const heapSampleEvery = 2 * time.Millisecond

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), peak: make(chan uint64, 1)}
	go func() {
		s := []metrics.Sample{{Name: metricHeapObjects}}
		var peak uint64
		t := time.NewTicker(heapSampleEvery)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-h.stop:
				h.peak <- peak
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// done stops the sampler and returns the peak.
func (h *heapSampler) done() uint64 {
	close(h.stop)
	return <-h.peak
}

// telemetry is what a collector gives its components: an SDK meter
// provider, so that the components' own metrics cost what they cost in a
// collector, read by hand by the harness to check what they did.
type telemetry struct {
	reader   *sdkmetric.ManualReader
	provider *sdkmetric.MeterProvider
}

func newTelemetry() *telemetry {
	r := sdkmetric.NewManualReader()
	return &telemetry{reader: r, provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))}
}

// settings are the component telemetry settings, with no-op logs and traces.
func (t *telemetry) settings() component.TelemetrySettings {
	set := componenttest.NewNopTelemetrySettings()
	set.MeterProvider = t.provider
	return set
}

// sum returns the sum of every data point of the named integer counter,
// zero if it was never recorded.
func (t *telemetry) sum(name string) int64 {
	var total int64
	t.each(name, func(data metricdata.Aggregation) {
		if s, ok := data.(metricdata.Sum[int64]); ok {
			for _, dp := range s.DataPoints {
				total += dp.Value
			}
		}
	})
	return total
}

// gauge returns the sum of the named integer gauge's data points, zero if
// it was never observed.
func (t *telemetry) gauge(name string) int64 {
	var total int64
	t.each(name, func(data metricdata.Aggregation) {
		if g, ok := data.(metricdata.Gauge[int64]); ok {
			for _, dp := range g.DataPoints {
				total += dp.Value
			}
		}
	})
	return total
}

// count returns how many values the named integer histogram has recorded.
func (t *telemetry) count(name string) uint64 {
	var total uint64
	t.each(name, func(data metricdata.Aggregation) {
		if h, ok := data.(metricdata.Histogram[int64]); ok {
			for _, dp := range h.DataPoints {
				total += dp.Count
			}
		}
	})
	return total
}

// each collects the metrics now and calls fn with the named metric's data,
// if it is there.
func (t *telemetry) each(name string, fn func(metricdata.Aggregation)) {
	var rm metricdata.ResourceMetrics
	if err := t.reader.Collect(context.Background(), &rm); err != nil {
		return
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				fn(m.Data)
			}
		}
	}
}

func (t *telemetry) shutdown() { _ = t.provider.Shutdown(context.Background()) }

// decodeChunk is how many batches the decoder hands the feeder at once:
// few hand-overs between the two goroutines, and little decoded data
// waiting (about 8,000 spans).
const decodeChunk = 16

// decoded is what the decoder hands over: a chunk of batches, or why it
// stopped.
type decoded struct {
	batches []ptrace.Traces
	err     error
}

// decodeAhead decodes in's batches into fresh pdata, a chunk at a time,
// ahead of the feeder, the way a receiver decodes requests for a
// pipeline. It runs locked to a thread of its own and reports that
// thread's CPU time once it is done, so that the decoding can be taken out
// of the process's CPU time: what is left is the component's (and the
// feeder's, which calls nothing else). The decoding's garbage stays in:
// every contender sees the same, and a collector's components live with
// it too.
func decodeAhead(in *input) (<-chan decoded, <-chan time.Duration) {
	out := make(chan decoded, 1)
	used := make(chan time.Duration, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := threadCPU()
		var u ptrace.ProtoUnmarshaler
		for lo := 0; lo < len(in.batches); lo += decodeChunk {
			hi := min(lo+decodeChunk, len(in.batches))
			chunk := make([]ptrace.Traces, 0, hi-lo)
			for _, b := range in.batches[lo:hi] {
				td, err := u.UnmarshalTraces(in.bytes(b))
				if err != nil {
					out <- decoded{err: fmt.Errorf("%s: %w", in.name, err)}
					close(out)
					used <- threadCPU() - start
					return
				}
				chunk = append(chunk, td)
			}
			out <- decoded{batches: chunk}
		}
		used <- threadCPU() - start
		close(out)
	}()
	return out, used
}

// allocs are heap allocations, in objects and bytes.
type allocs struct{ objects, bytes uint64 }

// decodeAllocs counts the heap allocations decodeAhead makes for in, to be
// taken out of a run's: the same input decodes to nearly the same
// allocations every time (within 0.01 a span: the runtime counts tiny
// allocations packed into one block only roughly).
func decodeAllocs(in *input) (allocs, error) {
	runtime.GC()
	o0, b0 := allocatedObjects(), readMetric(metricAllocBytes)
	chunks, used := decodeAhead(in)
	var err error
	for c := range chunks {
		err = cmp.Or(err, c.err)
	}
	<-used
	return allocs{allocatedObjects() - o0, readMetric(metricAllocBytes) - b0}, err
}

// runStats is what one run of a component over an input measured.
type runStats struct {
	Spans int `json:"spans"`
	// CPU is the process's CPU time over the feed and the shutdown, less
	// the decoding's, in nanoseconds.
	CPU time.Duration `json:"cpu_ns"`
	// Wall is the run's elapsed time, decoding included.
	Wall time.Duration `json:"wall_ns"`
	// AllocObjects and AllocBytes are the heap allocations of the run,
	// less the decoding's.
	AllocObjects int64 `json:"alloc_objects"`
	AllocBytes   int64 `json:"alloc_bytes"`
	// PeakHeap is the most bytes of heap objects seen during the run,
	// decoded batches waiting to be fed included.
	PeakHeap uint64 `json:"peak_heap"`
	// ShutdownCPU is the part of CPU spent in the component's Shutdown.
	ShutdownCPU time.Duration `json:"shutdown_cpu_ns"`
	// Problems lists what the component's own telemetry says it did not
	// do (spans dropped, traces evicted, spans not released), which would
	// make the run unfair.
	Problems []string `json:"problems,omitempty"`
}

// spansPerCPUSecond is the run's throughput.
func (r runStats) spansPerCPUSecond() float64 { return float64(r.Spans) / r.CPU.Seconds() }

// feed runs one measured run: it decodes the input ahead of the feeder,
// calls the component's ConsumeTraces with each batch as a pipeline does
// (never touching a batch again once handed over), waits for the
// component to finish with what it was given, and shuts it down. The
// component is built and started before, outside the measurement.
//
// An input in phases is fed one phase after the other, with between called
// after each but the last (inside the measurement): the late spans of the
// growth curve wait there for their traces to be analysed. dec is the
// decoding's own allocations, taken out of the run's.
func feed(ctx context.Context, c *running, phases []*input, between func(phase int) error, dec allocs) (runStats, error) {
	runtime.GC()
	runtime.GC()
	o0, b0 := allocatedObjects(), readMetric(metricAllocBytes)
	heap := sampleHeap()
	wall := time.Now()
	cpu0 := processCPU()
	if c.around != nil {
		c.around(true)
		defer c.around(false)
	}
	var decoding time.Duration
	spans := 0
	var err error
	for k, in := range phases {
		spans += in.spans
		chunks, decoderCPU := decodeAhead(in)
		for chunk := range chunks {
			if chunk.err != nil {
				err = cmp.Or(err, chunk.err)
				continue
			}
			for i, td := range chunk.batches {
				err = cmp.Or(err, c.ConsumeTraces(ctx, td))
				// The batch is the component's now: the harness
				// keeps no reference that would keep it alive.
				chunk.batches[i] = ptrace.Traces{}
			}
		}
		decoding += <-decoderCPU
		if err == nil && k < len(phases)-1 && between != nil {
			err = between(k)
		}
	}
	if err == nil {
		err = c.settle(spans)
	}
	cpuShutdown := processCPU()
	err = cmp.Or(err, c.Shutdown(ctx))
	shutdownCPU := processCPU() - cpuShutdown
	cpu := processCPU() - cpu0 - decoding
	st := runStats{
		Spans:        spans,
		CPU:          cpu,
		Wall:         time.Since(wall),
		AllocObjects: int64(allocatedObjects()-o0) - int64(dec.objects),
		AllocBytes:   int64(readMetric(metricAllocBytes)-b0) - int64(dec.bytes),
		PeakHeap:     heap.done(),
		ShutdownCPU:  shutdownCPU,
	}
	st.Problems = c.problems(spans)
	return st, err
}
