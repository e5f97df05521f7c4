// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A Symbol is an interned string: a service, operation or peer name. Records
// hold symbols instead of strings so that a buffered span stays small and
// never keeps the pdata payload it came from alive.
type Symbol uint32

// NoSymbol stands for an absent name.
const NoSymbol Symbol = 0

// OverflowName is the name every string interned past the table's limit
// maps to, so that high-cardinality span names cannot exhaust memory.
const OverflowName = "_other"

// Symbols is a concurrency-safe intern table. The zero value is not usable;
// call NewSymbols.
//
// The table is bounded: past its limit new names intern as OverflowName
// until a Sweep frees the names nothing holds any more, so that a burst of
// high-cardinality names (spans named by their SQL) costs a while of
// "_other", not the table forever.
type Symbols struct {
	mu       sync.RWMutex
	ids      map[string]Symbol
	names    []string
	free     []Symbol // freed by Sweep, handed out again by Intern
	limit    int
	overflow Symbol
	dropped  uint64
	gen      atomic.Uint64
}

// NewSymbols returns a table that holds at most limit distinct names
// (limit <= 0 means 1<<20); later names intern as OverflowName.
func NewSymbols(limit int) *Symbols {
	if limit <= 0 {
		limit = 1 << 20
	}
	s := &Symbols{ids: make(map[string]Symbol), names: []string{""}, limit: limit}
	s.overflow = s.Intern(OverflowName)
	return s
}

// Intern returns the symbol for name, adding it if it is new. The empty
// string is NoSymbol.
func (s *Symbols) Intern(name string) Symbol {
	if name == "" {
		return NoSymbol
	}
	s.mu.RLock()
	id, ok := s.ids[name]
	s.mu.RUnlock()
	if ok {
		return id
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.ids[name]; ok {
		return id
	}
	if s.overflow != NoSymbol && len(s.ids)-1 >= s.limit { // OverflowName does not count
		s.dropped++
		return s.overflow
	}
	name = strings.Clone(name) // do not retain the caller's backing array
	if n := len(s.free); n > 0 {
		id = s.free[n-1]
		s.free = s.free[:n-1]
		s.names[id] = name
	} else {
		id = Symbol(len(s.names))
		s.names = append(s.names, name)
	}
	s.ids[name] = id
	return id
}

// Overflow returns the symbol names intern as once the table is full.
func (s *Symbols) Overflow() Symbol { return s.overflow }

// Lookup returns the symbol for name if the table holds it, without adding
// it.
func (s *Symbols) Lookup(name string) (Symbol, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.ids[name]
	return id, ok
}

// Name returns the string for sym; NoSymbol and unknown symbols give "".
func (s *Symbols) Name(sym Symbol) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if int(sym) < len(s.names) {
		return s.names[sym]
	}
	return ""
}

// Len reports how many names the table holds.
func (s *Symbols) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.ids)
}

// Full reports whether the table holds at least fraction of its limit.
func (s *Symbols) Full(fraction float64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return float64(len(s.ids)-1) >= fraction*float64(s.limit)
}

// Overflowed reports how many Intern calls found the table full.
func (s *Symbols) Overflowed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Generation counts the sweeps that freed names. A symbol obtained in one
// generation means nothing in a later one unless the sweep kept it;
// caches of symbols (the Extractor's) start over when it changes.
func (s *Symbols) Generation() uint64 { return s.gen.Load() }

// Sweep frees every name that live does not keep, so that Intern can hand
// out its symbol again, and reports how many it freed. live calls keep for
// each symbol still in use.
//
// The caller must make sure that, while Sweep runs, no other goroutine
// holds a symbol live does not report or calls Intern: the processor
// pauses extraction and analysis around it. Afterwards, extractors notice
// the new Generation and drop their caches.
func (s *Symbols) Sweep(live func(keep func(Symbol))) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	marked := make([]bool, len(s.names))
	marked[NoSymbol], marked[s.overflow] = true, true
	live(func(sym Symbol) {
		if int(sym) < len(marked) {
			marked[sym] = true
		}
	})
	freed := 0
	for id, name := range s.names {
		if marked[id] || name == "" {
			continue
		}
		delete(s.ids, name)
		s.names[id] = ""
		s.free = append(s.free, Symbol(id))
		freed++
	}
	if freed > 0 {
		s.gen.Add(1)
	}
	return freed
}

