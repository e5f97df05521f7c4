// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/buffer"
)

// worker analyses one shard's traces.
type worker struct {
	p     *ownershipProcessor
	index int // the worker's, and its shard's, place
	shard *buffer.Shard
	an    *dependencyanalysis.Analyzer
	take  []*buffer.Entry
	spans []dependencyanalysis.Span // a trace's records, when they came in several batches

	mu    sync.Mutex // guards stats, spare and held against the flusher
	stats *dependencyanalysis.Stats
	spare *dependencyanalysis.Stats
	// held are the worker's failed requests whose verdict rested on edges
	// without a mode, oldest first, judged again at each flush.
	held    []heldRequest
	settled []dependencyanalysis.Verdict // scratch: the verdicts counted now
	// gen numbers the bucket the worker's stats are for; flush advances it.
	gen uint64
	// late are the corrections of held requests of buckets already
	// flushed — their final verdicts in place of the provisional ones — by
	// generation, until the flusher takes them.
	lateMu sync.Mutex
	late   map[uint64]*dependencyanalysis.Stats
}

// loop calls work until it returns. A panic in the buffer code is
// recovered and counted, and work called again: the collector must not
// crash because the analysis did, and the shard must still be drained.
func (w *worker) loop(work func()) {
	for returned := false; !returned; {
		returned = w.safely(work)
	}
}

func (w *worker) safely(work func()) (returned bool) {
	defer func() {
		if r := recover(); r != nil {
			w.p.recovered(context.Background(), "taking traces from the buffer", r)
		}
	}()
	work()
	return true
}

