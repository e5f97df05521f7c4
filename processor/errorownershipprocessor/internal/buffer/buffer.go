// SPDX-License-Identifier: Apache-2.0

// Package buffer holds the errorownership processor's span records by trace
// ID until their trace is due for analysis (Buffer).
package buffer

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/dependencyanalysis"
)

// The buffer holds span records by trace ID until their trace has gone
// decision_wait without a new span. It is split into shards by trace ID, each
// drained by one worker, so that inserting contends only on one shard's lock
// and never waits for an analysis.
//
// Each shard keeps its traces in a FIFO by first arrival. A worker looks only
// at the head: if it is due it is taken; if it got spans since it was queued
// it goes back to the tail; otherwise the worker sleeps until the head is due.
// A trace that got late spans can so be analysed up to decision_wait after it
// was due, never before.
//
// A shard's share of max_traces and max_spans is split: seven eighths for
// traces waiting, one eighth for traces taken early because the buffer was
// full and not yet picked up by the worker. Inserting into a full shard moves
// its oldest trace to that hand-over queue, which the worker empties under a
// lock of its own; only when the worker is so far behind that the hand-over
// queue is full are spans dropped (counted), since the alternatives are to
// block the pipeline or to grow without bound.

// maxSegments is how many batches' worth of records an entry keeps apart
// before it copies them into one allocation: six, so that a trace whose
// services each export their own spans is mostly never copied.
const maxSegments = 6

// Entry is one trace's records in the buffer.
type Entry struct {
	// ID is the trace's ID. Its hash is not kept, but computed again
	// when the entry leaves: 8 bytes would put the entry in the next size
	// class, 16 bytes more a trace.
	ID pcommon.TraceID
	// The segments hold the records in arrival order, a segment for each
	// batch the trace came in: each is an exactly sized allocation of its
	// own, so a trace that comes in several batches is never copied to
	// grow, and no trace keeps another's records alive. Segment i is
	// first[i], the first of its lens[i] records: a slice header would
	// take twice the room, and six of them a larger size class.
	first [maxSegments]*dependencyanalysis.Span
	lens  [maxSegments]int32
	nsegs uint8
	// sampling is the strictest sampling class of the trace's spans; it
	// fits in the padding after nsegs.
	sampling dependencyanalysis.SamplingClass
	n        int32 // records in all segments
	// last is when spans last arrived, queued the value of last when the
	// entry was put at the queue's tail; both in nanoseconds since the
	// buffer's epoch.
	last, queued int64
}

// Sampling returns the trace's sampling class, the strictest of its
// spans' (dependencyanalysis.CombineSampling).
func (e *Entry) Sampling() dependencyanalysis.SamplingClass { return e.sampling }

// Len reports how many records the trace has.
func (e *Entry) Len() int { return int(e.n) }

// seg returns segment i.
func (e *Entry) seg(i int) []dependencyanalysis.Span {
	return unsafe.Slice(e.first[i], e.lens[i]) //nolint:gosec // G103: first[i] points at an allocation of at least lens[i] records (attach)
}

// Spans returns the trace's records in one slice: its only segment, or
// its segments copied into *scratch, which grows as needed.
func (e *Entry) Spans(scratch *[]dependencyanalysis.Span) []dependencyanalysis.Span {
	if e.nsegs == 1 {
		return e.seg(0)
	}
	all := (*scratch)[:0]
	for i := range int(e.nsegs) {
		all = append(all, e.seg(i)...)
	}
	*scratch = all
	return all
}

// attach adds a batch's segment, which is not empty, copying every
// segment into one when there is no room for another.
func (e *Entry) attach(seg []dependencyanalysis.Span) {
	e.n += int32(len(seg))
	if int(e.nsegs) == maxSegments {
		all := make([]dependencyanalysis.Span, 0, e.n)
		for i := range maxSegments {
			all = append(all, e.seg(i)...)
			e.first[i] = nil
		}
		seg, e.nsegs = append(all, seg...), 0
	}
	e.first[e.nsegs], e.lens[e.nsegs] = &seg[0], int32(len(seg))
	e.nsegs++
}

