// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"golang.org/x/sys/unix"

	"github.com/errorownership/errorownership/internal/testsupport/scenario"
)

// Batch sizes of the traffic shapes.
const (
	// wholeBatchSpans is the size of a batch of whole traces, as a
	// load-balancing or tail-sampling tier forwards them.
	wholeBatchSpans = 500
	// sdkBatchSpans is the OpenTelemetry SDK batch span processor's
	// default max_export_batch_size.
	sdkBatchSpans = 512
)

// shape is one way the same spans reach the components: how they are cut
// into batches, and how long the buffering components wait for a trace.
type shape struct {
	// key names the shape in results; title in tables.
	key, title string
	// input names the batches fed: "whole" or "spread".
	input string
	// wait is our decision_wait and groupbytrace's wait_duration.
	wait time.Duration
}

// shapes are the traffic shapes of the side-by-side runs. The first two
// differ only by the wait, the last two only by how spans are batched.
var shapes = []shape{
	// Whole traces need no wait: both components get the shortest our
	// processor accepts, so that they release and analyse during the run.
	{key: "whole", title: "whole traces in one batch", input: "whole", wait: 100 * time.Millisecond},
	{key: "whole-5s", title: "whole traces, 5 s wait", input: "whole", wait: 5 * time.Second},
	// A gateway must wait out the SDKs' batch delay (5 s by default)
	// before a trace is whole: our default decision_wait.
	{key: "spread", title: "spread (one service a batch)", input: "spread", wait: 5 * time.Second},
}

// mixSets is how many independent sets of scenario.Mix traces the workload
// has; each round of the side-by-side runs feeds one of them to every
// contender.
const mixSets = 4

// mixTracesPerSet is the traces of one set: about 100,000 spans of 20-span
// traces, 400,000 in all.
var mixTracesPerSet = 5_000

// mixSeed is the scenario.Mix seed of set i; distinct seeds give distinct
// trace IDs.
func mixSeed(i int) int64 { return int64(i + 1) }

// inputName is the file of an input in the workload directory.
func inputName(input string, set int) string { return fmt.Sprintf("%s-%d.otlp", input, set) }

// traceRuns calls f with each run of consecutive ResourceSpans of td whose
// spans belong to one trace, as scenario writes a trace: one ResourceSpans
// per service.
func traceRuns(td ptrace.Traces, f func(rss []ptrace.ResourceSpans, spans int)) {
	var run []ptrace.ResourceSpans
	var id pcommon.TraceID
	spans := 0
	for _, rs := range td.ResourceSpans().All() {
		rid := firstTraceID(rs)
		if len(run) > 0 && rid != id {
			f(run, spans)
			run, spans = run[:0], 0
		}
		id = rid
		run = append(run, rs)
		spans += resourceSpanCount(rs)
	}
	if len(run) > 0 {
		f(run, spans)
	}
}

func firstTraceID(rs ptrace.ResourceSpans) pcommon.TraceID {
	for _, ss := range rs.ScopeSpans().All() {
		if ss.Spans().Len() > 0 {
			return ss.Spans().At(0).TraceID()
		}
	}
	return pcommon.TraceID{}
}

func resourceSpanCount(rs ptrace.ResourceSpans) int {
	n := 0
	for _, ss := range rs.ScopeSpans().All() {
		n += ss.Spans().Len()
	}
	return n
}

// wholeTraceBatches cuts td into batches of whole traces of about max
// spans: a trace goes into the current batch if it fits, else starts the
// next. A trace larger than max is cut into batches of max spans, its
// resources in order, which then arrive one after the other. The spans are
// moved out of td, which is left empty.
func wholeTraceBatches(td ptrace.Traces, maxSpans int) []ptrace.Traces {
	var out []ptrace.Traces
	cur, curSpans := ptrace.NewTraces(), 0
	flush := func() {
		if curSpans > 0 {
			out = append(out, cur)
			cur, curSpans = ptrace.NewTraces(), 0
		}
	}
	traceRuns(td, func(rss []ptrace.ResourceSpans, spans int) {
		if curSpans+spans > maxSpans {
			flush()
		}
		if spans <= maxSpans {
			for _, rs := range rss {
				rs.MoveTo(cur.ResourceSpans().AppendEmpty())
			}
			curSpans += spans
			return
		}
		for _, rs := range rss {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					if curSpans == maxSpans {
						flush()
					}
					dst := lastScope(cur, rs, ss)
					sp.MoveTo(dst.Spans().AppendEmpty())
					curSpans++
				}
			}
		}
		flush()
	})
	flush()
	return out
}