// run analyses the shard's traces as they become due or are handed over,
// until the shard is closed and empty.
func (w *worker) run() {
	s := w.shard
	queued, handed := s.Signals()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	// lookAt is when the queue's head is due; the worker takes mu only then,
	// or when told the queue changed, never for each trace handed over.
	var lookAt int64
	const never = math.MaxInt64
	for {
		// Traces taken from the buffer hold symbols a sweep would not
		// find there: the lock is held until they are analysed.
		w.p.symbolsInUse.RLock()
		batch := s.TakeHanded(w.take[:0])
		now := w.p.buffer.Now()
		if len(batch) < cap(batch) && now >= lookAt {
			var wait time.Duration
			var done bool
			batch, wait, done = s.TakeDue(now, batch)
			if done && len(batch) == 0 {
				w.p.symbolsInUse.RUnlock()
				return
			}
			switch {
			case done || len(batch) == cap(batch):
				lookAt = 0 // draining, or more may be due
			case wait > 0:
				lookAt = now + int64(wait)
			default:
				lookAt = never // empty: queued says when not
			}
		}
		if len(batch) > 0 {
			w.analyse(batch)
			w.p.symbolsInUse.RUnlock()
			continue
		}
		w.p.symbolsInUse.RUnlock()
		if lookAt != never {
			timer.Reset(time.Duration(lookAt - now))
		}
		select {
		case <-queued:
			lookAt = 0
		case <-handed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// drain analyses everything left in a closed shard, in the caller's goroutine.
func (w *worker) drain() {
	for {
		w.p.symbolsInUse.RLock()
		batch := w.shard.TakeHanded(w.take[:0])
		batch, _, done := w.shard.TakeDue(w.p.buffer.Now(), batch)
		w.analyse(batch)
		w.p.symbolsInUse.RUnlock()
		if done && len(batch) == 0 {
			return
		}
	}
}

// tally sums what analysing a batch of traces observed, so that telemetry
// is recorded once per batch rather than once per trace.
type tally struct {
	traces, panics, dropped int64
	timed                   int // traces whose analysis was timed (durationSampled)
	verdicts                [4]int64
	held                    int64    // verdicts held to be judged again
	evicted                 [4]int64 // held verdicts pushed out by max_held, by final verdict
	corrected               [4]int64 // of evicted, those whose final verdict corrects the provisional one
	link                    dependencyanalysis.LinkStats
	durations               [maxTake]float64
	sampling                [2]int64 // whole traces by dependencyanalysis.SamplingMethod
	countedFailed           int64
	incomplete              [4]int64 // by dependencyanalysis.Incomplete
}

func (w *worker) analyse(batch []*buffer.Entry) {
	if len(batch) == 0 {
		return
	}
	var t tally
	for _, e := range batch {
		if w.p.abort.Load() {
			t.dropped += int64(e.Len())
		} else if ms, timed, ok := w.analyseTrace(e, &t); ok {
			if timed {
				t.durations[t.timed] = ms
				t.timed++
			}
			t.traces++
		}
	}
	w.shard.Recycle(batch)
	clear(batch)
	ctx := context.Background()
	tb := w.p.telemetry
	for m, n := range t.sampling {
		if n > 0 {
			tb.ProcessorErrorownershipTracesSampling.Add(ctx, n, w.p.samplingAttrs[m]...)
		}
	}
	if t.countedFailed > 0 {
		tb.ProcessorErrorownershipTracesCountedFailed.Add(ctx, t.countedFailed)
	}
	for r, n := range t.incomplete {
		if n > 0 {
			tb.ProcessorErrorownershipTracesIncomplete.Add(ctx, n, w.p.incompleteAttrs[r]...)
		}
	}
	for k, n := range t.verdicts {
		if n > 0 {
			tb.ProcessorErrorownershipVerdicts.Add(ctx, n, w.p.verdictAttrs[k]...)
		}
	}
	if t.held > 0 {
		tb.ProcessorErrorownershipVerdictsHeld.Add(ctx, t.held)
	}
	var evicted int64
	for k, n := range t.evicted {
		if n > 0 {
			tb.ProcessorErrorownershipVerdicts.Add(ctx, n, w.p.verdictAttrs[k]...)
			evicted += n
		}
	}
	if evicted > 0 {
		tb.ProcessorErrorownershipVerdictsRejudged.Add(ctx, evicted, w.p.rejudgedEvicted...)
	}
	w.p.countCorrected(ctx, &t.corrected)
	for i, n := range unlinked(&t.link) {
		if n > 0 {
			tb.ProcessorErrorownershipSpansUnlinked.Add(ctx, int64(n), w.p.reasonAttrs[i]...)
		}
	}
	if t.dropped > 0 {
		tb.ProcessorErrorownershipSpansDropped.Add(ctx, t.dropped)
	}
	if t.panics > 0 {
		tb.ProcessorErrorownershipPanicsRecovered.Add(ctx, t.panics)
	}
	// Last, so that once traces_analyzed counts a trace every other
	// figure of its analysis is recorded: tests wait on it before they
	// read the others.
	if t.traces > 0 {
		for _, ms := range t.durations[:t.timed] {
			tb.ProcessorErrorownershipAnalysisDuration.Record(ctx, ms)
		}
		tb.ProcessorErrorownershipTracesAnalyzed.Add(ctx, t.traces)
	}
}

// analyseTrace runs the engine over one trace and reports whether it did,
// and, if it was timed (durationSampled), how long it took in milliseconds. A panic is recovered and counted, and the analyzer
// replaced, since its buffers may be inconsistent.
func (w *worker) analyseTrace(e *buffer.Entry, t *tally) (ms float64, timed, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			t.panics++
			w.an = dependencyanalysis.NewAnalyzer()
			w.p.logger.Error("Recovered from a panic in the error-ownership analysis; the trace was not analysed",
				zap.String("trace_id", e.ID.String()), zap.String("panic", fmt.Sprint(r)), zap.Stack("stack"))
		}
	}()
	timed = durationSampled(e.ID)
	var start time.Time
	if timed {
		start = time.Now()
	}
	tr := w.an.Link(e.ID, e.Spans(&w.spans))
	tr.SetSampling(e.Sampling())
	w.p.callees.Check(tr)
	w.p.edges.Observe(tr)
	modes := w.p.edges.Modes()
	verdicts := w.an.Judge(tr, modes)
	w.add(tr, verdicts, modes, t)
	if tr.Incomplete != dependencyanalysis.IncompleteNone {
		t.incomplete[tr.Incomplete]++
	} else {
		m := tr.Sampling.Method()
		t.sampling[m]++
		if m == dependencyanalysis.SamplingCounted && failedRequest(tr) {
			t.countedFailed++
		}
	}
	if timed {
		ms = float64(time.Since(start)) / float64(time.Millisecond)
	}
	t.link.Add(tr.Link)
	return ms, timed, true
}

// failedRequest reports whether a request of tr failed.
func failedRequest(tr *dependencyanalysis.Trace) bool {
	for i := range tr.Requests {
		if tr.RequestSpan(&tr.Requests[i]).Failed() {
			return true
		}
	}
	return false
}

// durationSampled reports whether the analysis of trace id is timed for
// analysis_duration: one trace in eight, by bits of its ID, which are
// random, so that the histogram's shape is the traces' while a one-span
// trace does not pay for two clock reads and a histogram update, which
// cost as much as its analysis.
func durationSampled(id pcommon.TraceID) bool { return (id[15]^id[7])&7 == 0 }

// add counts the trace and its settled verdicts, and holds the unsettled
// ones to be judged again, counting their first verdict provisionally, so
// that a crash before the final judgement leaves every request counted
// with a verdict; past maxHeld the oldest held is judged for the last
// time, by modes.
func (w *worker) add(tr *dependencyanalysis.Trace, verdicts []dependencyanalysis.Verdict, modes dependencyanalysis.Modes, t *tally) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var now time.Time // when held requests were judged first; read only if one is
	w.settled = w.settled[:0]
	for i := range verdicts {
		v := &verdicts[i]
		if !v.Unsettled || w.p.maxHeld == 0 {
			w.settled = append(w.settled, *v)
			t.verdicts[v.Kind]++
			w.p.countedRequest(tr, v)
			continue
		}
		if len(w.held) >= w.p.maxHeld {
			oldest := &w.held[0]
			final, _ := oldest.Rejudge(modes)
			if w.statsOf(oldest.gen).Correct(&oldest.Held, &final) {
				t.corrected[final.Kind]++
			}
			w.p.countedHeld(&oldest.Held, &final)
			t.evicted[final.Kind]++
			w.held[0] = heldRequest{}
			w.held = w.held[1:]
		}
		if now.IsZero() {
			now = time.Now()
		}
		w.held = append(w.held, heldRequest{Held: dependencyanalysis.Hold(tr, v, now), gen: w.gen})
		w.stats.AddProvisional(&w.held[len(w.held)-1].Held)
		t.held++
	}
	w.stats.Add(tr, w.settled)
}

// swap hands the worker's statistics to the flusher and gives it the empty
// spare to fill meanwhile.
func (w *worker) swap() *dependencyanalysis.Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	full := w.stats
	w.stats, w.spare = w.spare, nil
	w.gen++
	return full
}

// giveBack returns flushed statistics to the worker as its next spare.
func (w *worker) giveBack(s *dependencyanalysis.Stats) {
	s.Reset()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spare = s
}