// Shard is one part of the buffer, drained by one worker. Every trace in
// traces is in queue once.
type Shard struct {
	mu           sync.Mutex
	traces       table
	queue        fifo[*Entry]
	waitingSpans int
	// recent remembers traces that left the buffer and why, so that their
	// late spans are counted as late, apart from those of evicted traces.
	recent recentFilter
	closed bool
	// free holds entries the worker has analysed (Recycle), for new
	// traces to take instead of allocating: a trace's entry is otherwise
	// one allocation and one object for the garbage collector to sweep,
	// which a one-span trace pays for one span.
	free []*Entry

	// The hand-over queue has its own lock, held only to push or pop, so
	// that a worker picking up evicted traces never waits for an insert
	// of a big batch (which holds mu): under a flood of new traces that
	// wait starved the worker. Lock order: mu, then handMu.
	handMu sync.Mutex
	handed fifo[*Entry]
	// handedTraces and handedSpans mirror handed for readers without handMu.
	handedTraces, handedSpans atomic.Int64

	wait                        int64 // decision_wait in nanoseconds
	maxWaitTraces, maxWaitSpans int
	maxHandTraces, maxHandSpans int
	peakTraces, peakSpans       int // high-water marks, for tests; under mu
	queueSignal, handSignal     chan struct{}
}

func newShard(maxTraces, maxSpans int, wait time.Duration) *Shard {
	handTraces, handSpans := maxTraces/8, maxSpans/8
	return &Shard{
		recent:        recentFilter{traces: maxTraces},
		wait:          int64(wait),
		maxWaitTraces: maxTraces - handTraces,
		maxWaitSpans:  maxSpans - handSpans,
		maxHandTraces: handTraces,
		maxHandSpans:  handSpans,
		queueSignal:   make(chan struct{}, 1),
		handSignal:    make(chan struct{}, 1),
	}
}

// maxInsert bounds how many traces a batch inserts into a shard under one
// hold of its lock.
const maxInsert = 64

// Counts are what inserting a batch observed.
type Counts struct {
	// Late counts spans whose trace had been analysed once it was due;
	// LateEvicted those whose trace had been taken early because the
	// buffer was full.
	Late, LateEvicted int64
	// Dropped counts spans left out because the buffer was full and its
	// worker behind; Evicted traces taken early.
	Dropped, Evicted int64
}

// Scratch is Add's working space, which the caller keeps between batches.
type Scratch struct {
	runs   []run
	groups []group
	sorted []group // groups by shard
	slots  []int32 // the batch's traces by hash: indexes into groups, or -1
	counts []int   // groups per shard, then where each shard's begin in sorted
}

// run is a run of the batch (dependencyanalysis.Run) with its trace's
// hash and its spans' bounds.
type run struct {
	hash   uint64
	lo, hi int32
	group  int32 // the trace's, in Scratch.groups
}

// group is one trace's records of a batch, gathered into their segment.
type group struct {
	id    pcommon.TraceID
	hash  uint64
	shard int32
	n     int32 // records
	seg   []dependencyanalysis.Span
	// sampling is the strictest sampling class of the records.
	sampling dependencyanalysis.SamplingClass
}

// signal wakes the worker without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// insert adds g's segment, arriving at now. The caller holds mu. It
// reports whether the queue was empty, in which case the worker may sleep
// without a deadline and must be told.
func (s *Shard) insert(g *group, now int64, c *Counts) (wasEmpty bool) {
	seg := g.seg
	n := len(seg)
	e := s.traces.get(g.hash, g.id)
	if e == nil {
		switch s.recent.left(g.hash) {
		case leftDue:
			c.Late += int64(n)
		case leftEvicted:
			c.LateEvicted += int64(n)
		}
		if n > s.maxWaitSpans {
			c.Dropped += int64(n - s.maxWaitSpans)
			n = s.maxWaitSpans
		}
		if n == 0 || s.maxWaitTraces == 0 {
			c.Dropped += int64(n)
			return false
		}
		s.makeRoom(1, n, nil, c)
		wasEmpty = s.queue.len() == 0
		e = s.newEntry(g.id, now)
		s.traces.put(g.hash, e)
		s.queue.push(e)
	} else {
		if room := s.maxWaitSpans - int(e.n); n > room {
			c.Dropped += int64(n - room)
			n = room
		}
		if n == 0 {
			return false
		}
		s.makeRoom(0, n, e, c)
	}
	e.attach(seg[:n:n])
	if g.sampling != e.sampling {
		e.sampling = dependencyanalysis.CombineSampling(e.sampling, g.sampling)
	}
	s.waitingSpans += n
	e.last = now
	s.peakTraces = max(s.peakTraces, s.queue.len()+int(s.handedTraces.Load()))
	s.peakSpans = max(s.peakSpans, s.waitingSpans+int(s.handedSpans.Load()))
	return wasEmpty
}

