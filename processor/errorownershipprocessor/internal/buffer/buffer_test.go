// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/dependencyanalysis"
)

// traceID makes trace n's ID.
func traceID(n uint64) pcommon.TraceID {
	var id pcommon.TraceID
	binary.BigEndian.PutUint64(id[8:], n)
	id[0] = 1
	return id
}

const testWait = 100 // decision_wait in the shard tests, in nanoseconds of buffer time

// records returns n records of trace t.
func records(t uint64, n int) []dependencyanalysis.Record {
	out := make([]dependencyanalysis.Record, n)
	for i := range out {
		out[i].TraceID = traceID(t)
		out[i].SpanID = pcommon.SpanID{7: byte(i + 1)}
	}
	return out
}

// batchOf makes a batch of recs, as the extractor would read them.
func batchOf(recs []dependencyanalysis.Record) *dependencyanalysis.Batch {
	var b dependencyanalysis.Batch
	for _, r := range recs {
		b.Append(r)
	}
	return &b
}

// put inserts n records of trace t into s at now, as Buffer.Add does.
func put(s *Shard, t uint64, n int, now int64, c *Counts) {
	g := group{id: traceID(t), hash: traceHash(traceID(t)), seg: make([]dependencyanalysis.Span, n)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.insert(&g, now, c)
}

// ids lists the traces of entries by their number.
func ids(entries []*Entry) []uint64 {
	var out []uint64
	for _, e := range entries {
		out = append(out, uint64(e.ID[15])|uint64(e.ID[14])<<8)
	}
	return out
}

func takeAll(s *Shard, now int64) []*Entry {
	out := s.TakeHanded(make([]*Entry, 0, 64))
	out, _, _ = s.TakeDue(now, out)
	return out
}

func TestShardDecisionWait(t *testing.T) {
	tests := []struct {
		name string
		// puts are (trace, arrival) pairs.
		puts [][2]int64
		at   int64
		want []uint64
		// wait is how long until the head is due, after taking.
		wait time.Duration
	}{
		{name: "nothing due yet", puts: [][2]int64{{1, 0}}, at: testWait - 1, wait: 1},
		{name: "due after decision_wait", puts: [][2]int64{{1, 0}, {2, 50}}, at: testWait, want: []uint64{1}, wait: 50},
		{name: "every due trace, in arrival order", puts: [][2]int64{{1, 0}, {2, 10}, {3, 20}}, at: 200, want: []uint64{1, 2, 3}},
		{
			name: "late spans put a trace behind later ones",
			puts: [][2]int64{{1, 0}, {2, 10}, {1, 60}},
			at:   testWait + 10, want: []uint64{2}, wait: 50,
		},
		{
			name: "and it is taken once its own wait is over",
			puts: [][2]int64{{1, 0}, {2, 10}, {1, 60}},
			at:   testWait + 60, want: []uint64{1, 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newShard(100, 1000, testWait)
			var c Counts
			for _, p := range tc.puts {
				put(s, uint64(p[0]), 2, p[1], &c)
			}
			got, wait, done := s.TakeDue(tc.at, make([]*Entry, 0, 64))
			assert.Equal(t, tc.want, ids(got))
			assert.Equal(t, tc.wait, wait)
			assert.False(t, done)
			assert.Equal(t, Counts{}, c)
		})
	}
}

func TestShardBounds(t *testing.T) {
	tests := []struct {
		name                string
		maxTraces, maxSpans int
		puts                [][2]int // (trace, spans), in arrival order
		want                Counts
		// left are the traces still waiting, handed those taken early.
		left, handed []uint64
	}{
		{
			name:      "room for all",
			maxTraces: 16, maxSpans: 160,
			puts: [][2]int{{1, 3}, {2, 3}},
			left: []uint64{1, 2},
		},
		{
			name: "max_traces: the oldest is taken early",
			// 7 may wait, 1 may be handed over.
			maxTraces: 8, maxSpans: 1000,
			puts: [][2]int{{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}, {8, 1}},
			want: Counts{Evicted: 1},
			left: []uint64{2, 3, 4, 5, 6, 7, 8}, handed: []uint64{1},
		},
		{
			name:      "the worker is behind: the oldest handed over is dropped",
			maxTraces: 8, maxSpans: 1000,
			puts: [][2]int{{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}, {8, 1}, {9, 2}},
			want: Counts{Evicted: 2, Dropped: 1},
			left: []uint64{3, 4, 5, 6, 7, 8, 9}, handed: []uint64{2},
		},
		{
			name: "max_spans: as many are taken as make room",
			// 14 spans may wait, 2 may be handed over.
			maxTraces: 100, maxSpans: 16,
			puts: [][2]int{{1, 1}, {2, 1}, {3, 6}, {4, 6}, {5, 2}},
			want: Counts{Evicted: 2},
			left: []uint64{3, 4, 5}, handed: []uint64{1, 2},
		},
		{
			name:      "a trace bigger than the shard keeps what fits",
			maxTraces: 100, maxSpans: 16,
			puts: [][2]int{{1, 20}},
			want: Counts{Dropped: 6},
			left: []uint64{1},
		},
		{
			name: "a trace growing past the bound stays, others go",
			// 35 spans may wait, 5 may be handed over.
			maxTraces: 100, maxSpans: 40,
			puts: [][2]int{{1, 4}, {2, 4}, {1, 30}},
			want: Counts{Evicted: 1},
			left: []uint64{1}, handed: []uint64{2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newShard(tc.maxTraces, tc.maxSpans, testWait)
			var c Counts
			for i, p := range tc.puts {
				put(s, uint64(p[0]), p[1], int64(i), &c)
			}
			assert.Equal(t, tc.want, c)
			traces, spans := s.Occupancy()
			assert.LessOrEqual(t, traces, tc.maxTraces)
			assert.LessOrEqual(t, spans, tc.maxSpans)
			assert.LessOrEqual(t, s.peakTraces, tc.maxTraces)
			assert.LessOrEqual(t, s.peakSpans, tc.maxSpans)

			assert.Equal(t, tc.handed, ids(s.TakeHanded(make([]*Entry, 0, 64))))
			s.Close()
			left, _, done := s.TakeDue(0, make([]*Entry, 0, 64))
			assert.Equal(t, tc.left, ids(left))
			assert.True(t, done)
		})
	}
}

func TestShardLateSpans(t *testing.T) {
	s := newShard(100, 1000, testWait)
	var c Counts
	put(s, 1, 3, 0, &c)
	require.Equal(t, []uint64{1}, ids(takeAll(s, testWait)))
	put(s, 1, 2, testWait+1, &c)
	put(s, 2, 1, testWait+1, &c)
	assert.Equal(t, int64(2), c.Late, "spans of an analysed trace are late")
	assert.Zero(t, c.LateEvicted)
	assert.Equal(t, []uint64{1, 2}, ids(takeAll(s, 3*testWait)), "and make a new Entry")
}

func TestShardLateSpansOfEvictedTraces(t *testing.T) {
	// Room for two traces waiting: the third pushes the first out early.
	s := newShard(2, 1000, time.Hour)
	s.maxWaitTraces, s.maxHandTraces = 2, 8
	var c Counts
	put(s, 1, 1, 0, &c)
	put(s, 2, 1, 0, &c)
	put(s, 3, 1, 0, &c)
	require.Equal(t, int64(1), c.Evicted)
	put(s, 1, 4, 1, &c)
	assert.Equal(t, int64(4), c.LateEvicted, "spans of a trace evicted early are not decision_wait's fault")
	assert.Zero(t, c.Late)
}

func TestShardClosed(t *testing.T) {
	b := New(1, 100, 1000, time.Hour)
	s := b.shards[0]
	var c Counts
	b.Add(batchOf(records(1, 2)), &Scratch{}, 0, &c)
	s.Close()
	b.Add(batchOf(records(2, 2)), &Scratch{}, 0, &c)
	got, wait, done := s.TakeDue(0, make([]*Entry, 0, 64))
	assert.Equal(t, []uint64{1}, ids(got), "closed: everything is due, nothing is added")
	assert.Zero(t, wait)
	assert.True(t, done)
}

func TestBufferAddGroupsTraces(t *testing.T) {
	b := New(3, 100, 1000, time.Hour)
	// Traces interleaved as several services' batches interleave them,
	// in three batches.
	var sc Scratch
	var c Counts
	for range 3 {
		var batch []dependencyanalysis.Record
		for range 2 {
			for tr := uint64(1); tr <= 5; tr++ {
				batch = append(batch, records(tr, 1)...)
			}
		}
		b.Add(batchOf(batch), &sc, 0, &c)
	}
	traces, n := b.Occupancy()
	assert.Equal(t, 5, traces)
	assert.Equal(t, 30, n)
	for _, s := range b.shards {
		for i := range s.queue.n {
			e := s.queue.buf[(s.queue.head+i)&(len(s.queue.buf)-1)]
			assert.Equal(t, 6, e.Len())
			require.EqualValues(t, 3, e.nsegs, "a segment a batch")
			for i := range int(e.nsegs) {
				assert.Len(t, e.seg(i), 2, "the batch's records of the trace")
			}
			var scratch []dependencyanalysis.Span
			assert.Len(t, e.Spans(&scratch), 6)
			assert.Equal(t, s, b.shards[traceHash(e.ID)%3])
		}
	}
}

// TestBufferAddKeepsArrivalOrder: many traces interleaved in one batch,
// enough that they meet in the batch's table of traces, each end up in one
// segment with their spans in the order they arrived.
func TestBufferAddKeepsArrivalOrder(t *testing.T) {
	for _, shards := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
			b := New(shards, 10_000, 100_000, time.Hour)
			var batch []dependencyanalysis.Record
			const traces, rounds = 300, 4
			for round := range rounds {
				for tr := uint64(1); tr <= traces; tr++ {
					r := records(tr, 1)[0]
					r.SpanID = pcommon.SpanID{6: byte(round + 1), 7: byte(tr)}
					batch = append(batch, r)
				}
			}
			var sc Scratch
			var c Counts
			b.Add(batchOf(batch), &sc, 0, &c)
			seen := 0
			for _, s := range b.shards {
				for i := range s.queue.n {
					e := s.queue.buf[(s.queue.head+i)&(len(s.queue.buf)-1)]
					require.EqualValues(t, 1, e.nsegs)
					require.Equal(t, rounds, e.Len())
					for k, sp := range e.seg(0) {
						assert.Equal(t, byte(k+1), sp.SpanID[6], "trace %v keeps its spans in arrival order", e.ID)
					}
					assert.Equal(t, s, b.shards[traceHash(e.ID)%uint64(shards)])
					seen++
				}
			}
			assert.Equal(t, traces, seen)
		})
	}
}