// symbolCache is a goroutine-local front for Symbols: hits take no lock.
// In front of its map sits a direct-mapped table indexed by the name's
// hash: a span's names are mostly the same few hundred, and one such
// probe and compare costs about half a map look-up, which took a quarter
// of extraction's time. Names that collide there only fall through to the
// map.
type symbolCache struct {
	table *Symbols
	local map[string]frontSlot
	gen   uint64 // the table's Generation when local was filled
	front *[frontSlots]frontSlot
}

// frontSlots is the size of symbolCache's direct-mapped table: 12 KiB.
const frontSlots = 1 << frontBits

// frontBits are the bits of a name's hash that pick its front slot, the
// top ones: a multiply mixes every bit of its input only into those.
const frontBits = 9

type frontSlot struct {
	name string // the table's copy, never pdata's
	id   Symbol
}

func newSymbolCache(table *Symbols) symbolCache {
	return symbolCache{table: table, local: make(map[string]frontSlot, 256), gen: table.Generation(), front: new([frontSlots]frontSlot)}
}

// fresh drops the cache if the table swept names since it was filled, and
// reports whether it did.
func (c *symbolCache) fresh() bool {
	if g := c.table.Generation(); g != c.gen {
		clear(c.local)
		clear(c.front[:])
		c.gen = g
		return true
	}
	return false
}

// frontIndex is name's slot in the front table. It reads at most three
// words of the name, not all of it as maphash does: the front is a cache in
// front of the map, so two names that share a slot cost a map look-up, not
// a wrong symbol, and hashing every byte of every name was a tenth of
// extraction. Names that differ only between the words it reads share a
// slot.
func frontIndex(name string) uint32 {
	return frontIndexBytes(unsafe.Slice(unsafe.StringData(name), len(name))) //nolint:gosec // G103: read only, within the string
}

// frontIndexBytes is frontIndex of string(p), for a name built in a
// scratch buffer: passing string(p) on would copy it.
func frontIndexBytes(p []byte) uint32 {
	n := len(p)
	var h uint64
	switch {
	case n >= 8:
		h = binary.LittleEndian.Uint64(p) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(p[n-8:]), 23)
		if n > 16 {
			h ^= bits.RotateLeft64(binary.LittleEndian.Uint64(p[n/2-4:]), 47)
		}
	case n >= 4:
		h = uint64(binary.LittleEndian.Uint32(p)) | uint64(binary.LittleEndian.Uint32(p[n-4:]))<<32
	case n > 0:
		h = uint64(p[0]) | uint64(p[n/2])<<8 | uint64(p[n-1])<<16
	}
	h = (h ^ uint64(n) ^ frontSeed) * 0x9E3779B97F4A7C15
	return uint32(h >> (64 - frontBits))
}

// frontSeed seeds frontIndex; one for the process, so that which names
// share a slot is not the same from one run to the next.
var frontSeed = rand.Uint64() //nolint:gosec // G404: no secret: it only varies which names share a slot

func (c *symbolCache) intern(name string) Symbol {
	if name == "" {
		return NoSymbol
	}
	slot := &c.front[frontIndex(name)]
	if slot.name == name {
		return slot.id
	}
	if hit, ok := c.local[name]; ok {
		*slot = hit
		return hit.id
	}
	return c.add(slot, name)
}

// internBytes interns a name built in a scratch buffer; a hit allocates
// nothing, which is why it repeats intern with string(b) written out at
// each use: the compiler copies b only where the string is passed on.
func (c *symbolCache) internBytes(b []byte) Symbol {
	if len(b) == 0 {
		return NoSymbol
	}
	slot := &c.front[frontIndexBytes(b)]
	if slot.name == string(b) {
		return slot.id
	}
	if hit, ok := c.local[string(b)]; ok {
		*slot = hit
		return hit.id
	}
	return c.add(slot, string(b))
}

// add interns name, which the cache does not hold, in the table and
// caches it in the map and in slot.
func (c *symbolCache) add(slot *frontSlot, name string) Symbol {
	id := c.table.Intern(name)
	if id == c.table.overflow {
		return id // the name is not in the table: nothing to cache it by
	}
	// Keyed and kept by the table's own copy, so that the cache retains
	// no pdata memory.
	hit := frontSlot{c.table.Name(id), id}
	if len(c.local) < 1<<16 {
		c.local[hit.name] = hit
	}
	*slot = hit
	return id
}