// newEntry returns an empty entry for trace id, queued at now: one the
// worker recycled if there is one. The caller holds mu.
func (s *Shard) newEntry(id pcommon.TraceID, now int64) *Entry {
	n := len(s.free)
	if n == 0 {
		return &Entry{ID: id, queued: now}
	}
	e := s.free[n-1]
	s.free[n-1] = nil
	s.free = s.free[:n-1]
	e.ID, e.queued = id, now
	return e
}

// maxFree bounds the entries a shard keeps for reuse: two takes' worth
// (a worker takes at most 64 traces at once), 28 KiB.
const maxFree = 256

// Recycle takes back entries the caller took from the shard (TakeDue,
// TakeHanded) and is done with, for new traces. The caller must not use
// them afterwards. Their records are let go, not reused: a segment may
// still be read through the analysis it was handed to.
func (s *Shard) Recycle(done []*Entry) {
	if len(done) == 0 {
		return
	}
	for _, e := range done {
		*e = Entry{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free = append(s.free, done[:min(len(done), maxFree-len(s.free))]...)
}

// makeRoom takes the oldest traces early until one more trace (needTraces)
// with needSpans more spans fits. keep, which is getting the spans, is not
// taken: it goes to the tail, where its new spans put it anyway.
func (s *Shard) makeRoom(needTraces, needSpans int, keep *Entry, c *Counts) {
	for s.queue.len() > 0 && (s.queue.len()+needTraces > s.maxWaitTraces || s.waitingSpans+needSpans > s.maxWaitSpans) {
		e := s.queue.pop()
		if e == keep {
			e.queued = e.last
			s.queue.push(e)
			if s.queue.len() == 1 {
				break
			}
			continue
		}
		s.leave(e, leftEvicted)
		c.Evicted++
		s.handOver(e, c)
	}
}

// leave removes e, just popped from the queue, from the waiting traces,
// remembering why it left.
func (s *Shard) leave(e *Entry, why uint64) {
	h := traceHash(e.ID)
	s.traces.remove(h, e)
	s.recent.add(h, why)
	s.waitingSpans -= int(e.n)
}

// handOver queues e for the worker, dropping the oldest traces handed over
// before it when the worker has not kept up.
func (s *Shard) handOver(e *Entry, c *Counts) {
	n := int(e.n)
	if s.maxHandTraces == 0 || n > s.maxHandSpans {
		c.Dropped += int64(n)
		return
	}
	s.handMu.Lock()
	defer s.handMu.Unlock()
	for s.handed.len() >= s.maxHandTraces || int(s.handedSpans.Load())+n > s.maxHandSpans {
		old := s.handed.pop()
		s.handedTraces.Add(-1)
		s.handedSpans.Add(-int64(old.n))
		c.Dropped += int64(old.n)
	}
	s.handed.push(e)
	s.handedTraces.Add(1)
	s.handedSpans.Add(int64(n))
	if s.handed.len() == 1 {
		// Wake the worker now, not after the batch: it takes handed
		// traces under handMu alone, so it works alongside the insert.
		signal(s.handSignal)
	}
}

// TakeHanded moves traces handed over to out, up to its capacity.
func (s *Shard) TakeHanded(out []*Entry) []*Entry {
	if s.handedTraces.Load() == 0 {
		return out
	}
	s.handMu.Lock()
	defer s.handMu.Unlock()
	for len(out) < cap(out) && s.handed.len() > 0 {
		e := s.handed.pop()
		s.handedTraces.Add(-1)
		s.handedSpans.Add(-int64(e.n))
		out = append(out, e)
	}
	return out
}

// TakeDue moves traces due at now to out, up to its capacity; once the
// shard is closed, every waiting trace. It returns how long until the
// queue's head is due (0: nothing is waiting, or out is full) and whether
// the shard is closed and empty.
func (s *Shard) TakeDue(now int64, out []*Entry) (_ []*Entry, wait time.Duration, done bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(out) < cap(out) && s.queue.len() > 0 {
		e := s.queue.peek()
		if due := e.last + s.wait; due > now && !s.closed {
			if e.last != e.queued {
				// It got spans since it was queued: behind the traces
				// that arrived in the meantime is where it belongs.
				s.queue.pop()
				e.queued = e.last
				s.queue.push(e)
				continue
			}
			wait = time.Duration(due - now)
			break
		}
		s.queue.pop()
		s.leave(e, leftDue)
		out = append(out, e)
	}
	// Nothing is handed over once closed, so this is final.
	return out, wait, s.closed && s.queue.len() == 0 && s.handedTraces.Load() == 0
}

// Close stops the shard accepting spans; its worker then drains it.
func (s *Shard) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	signal(s.queueSignal)
}

// Compact releases the memory of a trace table that a burst of traffic
// grew and that is now mostly empty. Call it now and then (the processor
// does at each flush).
func (s *Shard) Compact() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.traces.compact()
}