func TestEntryAttachCompacts(t *testing.T) {
	var e Entry
	var want []pcommon.SpanID
	for batch := range 7 {
		seg := make([]dependencyanalysis.Span, batch+1)
		for i := range seg {
			seg[i].SpanID = pcommon.SpanID{6: byte(batch), 7: byte(i)}
			want = append(want, seg[i].SpanID)
		}
		e.attach(seg)
		require.LessOrEqual(t, int(e.nsegs), maxSegments)
	}
	var scratch []dependencyanalysis.Span
	var got []pcommon.SpanID
	for _, s := range e.Spans(&scratch) {
		got = append(got, s.SpanID)
	}
	assert.Equal(t, want, got, "every record, in arrival order")
	assert.Equal(t, len(want), e.Len())
}

func TestTable(t *testing.T) {
	tests := []struct {
		name string
		// hash makes trace i's hash: colliding ones test the probing.
		hash func(i uint64) uint64
	}{
		{"spread hashes", func(i uint64) uint64 { return traceHash(traceID(i)) }},
		{"one home slot", func(uint64) uint64 { return 12345 }},
		{"a few home slots", func(i uint64) uint64 { return i % 5 }},
		{"hashes that wrap around", func(i uint64) uint64 { return ^uint64(0) - i%3 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tab table
			live := map[uint64]*Entry{}
			check := func() {
				t.Helper()
				require.Equal(t, len(live), tab.n)
				for i, e := range live {
					require.Same(t, e, tab.get(tt.hash(i), traceID(i)), "trace %d", i)
				}
			}
			// Churn as the buffer does: traces arrive, the oldest leave.
			next, oldest := uint64(1), uint64(1)
			for round := range 60 {
				for range round%5 + 3 {
					e := &Entry{ID: traceID(next)}
					require.Nil(t, tab.get(tt.hash(next), e.ID))
					tab.put(tt.hash(next), e)
					live[next] = e
					next++
				}
				for range round%4 + 2 {
					if e := live[oldest]; e != nil {
						tab.remove(tt.hash(oldest), e)
						delete(live, oldest)
					}
					oldest++
				}
				check()
			}
			// Compacting keeps every entry findable.
			tab.compact()
			check()
			for i, e := range live {
				tab.remove(tt.hash(i), e)
				delete(live, i)
				check()
			}
			tab.compact()
			assert.LessOrEqual(t, len(tab.slots), minTableSlots, "an empty table compacts to its first size")
		})
	}
}

