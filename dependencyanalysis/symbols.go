package dependencyanalysis

import (
	"strings"
	"sync"
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
type Symbols struct {
	mu       sync.RWMutex
	ids      map[string]Symbol
	names    []string
	limit    int
	overflow Symbol
	dropped  uint64
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
	if len(s.names)-2 >= s.limit { // "" and OverflowName do not count
		s.dropped++
		return s.overflow
	}
	name = strings.Clone(name) // do not retain the caller's backing array
	id = Symbol(len(s.names))
	s.names = append(s.names, name)
	s.ids[name] = id
	return id
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
	return len(s.names) - 1
}

// Overflowed reports how many Intern calls found the table full.
func (s *Symbols) Overflowed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// symbolCache is a goroutine-local front for Symbols: hits take no lock.
type symbolCache struct {
	table *Symbols
	local map[string]Symbol
}

func (c *symbolCache) intern(name string) Symbol {
	if name == "" {
		return NoSymbol
	}
	if id, ok := c.local[name]; ok {
		return id
	}
	id := c.table.Intern(name)
	if len(c.local) < 1<<16 {
		// Key by the table's own copy so the cache retains no pdata memory.
		c.local[c.table.Name(id)] = id
	}
	return id
}

// internBytes interns a name built in a scratch buffer; a hit allocates nothing.
func (c *symbolCache) internBytes(b []byte) Symbol {
	if id, ok := c.local[string(b)]; ok {
		return id
	}
	return c.intern(string(b))
}
