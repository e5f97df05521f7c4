// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSymbolsSweep(t *testing.T) {
	s := NewSymbols(3)
	keep, junk := s.Intern("checkout"), s.Intern("SELECT 1")
	s.Intern("SELECT 2")
	require.Equal(t, s.Intern(OverflowName), s.Intern("payments"), "full")
	gen := s.Generation()

	freed := s.Sweep(func(k func(Symbol)) { k(keep) })
	assert.Equal(t, 2, freed)
	assert.Equal(t, gen+1, s.Generation())
	assert.Equal(t, "checkout", s.Name(keep), "kept")
	assert.Equal(t, "", s.Name(junk), "freed")
	_, ok := s.Lookup("SELECT 1")
	assert.False(t, ok)

	payments := s.Intern("payments")
	assert.NotEqual(t, s.Intern(OverflowName), payments, "room again")
	assert.Contains(t, []Symbol{junk, junk + 1}, payments, "a freed symbol is handed out again")
	assert.Equal(t, keep, s.Intern("checkout"))

	assert.Zero(t, s.Sweep(func(k func(Symbol)) { k(keep); k(payments) }), "nothing to free")
	assert.Equal(t, gen+1, s.Generation(), "a sweep that frees nothing changes nothing")
}

// TestExtractorAfterSweep: an extractor's cache must not hand out a symbol
// the table freed and gave to another name.
func TestExtractorAfterSweep(t *testing.T) {
	syms := NewSymbols(100)
	ex := NewExtractor(DefaultConfig(), syms)
	td, s := oneSpan("svc")
	s.SetName("old-name")
	first := ex.Append(nil, td)[0]
	require.Equal(t, "old-name", syms.Name(first.Operation))

	syms.Sweep(func(func(Symbol)) {}) // nothing is held
	for i := range 10 {
		syms.Intern(fmt.Sprint("new-", i)) // take the freed symbols
	}
	again := ex.Append(nil, td)[0]
	assert.Equal(t, "old-name", syms.Name(again.Operation))
	assert.Equal(t, "svc", syms.Name(again.Service))
	assert.Equal(t, UnknownService, syms.Name(ex.unknownSvc))
}

// TestSymbolCache: the cache's direct-mapped front must give each name its
// own symbol, also for names that share a slot there.
func TestSymbolCache(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		// oneSlot says the names all take one front slot, so that each
		// look-up pushes the others' out.
		oneSlot bool
	}{
		{"short names", []string{"a", "b", "ab", "ba", "GET", "POST"}, false},
		{"same length and outer bytes", []string{
			"GET /api/v1/orders/{id}/items/list", "GET /api/v1/ordxx/{id}/items/list",
			"GET /api/v1/orders/{id}/itemz/list", "GET /api/v1/orders/{ix}/items/list",
		}, false},
		// 38 bytes: the front reads bytes 0-7, 15-22 and 30-37, and these
		// differ only at 10 and 28.
		{"differing only between the words the front reads", []string{
			"GET /api/v1/orders/{id}/items/list/all", "GET /api/v2/orders/{id}/items/list/all",
			"GET /api/v1/orders/{id}/itemz/list/all",
		}, true},
		{"more names than slots", func() []string {
			var n []string
			for i := range 3 * frontSlots {
				n = append(n, fmt.Sprintf("operation-%04d", i))
			}
			return n
		}(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.oneSlot {
				for _, n := range tt.names[1:] {
					require.Equal(t, frontIndex(tt.names[0]), frontIndex(n), "%q and %q", tt.names[0], n)
				}
			}
			syms := NewSymbols(10000)
			c := newSymbolCache(syms)
			for round := range 2 { // the second round reads what the first cached
				for _, n := range tt.names {
					id := c.intern(n)
					require.Equal(t, n, syms.Name(id), "round %d", round)
					require.Equal(t, id, c.internBytes([]byte(n)), "round %d", round)
				}
			}
		})
	}
}

// TestFrontIndexSpreadsRoutes: the front's slots are a hash of a few words
// of a name, not of all of it; a service's HTTP routes, which share their
// prefix and differ in the middle, must still spread over the slots, or
// the front would send most look-ups on to the map.
func TestFrontIndexSpreadsRoutes(t *testing.T) {
	resources := []string{"orders", "items", "users", "carts", "payments", "invoices", "shipments", "refunds", "reviews", "coupons"}
	var names []string
	for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
		for _, r := range resources {
			for _, v := range []string{"v1", "v2"} {
				names = append(names, m+" /api/"+v+"/"+r, m+" /api/"+v+"/"+r+"/{id}", m+" /api/"+v+"/"+r+"/{id}/history")
			}
		}
	}
	slots := map[uint32]bool{}
	for _, n := range names {
		i := frontIndex(n)
		require.Less(t, i, uint32(frontSlots))
		slots[i] = true
	}
	// 240 names thrown at random into 512 slots fill about 190 of them;
	// these fill 150 to 185 (5,000 seeds), since the version is in none of
	// the words read of some. Reading only the ends fills about 100.
	assert.Greater(t, len(slots), 130, "%d names in %d slots", len(names), len(slots))
}

// TestSymbolCacheFull: a name the full table cannot take gets the overflow
// symbol through the cache, and its own symbol once a sweep makes room.
func TestSymbolCacheFull(t *testing.T) {
	syms := NewSymbols(1)
	c := newSymbolCache(syms)
	first := c.intern("first")
	require.Equal(t, "first", syms.Name(first))
	assert.Equal(t, syms.Overflow(), c.intern("second"))
	assert.Equal(t, syms.Overflow(), c.internBytes([]byte("second")))

	syms.Sweep(func(func(Symbol)) {}) // frees "first"
	require.True(t, c.fresh())
	assert.Equal(t, "second", syms.Name(c.intern("second")))
	assert.Equal(t, "second", syms.Name(c.internBytes([]byte("second"))))
}