// lastScope returns the ScopeSpans of td that spans of rs and ss are
// appended to: its last one if it has their resource and scope, else a new
// one.
func lastScope(td ptrace.Traces, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans) ptrace.ScopeSpans {
	rss := td.ResourceSpans()
	if n := rss.Len(); n > 0 {
		last := rss.At(n - 1)
		if last.Resource().Attributes().Equal(rs.Resource().Attributes()) {
			if m := last.ScopeSpans().Len(); m > 0 && last.ScopeSpans().At(m-1).Scope().Name() == ss.Scope().Name() {
				return last.ScopeSpans().At(m - 1)
			}
			dst := last.ScopeSpans().AppendEmpty()
			ss.Scope().CopyTo(dst.Scope())
			return dst
		}
	}
	return newScope(td, rs, ss)
}

// newScope appends a ResourceSpans with rs's resource and a ScopeSpans with
// ss's scope to td, and returns the latter.
func newScope(td ptrace.Traces, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans) ptrace.ScopeSpans {
	dstRS := td.ResourceSpans().AppendEmpty()
	rs.Resource().CopyTo(dstRS.Resource())
	dst := dstRS.ScopeSpans().AppendEmpty()
	ss.Scope().CopyTo(dst.Scope())
	return dst
}

// spreadBatches arranges td as a gateway receives it from the services'
// SDKs: each service's batch span processor queues its spans as they end
// and exports perBatch of them at a time, so a batch holds one service's
// spans from many traces. The batches of all services are interleaved in
// the order they would be sent (when their last span ended), so that a
// trace's spans arrive in several batches, some of them far apart.
func spreadBatches(td ptrace.Traces, perBatch int) []ptrace.Traces {
	type ended struct {
		end  pcommon.Timestamp
		rs   ptrace.ResourceSpans
		ss   ptrace.ScopeSpans
		span ptrace.Span
	}
	byService := map[string][]ended{}
	var services []string
	for _, rs := range td.ResourceSpans().All() {
		name := serviceName(rs.Resource())
		if _, ok := byService[name]; !ok {
			services = append(services, name)
		}
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				byService[name] = append(byService[name], ended{sp.EndTimestamp(), rs, ss, sp})
			}
		}
	}
	type sent struct {
		at      pcommon.Timestamp
		service string
		seq     int
		td      ptrace.Traces
	}
	var batches []sent
	for _, name := range services {
		spans := byService[name]
		slices.SortStableFunc(spans, func(a, b ended) int { return cmp.Compare(a.end, b.end) })
		for lo, seq := 0, 0; lo < len(spans); lo, seq = lo+perBatch, seq+1 {
			chunk := spans[lo:min(lo+perBatch, len(spans))]
			b := ptrace.NewTraces()
			for _, e := range chunk {
				e.span.CopyTo(lastScope(b, e.rs, e.ss).Spans().AppendEmpty())
			}
			batches = append(batches, sent{at: chunk[len(chunk)-1].end, service: name, seq: seq, td: b})
		}
	}
	slices.SortStableFunc(batches, func(a, b sent) int {
		return cmp.Or(cmp.Compare(a.at, b.at), strings.Compare(a.service, b.service), cmp.Compare(a.seq, b.seq))
	})
	out := make([]ptrace.Traces, len(batches))
	for i, b := range batches {
		out[i] = b.td
	}
	return out
}

func serviceName(r pcommon.Resource) string {
	if v, ok := r.Attributes().Get("service.name"); ok {
		return v.Str()
	}
	return ""
}