// TestTableProbesShortInAShard: looking up a trace not in the table (each
// new trace is) probes as few slots as it would with random keys, also
// for the traces of one shard of several, whose hashes agree modulo the
// shards: a home slot taken from a hash's low bits gave them a half or
// less of the slots to start from, and the runs of taken slots grew long.
func TestTableProbesShortInAShard(t *testing.T) {
	for _, shards := range []uint64{1, 2, 4, 8} {
		t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
			var tab table
			i := uint64(1)
			next := func() uint64 { // the next trace hash of shard 0
				for ; ; i++ {
					if h := traceHash(traceID(i)); h%shards == 0 {
						i++
						return h
					}
				}
			}
			for tab.n < 24_000 { // a load of 0.37 in 65,536 slots
				tab.put(next(), &Entry{})
			}
			mask := uint64(len(tab.slots) - 1)
			probes := 0
			const lookups = 10_000
			for range lookups {
				for j := tab.home(key(next())); ; j = (j + 1) & mask {
					probes++
					if tab.slots[j].hash == 0 {
						break
					}
				}
			}
			// Linear probing at a load of α: ½(1 + 1/(1-α)²) on average,
			// 1.74 here; home slots from the low bits gave 2.0 to 4.0.
			assert.Less(t, float64(probes)/lookups, 1.9)
		})
	}
}

