// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"math/bits"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// table finds a shard's waiting traces by ID: open addressing with linear
// probing on the trace hash, and deletion by backward shift. A Go map does
// the same job, but the buffer deletes as often as it inserts, and the
// tombstones a map's deletes leave made its lookups several times slower
// under that churn; backward shift leaves none. It holds at most half as
// many entries as slots. It does not shrink as it empties, since traffic
// that comes in bursts would grow it again each time, copying every entry
// twice over; compact releases what a burst left (the flusher calls it).
type table struct {
	slots []slot // a power of two of them, or none
	n     int
}

// slot holds an entry and its trace hash; a zero hash marks it empty.
type slot struct {
	hash uint64
	e    *Entry
}

// minTableSlots is the size of a table's first allocation.
const minTableSlots = 64

// key makes a trace hash a slot's: never zero.
func key(h uint64) uint64 { return h | 1 }

// home is the slot where the search for key k starts. It is taken from
// the top bits: the shard a trace goes to is its hash modulo the shards,
// so that with a power of two of shards the low bits of every hash in a
// shard are the same, which left all but one in two or four slots
// without an entry of their own, and the probe runs long.
func (t *table) home(k uint64) uint64 {
	return k >> (64 - bits.Len(uint(len(t.slots)-1)))
}

// get returns the entry of trace id, whose hash is h, or nil.
func (t *table) get(h uint64, id pcommon.TraceID) *Entry {
	if t.n == 0 {
		return nil
	}
	k, mask := key(h), uint64(len(t.slots)-1)
	for i := t.home(k); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.hash == 0 {
			return nil
		}
		if s.hash == k && s.e.ID == id {
			return s.e
		}
	}
}

// put adds e, whose trace hash is h; the caller has checked it is absent.
func (t *table) put(h uint64, e *Entry) {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	k, mask := key(h), uint64(len(t.slots)-1)
	i := t.home(k)
	for t.slots[i].hash != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = slot{hash: k, e: e}
	t.n++
}

// remove deletes e, whose trace hash is h, if present, and moves later
// entries of its probe run back so that no lookup stops short of them.
func (t *table) remove(h uint64, e *Entry) {
	if t.n == 0 {
		return
	}
	k, mask := key(h), uint64(len(t.slots)-1)
	i := t.home(k)
	for t.slots[i].e != e {
		if t.slots[i].hash == 0 {
			return
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; t.slots[j].hash != 0; j = (j + 1) & mask {
		// The entry at j may move to the hole at i unless its home slot
		// lies cyclically in (i, j].
		if home := t.home(t.slots[j].hash); (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = slot{}
	t.n--
}

// compact shrinks the table to fit its entries, if it holds less than an
// eighth of its slots, so that a burst's table does not stay resident.
func (t *table) compact() {
	if len(t.slots) <= minTableSlots || 8*t.n >= len(t.slots) {
		return
	}
	old := t.slots
	t.slots, t.n = nil, 0
	if len(old) > 0 {
		size := minTableSlots
		for size < 4*t.count(old) {
			size *= 2
		}
		t.rehash(old, size)
	}
}

// count is how many of slots hold an entry.
func (t *table) count(slots []slot) int {
	n := 0
	for _, s := range slots {
		if s.hash != 0 {
			n++
		}
	}
	return n
}

func (t *table) grow() { t.rehash(t.slots, max(minTableSlots, 2*len(t.slots))) }

// rehash moves the entries of old into size new slots.
func (t *table) rehash(old []slot, size int) {
	t.slots = make([]slot, size)
	t.n = 0
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s.hash == 0 {
			continue
		}
		i := t.home(s.hash)
		for t.slots[i].hash != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
		t.n++
	}
}