// Occupancy reports the traces and spans the shard holds.
func (s *Shard) Occupancy() (traces, spans int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue.len() + int(s.handedTraces.Load()), s.waitingSpans + int(s.handedSpans.Load())
}

// Buffer is the set of shards.
type Buffer struct {
	shards []*Shard
	epoch  time.Time
	clock  func() int64 // SetClock's; nil is monotonic time since epoch
}

// New splits maxTraces and maxSpans evenly over shards shards, traces due
// wait after their last span.
func New(shards, maxTraces, maxSpans int, wait time.Duration) *Buffer {
	shards = max(1, min(shards, maxTraces, maxSpans))
	b := &Buffer{shards: make([]*Shard, shards), epoch: time.Now()}
	for i := range b.shards {
		b.shards[i] = newShard(share(maxTraces, shards, i), share(maxSpans, shards, i), wait)
	}
	return b
}

// share is shard i's part of total split n ways; the parts sum to total.
func share(total, n, i int) int {
	part := total / n
	if i < total%n {
		part++
	}
	return part
}

// Now is the buffer's clock: monotonic nanoseconds since its epoch.
func (b *Buffer) Now() int64 {
	if b.clock != nil {
		return b.clock()
	}
	return int64(time.Since(b.epoch))
}

// SetClock makes now the buffer's clock, for tests that move time by hand;
// after moving it they call Wake, so that the workers look again. Call it
// before any span is added.
func (b *Buffer) SetClock(now func() int64) { b.clock = now }

// Wake makes every shard's worker look at its queue again.
func (b *Buffer) Wake() {
	for _, s := range b.shards {
		signal(s.queueSignal)
	}
}

// Shards returns the shards, one per worker.
func (b *Buffer) Shards() []*Shard { return b.shards }

// Signals returns what the shard's worker waits on when it has nothing to
// take: queued says the queue changed (a trace arrived in an empty shard,
// or the shard closed), handed that a trace was handed over.
func (s *Shard) Signals() (queued, handed <-chan struct{}) { return s.queueSignal, s.handSignal }

// Capacity reports the shard's share of max_traces and max_spans, waiting
// and handed over together.
func (s *Shard) Capacity() (traces, spans int) {
	return s.maxWaitTraces + s.maxHandTraces, s.maxWaitSpans + s.maxHandSpans
}

// Peak reports the most traces and spans the shard held at once.
func (s *Shard) Peak() (traces, spans int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peakTraces, s.peakSpans
}

// traceHash mixes a trace ID into 64 bits for picking its shard and its
// slot in the recent filter. Trace IDs are random by specification, but
// tests and broken SDKs make up sequential ones, so both halves are mixed.
func traceHash(id pcommon.TraceID) uint64 {
	h := binary.LittleEndian.Uint64(id[:8])*0x9E3779B97F4A7C15 ^ binary.LittleEndian.Uint64(id[8:])
	// SplitMix64's finalizer, whose every output bit depends on every
	// input bit: the table's home slot, the shard and the filter's slot
	// each take different bits.
	h ^= h >> 30
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 27
	h *= 0x94D049BB133111EB
	h ^= h >> 31
	return h
}