// randomIDs gives every trace and span of td an ID that looks random, as
// an SDK's do, through a bijection, so that distinct IDs stay distinct and
// parents stay parents. scenario counts its IDs up, which no SDK does: a
// component's hash tables would meet a pattern they never meet in
// production.
func randomIDs(td ptrace.Traces) {
	span := func(id pcommon.SpanID) pcommon.SpanID {
		if id.IsEmpty() {
			return id
		}
		binary.BigEndian.PutUint64(id[:], mix64(binary.BigEndian.Uint64(id[:])))
		return id
	}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				tid := sp.TraceID()
				binary.BigEndian.PutUint64(tid[:8], mix64(binary.BigEndian.Uint64(tid[:8])))
				binary.BigEndian.PutUint64(tid[8:], mix64(binary.BigEndian.Uint64(tid[8:])^0x5bd1e9955bd1e995))
				sp.SetTraceID(tid)
				sp.SetSpanID(span(sp.SpanID()))
				sp.SetParentSpanID(span(sp.ParentSpanID()))
			}
		}
	}
}

// mix64 is SplitMix64's finalizer, a bijection in which every bit of the
// result depends on every bit of x.
func mix64(x uint64) uint64 {
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// mixInputs returns the side-by-side workload's inputs of set i, by name.
func mixInputs(set int) map[string][]ptrace.Traces {
	td := scenario.Mix(mixTracesPerSet, mixSeed(set))
	randomIDs(td)
	spread := spreadBatches(td, sdkBatchSpans)
	return map[string][]ptrace.Traces{
		"whole":  wholeTraceBatches(td, wholeBatchSpans),
		"spread": spread,
	}
}

// An input file holds batches as OTLP ExportTraceServiceRequest protobuf
// messages, each after a header of its length and its span count (two
// little-endian uint32s).
const batchHeader = 8

// writeInput writes batches to path.
func writeInput(path string, batches []ptrace.Traces) error {
	f, err := os.Create(path) //nolint:gosec // G304: an input file in the harness's own data directory
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var m ptrace.ProtoMarshaler
	var hdr [batchHeader]byte
	for _, td := range batches {
		b, err := m.MarshalTraces(td)
		if err != nil {
			f.Close()
			return err
		}
		binary.LittleEndian.PutUint32(hdr[:4], uint32(len(b)))
		binary.LittleEndian.PutUint32(hdr[4:], uint32(td.SpanCount()))
		if _, err := w.Write(hdr[:]); err != nil {
			f.Close()
			return err
		}
		if _, err := w.Write(b); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// input is an input file mapped into memory. The mapping is outside the Go
// heap: the batches waiting to be fed neither cost the garbage collector
// anything nor raise its heap goal, so that collections come as often as in
// a collector, whose live heap is what its components keep.
type input struct {
	name    string
	data    []byte
	batches []batchRef
	spans   int
}

// batchRef locates one batch in an input's data.
type batchRef struct {
	off, len, spans int
}

// openInput maps the input file at path.
func openInput(path string) (*input, error) {
	f, err := os.Open(path) //nolint:gosec // G304: an input file in the harness's own data directory
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	in := &input{name: path}
	if st.Size() == 0 {
		return in, nil // no batches: the late spans of a curve without any
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	in.data = data
	for off := 0; off < len(data); {
		if len(data)-off < batchHeader {
			in.close()
			return nil, fmt.Errorf("%s: truncated at byte %d", path, off)
		}
		n := int(binary.LittleEndian.Uint32(data[off:]))
		spans := int(binary.LittleEndian.Uint32(data[off+4:]))
		off += batchHeader
		if n > len(data)-off {
			in.close()
			return nil, fmt.Errorf("%s: batch at byte %d runs past the end", path, off)
		}
		in.batches = append(in.batches, batchRef{off: off, len: n, spans: spans})
		in.spans += spans
		off += n
	}
	return in, nil
}

// bytes is the protobuf message of batch b.
func (in *input) bytes(b batchRef) []byte { return in.data[b.off : b.off+b.len] }

// slice returns the part of in made of batches [lo, hi), sharing its data.
func (in *input) slice(lo, hi int) *input {
	s := &input{name: in.name, data: in.data, batches: in.batches[lo:hi]}
	for _, b := range s.batches {
		s.spans += b.spans
	}
	return s
}

// decode unmarshals batch i into new pdata.
func (in *input) decode(i int) (ptrace.Traces, error) {
	var u ptrace.ProtoUnmarshaler
	return u.UnmarshalTraces(in.bytes(in.batches[i]))
}

// close unmaps the input; slices of it must not be used afterwards.
func (in *input) close() error {
	if in.data == nil {
		return nil
	}
	err := unix.Munmap(in.data)
	in.data = nil
	return err
}