// TestTableKeepsItsSizeUntilCompacted: a table emptied after a burst keeps
// its slots, so that the next burst does not grow it again, until compact
// releases them.
func TestTableKeepsItsSizeUntilCompacted(t *testing.T) {
	var tab table
	var burst []*Entry
	for i := range uint64(10_000) {
		e := &Entry{ID: traceID(i + 1)}
		tab.put(traceHash(e.ID), e)
		burst = append(burst, e)
	}
	grown := len(tab.slots)
	for _, e := range burst[:9_000] {
		tab.remove(traceHash(e.ID), e)
	}
	assert.Equal(t, grown, len(tab.slots), "emptying does not shrink")
	tab.compact()
	assert.Equal(t, 4096, len(tab.slots), "1,000 entries compact to the power of two above four times them")
	for _, e := range burst[9_000:] {
		assert.Same(t, e, tab.get(traceHash(e.ID), e.ID))
		tab.remove(traceHash(e.ID), e)
	}
	assert.Equal(t, 4096, len(tab.slots))
	tab.compact()
	assert.Equal(t, minTableSlots, len(tab.slots))
}

func TestShare(t *testing.T) {
	for _, tc := range []struct{ total, n int }{{10, 3}, {1000, 2}, {7, 7}, {50_000, 16}} {
		sum := 0
		for i := range tc.n {
			part := share(tc.total, tc.n, i)
			assert.InDelta(t, tc.total/tc.n, part, 1)
			sum += part
		}
		assert.Equal(t, tc.total, sum)
	}
	assert.Len(t, New(8, 3, 1000, time.Second).shards, 3, "no more shards than max_traces")
}

func TestFifo(t *testing.T) {
	var q fifo[int]
	next, want := 0, 0
	// Interleave pushes and pops so the ring wraps while it grows.
	for round := range 50 {
		for range round % 7 * 5 {
			q.push(next)
			next++
		}
		for range round % 3 * 4 {
			if q.len() == 0 {
				break
			}
			require.Equal(t, want, q.peek())
			require.Equal(t, want, q.pop())
			want++
		}
	}
	assert.Equal(t, next-want, q.len())
}

func TestRecentFilter(t *testing.T) {
	r := recentFilter{traces: 1000}
	assert.Equal(t, leftNot, r.left(traceHash(traceID(1))), "empty")
	for i := range uint64(1000) {
		why := leftDue
		if i%2 == 1 {
			why = leftEvicted
		}
		r.add(traceHash(traceID(i)), why)
	}
	remembered, wrong := 0, 0
	for i := range uint64(1000) {
		switch why := r.left(traceHash(traceID(i))); {
		case why == leftNot:
		case (why == leftEvicted) == (i%2 == 1):
			remembered++
		default:
			wrong++
		}
	}
	assert.Greater(t, remembered, 700, "two slots a trace keep most")
	assert.Zero(t, wrong, "and say why each left")
	for i := uint64(1000); i < 2000; i++ {
		assert.Equal(t, leftNot, r.left(traceHash(traceID(i))), "never added")
	}
	big := recentFilter{traces: 1 << 30}
	big.add(1, leftDue)
	assert.Len(t, big.slots, maxRecentSlots)
}