// Add inserts a batch's spans arriving at now, taking each shard's lock
// once per maxInsert traces. It gathers each trace's spans of the batch,
// whatever their order, into one exactly sized segment before it takes any
// lock: the batch's runs find their trace in a table of the batch's
// traces, and the traces are then put in order of shard by counting, so
// that grouping costs a probe a run, not a sort.
func (b *Buffer) Add(batch *dependencyanalysis.Batch, sc *Scratch, now int64, c *Counts) {
	runs := sc.runs[:0]
	lo := int32(0)
	for i := range batch.Runs {
		r := &batch.Runs[i]
		runs = append(runs, run{hash: traceHash(r.TraceID), lo: lo, hi: r.End})
		lo = r.End
	}
	groups := sc.group(runs, batch.Runs, len(b.shards))
	for i := range groups {
		groups[i].seg = make([]dependencyanalysis.Span, 0, groups[i].n)
	}
	for i, r := range runs { // in arrival order, which a trace's segment keeps
		g := &groups[r.group]
		g.seg = append(g.seg, batch.Spans[r.lo:r.hi]...)
		if c := batch.Runs[i].Sampling; c != g.sampling {
			g.sampling = dependencyanalysis.CombineSampling(g.sampling, c)
		}
	}
	sorted := groups // one shard: already in order
	if len(b.shards) > 1 {
		sorted = sc.byShard(groups, len(b.shards))
	}
	for lo := 0; lo < len(sorted); {
		lo = b.shards[sorted[lo].shard].insertGroups(sorted, lo, now, c)
	}
	clear(groups) // the segments belong to the entries now
	if len(b.shards) > 1 {
		clear(sorted)
		sc.sorted = sorted[:0]
	}
	sc.runs, sc.groups = runs, groups[:0]
}

// group finds the trace of each run in the batch's table of traces, adding
// the traces it has not met, and returns the traces with their records
// counted; each run learns its trace's index.
func (sc *Scratch) group(runs []run, batch []dependencyanalysis.Run, shards int) []group {
	size := 16
	for size < 2*len(runs) {
		size *= 2
	}
	if cap(sc.slots) < size {
		sc.slots = make([]int32, size)
	}
	slots := sc.slots[:size]
	for i := range slots {
		slots[i] = -1
	}
	mask := uint64(size - 1)
	groups := sc.groups[:0]
	for ri := range runs {
		r := &runs[ri]
		id := batch[ri].TraceID
		for i := r.hash & mask; ; i = (i + 1) & mask {
			gi := slots[i]
			if gi < 0 {
				gi = int32(len(groups))
				slots[i] = gi
				groups = append(groups, group{id: id, hash: r.hash, shard: int32(r.hash % uint64(shards))})
			} else if g := &groups[gi]; g.hash != r.hash || g.id != id {
				continue
			}
			r.group = gi
			groups[gi].n += r.hi - r.lo
			break
		}
	}
	return groups
}

// byShard returns groups in order of shard, each shard's in arrival order,
// in sc.sorted.
func (sc *Scratch) byShard(groups []group, shards int) []group {
	counts := slices.Grow(sc.counts[:0], shards+1)[:shards+1]
	clear(counts)
	for i := range groups {
		counts[groups[i].shard+1]++
	}
	for s := 1; s <= shards; s++ {
		counts[s] += counts[s-1]
	}
	sorted := slices.Grow(sc.sorted[:0], len(groups))[:len(groups)]
	for _, g := range groups {
		sorted[counts[g.shard]] = g
		counts[g.shard]++
	}
	sc.counts = counts
	return sorted
}

// insertGroups inserts the traces of groups from lo on that belong to s,
// at most maxInsert of them, and returns where it stopped. The lock is let
// go after maxInsert traces so that a big batch of new traces does not
// keep the worker from the traces it pushes out, and on a panic.
func (s *Shard) insertGroups(groups []group, lo int, now int64, c *Counts) int {
	shard := groups[lo].shard
	wake := false
	defer func() {
		if wake {
			signal(s.queueSignal)
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	for end := min(lo+maxInsert, len(groups)); lo < end && groups[lo].shard == shard; lo++ {
		if !s.closed && s.insert(&groups[lo], now, c) {
			wake = true
		}
	}
	return lo
}

// Occupancy reports the traces and spans the buffer holds.
func (b *Buffer) Occupancy() (traces, spans int) {
	for _, s := range b.shards {
		t, n := s.Occupancy()
		traces += t
		spans += n
	}
	return traces, spans
}

// fifo is a growable ring buffer.
type fifo[T any] struct {
	buf     []T // length 0 or a power of two
	head, n int
}

func (q *fifo[T]) len() int { return q.n }

func (q *fifo[T]) push(v T) {
	if q.n == len(q.buf) {
		grown := make([]T, max(16, 2*len(q.buf)))
		for i := range q.n {
			grown[i] = q.buf[(q.head+i)&(len(q.buf)-1)]
		}
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = v
	q.n++
}

func (q *fifo[T]) peek() T { return q.buf[q.head] }

func (q *fifo[T]) pop() T {
	v := q.buf[q.head]
	var zero T
	q.buf[q.head] = zero // let the garbage collector have it
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	return v
}

// recentFilter remembers, lossily, the traces that left a shard and why:
// a direct-mapped table of 32-bit fingerprints of trace hashes, two slots
// per trace the shard holds. A newer trace may take an older one's slot
// early, so a few late spans go uncounted; a span is counted late by
// mistake only when two traces share a slot and a fingerprint (30 bits:
// two hold why the trace left), about once in a billion new traces. It
// costs one memory access and no allocation per trace, where a map with
// deletes cost more than the rest of inserting; 32-bit slots halve the
// cache misses of 64-bit ones.
type recentFilter struct {
	traces int
	slots  []uint32
}

// Why a trace left the buffer, as recentFilter.left reports it.
const (
	leftNot     uint64 = 0 // not seen leaving (or forgotten)
	leftDue     uint64 = 1 // analysed once decision_wait passed, or at shutdown
	leftEvicted uint64 = 2 // taken early because the buffer was full
)

func (r *recentFilter) index(h uint64) uint64 { return (h >> 17) & uint64(len(r.slots)-1) }

// left reports why the trace with hash h left, if it did.
func (r *recentFilter) left(h uint64) uint64 {
	if len(r.slots) == 0 {
		return leftNot
	}
	v := r.slots[r.index(h)]
	if v == 0 || v&^3 != fingerprint(h) {
		return leftNot
	}
	return uint64(v & 3)
}

// fingerprint is what a slot keeps of trace hash h: its high bits, which
// the slot's index (bits 17 and up) overlaps only in a table of more than
// 2^15 slots, and then by at most 5 bits.
func fingerprint(h uint64) uint32 { return uint32(h>>32) &^ 3 }

// maxRecentSlots caps the filter at 4 MiB a shard, whatever max_traces says.
const maxRecentSlots = 1 << 20

func (r *recentFilter) add(h, why uint64) {
	if r.slots == nil {
		r.slots = make([]uint32, min(1<<bits.Len(uint(max(2*r.traces-1, 1))), maxRecentSlots))
	}
	r.slots[r.index(h)] = fingerprint(h) | uint32(why) // never 0, the empty slot: why is
}

// Symbols calls keep for every symbol of the records the shard holds,
// waiting or handed over (Symbols.Sweep).
func (s *Shard) Symbols(keep func(dependencyanalysis.Symbol)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handMu.Lock()
	defer s.handMu.Unlock()
	for i := range s.queue.n {
		entrySymbols(s.queue.buf[(s.queue.head+i)&(len(s.queue.buf)-1)], keep)
	}
	for i := range s.handed.n {
		entrySymbols(s.handed.buf[(s.handed.head+i)&(len(s.handed.buf)-1)], keep)
	}
}

func entrySymbols(e *Entry, keep func(dependencyanalysis.Symbol)) {
	for i := range int(e.nsegs) {
		spanSymbols(e.seg(i), keep)
	}
}

func spanSymbols(spans []dependencyanalysis.Span, keep func(dependencyanalysis.Symbol)) {
	for i := range spans {
		r := &spans[i]
		keep(r.Service)
		keep(r.Operation)
		keep(r.PeerService)
		keep(r.PeerOperation)
		keep(r.PeerAddress)
	}
}