// TestEntrySize keeps a buffered trace's entry in its size class: the heap
// per buffered span is stated with it.
func TestEntrySize(t *testing.T) {
	assert.EqualValues(t, 112, unsafe.Sizeof(Entry{}))
}

// TestBufferKeepsStrictestSampling: a trace's class is the strictest of
// its spans', whichever batch they came in.
func TestBufferKeepsStrictestSampling(t *testing.T) {
	id := traceID(1)
	half := dependencyanalysis.SamplingOf("ot=th:8", id, 0)
	tenth := dependencyanalysis.SamplingOf("ot=th:e666", id, 0)
	tests := []struct {
		name    string
		batches [][]dependencyanalysis.SamplingClass
		want    dependencyanalysis.SamplingClass
	}{
		{"no sampling information", [][]dependencyanalysis.SamplingClass{{0, 0}}, dependencyanalysis.SamplingNone},
		{"one batch", [][]dependencyanalysis.SamplingClass{{half, tenth, 0}}, tenth},
		{"the stricter in a later batch", [][]dependencyanalysis.SamplingClass{{half}, {tenth}}, tenth},
		{"the stricter in an earlier batch", [][]dependencyanalysis.SamplingClass{{tenth}, {half}}, tenth},
		{"a contradicted threshold", [][]dependencyanalysis.SamplingClass{{tenth}, {dependencyanalysis.SamplingInconsistent}}, dependencyanalysis.SamplingInconsistent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(1, 100, 1000, time.Hour)
			var sc Scratch
			var c Counts
			for _, classes := range tt.batches {
				batch := records(1, len(classes))
				for i := range batch {
					batch[i].SpanID[0] = byte(len(tt.batches))
					batch[i].Sampling = classes[i]
				}
				b.Add(batchOf(batch), &sc, 0, &c)
			}
			s := b.shards[0]
			require.Equal(t, 1, s.queue.len())
			assert.Equal(t, tt.want, s.queue.peek().Sampling())
		})
	}
}

// TestShardRecyclesEntries: a new trace takes an entry the worker gave
// back, emptied, and a shard keeps at most maxFree of them.
func TestShardRecyclesEntries(t *testing.T) {
	s := newShard(1000, 10000, testWait)
	var c Counts
	put(s, 1, 3, 0, &c)
	s.mu.Lock()
	s.traces.get(traceHash(traceID(1)), traceID(1)).sampling = dependencyanalysis.SamplingInconsistent
	s.mu.Unlock()
	taken := takeAll(s, testWait)
	require.Len(t, taken, 1)
	old := taken[0]
	s.Recycle(taken)

	put(s, 2, 2, 500, &c)
	got := takeAll(s, 500+testWait)
	require.Len(t, got, 1)
	e := got[0]
	assert.Same(t, old, e, "the recycled entry")
	assert.Equal(t, traceID(2), e.ID)
	assert.Equal(t, 2, e.Len())
	assert.Len(t, e.Spans(new([]dependencyanalysis.Span)), 2)
	assert.Equal(t, dependencyanalysis.SamplingClass(0), e.Sampling(), "nothing of the trace before")
	assert.Equal(t, Counts{}, c)

	many := make([]*Entry, maxFree+10)
	for i := range many {
		many[i] = new(Entry)
	}
	s.Recycle(many)
	s.Recycle(many[:5])
	assert.Len(t, s.free, maxFree)
}

// TestShardSteadyStateAllocations: once the shard's table and queue have
// grown, a one-span trace that passes through it allocates only its
// segment (which put makes), not its entry.
func TestShardSteadyStateAllocations(t *testing.T) {
	s := newShard(1000, 10000, testWait)
	var c Counts
	now, next := int64(0), uint64(1)
	cycle := func() {
		for range 32 {
			put(s, next, 1, now, &c)
			next++
		}
		now += testWait
		s.Recycle(takeAll(s, now))
	}
	for range 10 {
		cycle()
	}
	assert.InDelta(t, 32, testing.AllocsPerRun(100, cycle), 1, "a segment a trace")
}
