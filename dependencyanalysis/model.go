// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/ownership"
)

// EdgeKey names an edge: (service, inbound operation) → (peer service, peer operation).
type EdgeKey struct {
	Service, Operation, PeerService, PeerOperation Symbol
}

// EdgeCounts are an edge's observations, weighted by age when the model
// decays.
//
// The model judges an edge on requests in which its call failed while no
// other call of the request failed: a request that failed because another
// blocking call failed says nothing about whether this edge is tolerated,
// and counting it would keep a tolerated edge that fails alongside a
// fail-close one unknown forever. Mode rests on
//
//	P(request fails | this call failed, no other call failed) ≈ FailedRequestFailed / Failed
type EdgeCounts struct {
	// Failed counts requests in which the logical call failed and no other
	// call of the request failed; FailedRequestFailed those of them in
	// which the request failed too.
	Failed, FailedRequestFailed float64
	// Samples is Failed counted without weights: how many requests the
	// evidence comes from, which min_samples is compared with.
	Samples float64
	// OK counts requests in which the call succeeded, and OKRequestFailed
	// those of them in which the request failed anyway.
	OK, OKRequestFailed float64
}

func (c *EdgeCounts) scale(f float64) {
	samples := c.Samples
	c.Failed *= f
	c.FailedRequestFailed *= f
	c.OK *= f
	c.OKRequestFailed *= f
	c.Samples = samples // a count of requests, not a weight
}

// Estimate is the model's judgement of one edge.
type Estimate struct {
	Mode   ownership.Mode
	Counts EdgeCounts
	// Lower and Upper bound P(request fails | call failed alone) at the
	// configured confidence (Wilson score interval on the weighted
	// counts); 0 and 1 without samples.
	Lower, Upper float64
}

// HintEdge is the estimate in the ownership hints' form, for the edge from
// operation to (peerService, peerOperation) with the addresses its caller
// used to reach the peer. Confidence is the bound the mode rests on — for
// fail-close the lower bound of P(request fails | the call failed alone),
// for fail-open one minus its upper bound, 0 when unknown — rounded to four
// places; Samples is the evidence counted, not weighted.
func (e Estimate) HintEdge(operation, peerService, peerOperation string, addresses []string) ownership.HintEdge {
	h := ownership.HintEdge{Operation: operation, PeerService: peerService, PeerOperation: peerOperation,
		PeerAddresses: addresses, Mode: e.Mode, Samples: int64(e.Counts.Samples + 0.5)}
	switch e.Mode {
	case ownership.ModeFailClose:
		h.Confidence = e.Lower
	case ownership.ModeFailOpen:
		h.Confidence = 1 - e.Upper
	}
	h.Confidence = math.Round(h.Confidence*1e4) / 1e4
	return h
}

// Modes tells the verdict rules an edge's mode. EdgeModel implements it; so
// can a model merged from several collectors (ModeTable).
type Modes interface {
	Mode(EdgeKey) ownership.Mode
}

// ModeTable is a fixed set of edge modes, such as a model merged in a
// store; absent edges are unknown.
type ModeTable map[EdgeKey]ownership.Mode

// Mode returns the edge's mode, ownership.ModeUnknown when absent.
func (t ModeTable) Mode(k EdgeKey) ownership.Mode { return t[k] }

// EdgeModel learns per edge whether a call's failure fails the request. It
// is safe for concurrent use. Time is the traces' own: observations fade
// with the age of their spans relative to the newest span seen, so the
// model behaves the same live and over a file. With a clock (WithClock),
// span times are bounded by it, so that a host whose clock runs ahead
// cannot age every other host's evidence.
//
// The model is split into stripes by edge, each with a lock of its own:
// an edge lives in one stripe only, so that its memory is paid once
// however many goroutines learn it, and goroutines that learn at once
// rarely wait for one another. A stripe keeps its edges' state in chunks
// of a slab without pointers, found through an index without pointers
// either, so that a million edges cost the garbage collector nothing to
// scan and growing copies no state. The index is a table of 8-byte
// entries, each an edge's hash and slot, the key compared in the state
// that a look-up reads anyway: a map keyed by EdgeKey kept its control
// word, its key and the slot apart from the state, each a cache miss
// once a million edges are tracked.
//
// Decay costs one exponential per request, not per edge and observation:
// counts are kept scaled by 2^((t−epoch)/half-life) at the time t of each
// observation and scaled back when read; a stripe's epoch moves forward
// (rescaling its edges once) long before the scale could overflow.
type EdgeModel struct {
	cfg      ModelConfig
	z        float64
	now      func() time.Time
	stripes  []modelStripe
	maxEdges int64         // distinct edges tracked at most, over the stripes
	edges    atomic.Int64  // distinct edges tracked now
	epoch    atomic.Uint64 // the first observation's time: every stripe's first epoch
	newest   atomic.Uint64 // the newest span time observed, a pcommon.Timestamp
}

// modelStripe is one stripe of the model: the edges whose key hashes to it.
type modelStripe struct {
	mu     sync.RWMutex
	index  edgeIndex // into chunks: chunk<<chunkBits | offset
	chunks [][]edgeState
	free   []uint32        // slots of forgotten edges, reused first
	cache  [256]stripeSlot // in front of index; under mu
	epoch  pcommon.Timestamp
	// evicted counts edges the bound made the stripe forget.
	evicted uint64
	_       [64]byte // keeps stripes' locks off each other's cache lines
}

// chunkBits sizes a stripe's chunks: 4,096 edges, 352 KiB.
const chunkBits = 12

// stripeSlot caches one edge's slot; key zero is empty, as no edge has
// every symbol NoSymbol.
type stripeSlot struct {
	k    EdgeKey
	slot uint32
}

// edgeState is one edge's scaled counts, when it was last observed, and
// the latest addresses its caller used to reach the peer. It holds no
// pointers; a forgotten edge's state has a zero key.
type edgeState struct {
	key       EdgeKey
	counts    EdgeCounts
	last      pcommon.Timestamp
	addresses [maxAddresses]Symbol
	nextAddr  uint8
}

// edgeStateBytes is what the model stores per edge beyond its index: the
// state in its slab. The index adds 11 to 21 bytes, by how full its table
// is (TestEdgeModelMemoryPerEdge).
const edgeStateBytes = int(unsafe.Sizeof(edgeState{}))

// maxAddresses bounds the addresses an edge remembers (a service behind a
// few load balancers or DNS names); the oldest makes way for a new one.
const maxAddresses = 4

func (e *edgeState) remember(addr Symbol) {
	for _, a := range e.addresses {
		if a == addr {
			return
		}
	}
	e.addresses[e.nextAddr] = addr
	e.nextAddr = (e.nextAddr + 1) % maxAddresses
}

// addressList returns the remembered addresses, in no particular order.
func (e *edgeState) addressList() []Symbol {
	var out []Symbol
	for _, a := range e.addresses {
		if a != NoSymbol {
			out = append(out, a)
		}
	}
	return out
}

// rebaseAfter is how many half-lives past the epoch a weight may reach
// before the epoch moves: 2^500 is far from float64's 2^1023.
const rebaseAfter = 500

// DefaultMaxEdges is how many distinct edges a model tracks unless
// configured otherwise (ModelConfig.MaxEdges): a fleet of thousands of
// services, in about 105 MiB.
const DefaultMaxEdges = 1_000_000

// A ModelOption configures an EdgeModel.
type ModelOption func(*EdgeModel)

// WithClock bounds span times by now, the collector's clock: an
// observation dated after now counts as made now.
func WithClock(now func() time.Time) ModelOption { return func(m *EdgeModel) { m.now = now } }

// WithMaxEdges bounds the distinct edges the model tracks, overriding
// ModelConfig.MaxEdges. When a new edge would pass the bound, the eighth of
// its stripe's edges seen least recently are forgotten, so that the model
// keeps learning.
func WithMaxEdges(n int) ModelOption {
	return func(m *EdgeModel) {
		if n > 0 {
			m.maxEdges = int64(n)
		}
	}
}

// maxStripes is how many stripes a large model has: enough that the
// workers of a large host seldom meet on one lock. A model has a stripe
// per minStripeEdges edges of its bound, at least one, so that a stripe's
// least recent edges, which a full model forgets, are about the model's.
const (
	maxStripes     = 64
	minStripeEdges = 4096
)

// NewEdgeModel returns an empty model; cfg must be valid (Config.Validate).
func NewEdgeModel(cfg ModelConfig, opts ...ModelOption) *EdgeModel {
	m := &EdgeModel{
		cfg:      cfg,
		z:        cfg.z(),
		maxEdges: int64(cmp.Or(cfg.MaxEdges, DefaultMaxEdges)),
	}
	for _, o := range opts {
		o(m)
	}
	m.stripes = make([]modelStripe, min(maxStripes, max(1, m.maxEdges/minStripeEdges)))
	return m
}

// Config returns the model's configuration.
func (m *EdgeModel) Config() ModelConfig { return m.cfg }

// hash spreads an edge key over stripes and caches.
func (k EdgeKey) hash() uint32 {
	h := uint32(k.Service)*0x9E3779B1 ^ uint32(k.Operation)*0x85EBCA77 ^
		uint32(k.PeerService)*0xC2B2AE3D ^ uint32(k.PeerOperation)*0x27D4EB2F
	h ^= h >> 15
	h *= 0x2C1B3C6D
	return h ^ h>>12
}

// stripe returns the stripe of the edge whose hash is h: its top bits, so
// that the cache's index (its low bits) varies within a stripe.
func (m *EdgeModel) stripe(h uint32) *modelStripe {
	return &m.stripes[(h>>24)%uint32(len(m.stripes))]
}

// halfLives is how many half-lives from the epoch to t (negative before
// it).
func (m *EdgeModel) halfLives(epoch, t pcommon.Timestamp) float64 {
	return (float64(t) - float64(epoch)) / float64(m.cfg.HalfLife)
}

// weight is the scaled weight, against epoch, of an observation at t.
func (m *EdgeModel) weight(epoch, t pcommon.Timestamp) float64 {
	if m.cfg.HalfLife <= 0 {
		return 1
	}
	return math.Exp2(m.halfLives(epoch, t))
}

// moveEpoch moves stripe s's epoch forward to epoch, rescaling its edges.
// Call with s.mu held.
func (m *EdgeModel) moveEpoch(s *modelStripe, epoch pcommon.Timestamp) {
	if s.epoch != 0 {
		shift := math.Exp2(-m.halfLives(s.epoch, epoch))
		for _, chunk := range s.chunks {
			for i := range chunk {
				chunk[i].counts.scale(shift)
			}
		}
	}
	s.epoch = epoch
}

// unscale turns counts stored against epoch into counts weighted by age at
// the newest span.
func (m *EdgeModel) unscale(epoch pcommon.Timestamp, c EdgeCounts) EdgeCounts {
	if m.cfg.HalfLife > 0 {
		c.scale(math.Exp2(-m.halfLives(epoch, pcommon.Timestamp(m.newest.Load()))))
	}
	return c
}

// Observe learns from every logical call of a linked trace, each weighing
// the trace's adjusted count (Trace.Weight) and counting once towards
// min_samples; an incomplete trace teaches nothing. Any number of
// goroutines may observe at once.
func (m *EdgeModel) Observe(t *Trace) {
	if len(t.Calls) == 0 || t.Incomplete != IncompleteNone || !(t.Weight > 0) {
		return
	}
	bound := pcommon.Timestamp(math.MaxUint64)
	if m.now != nil {
		bound = pcommon.NewTimestampFromTime(m.now())
	}
	newest := pcommon.Timestamp(0)
	for ri := range t.Requests {
		r := &t.Requests[ri]
		if r.CallsStart == r.CallsEnd {
			continue
		}
		req := &t.Spans[r.Span]
		at := min(req.End(), bound)
		newest = max(newest, at)
		epoch := m.epochFor(at)
		w := m.weight(epoch, at) * t.Weight
		calls := t.RequestCalls(r)
		failed := failedCalls(calls)
		for ci := range calls {
			c := &calls[ci]
			k := EdgeKey{req.Service, req.Operation, c.PeerService, c.PeerOperation}
			h := k.hash()
			s := m.stripe(h)
			s.mu.Lock()
			cw := w
			switch {
			case m.cfg.HalfLife <= 0 || s.epoch == epoch:
			case s.epoch < epoch:
				m.moveEpoch(s, epoch)
			default: // this request read the epoch before another moved it
				cw = m.weight(s.epoch, at) * t.Weight
			}
			e := m.observe(s, h, k, c.Failed, failed == 1, req.Failed(), cw, at)
			if c.PeerAddress != NoSymbol && c.PeerAddress != c.PeerService {
				e.remember(c.PeerAddress)
			}
			s.mu.Unlock()
		}
	}
	for {
		old := m.newest.Load()
		if uint64(newest) <= old || m.newest.CompareAndSwap(old, uint64(newest)) {
			break
		}
	}
}

// epochFor returns the epoch an observation at at is weighed against: the
// first observation's time, moved forward to at once at is more than
// rebaseAfter half-lives past it, long before a weight could overflow.
// Stripes follow it as they are next observed (moveEpoch).
func (m *EdgeModel) epochFor(at pcommon.Timestamp) pcommon.Timestamp {
	for {
		e := m.epoch.Load()
		if e != 0 && (m.cfg.HalfLife <= 0 || m.halfLives(pcommon.Timestamp(e), at) <= rebaseAfter) {
			return pcommon.Timestamp(e)
		}
		if m.epoch.CompareAndSwap(e, uint64(at)) {
			return at
		}
	}
}

// find returns the slot of edge k, whose hash is h. Call with s.mu held.
func (s *modelStripe) find(h uint32, k EdgeKey) (slot uint32, ok bool) {
	t := &s.index
	if t.n == 0 {
		return 0, false
	}
	mask := uint32(len(t.entries) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		e := t.entries[i]
		if e == 0 {
			return 0, false
		}
		if uint32(e>>32) == h {
			if slot := uint32(e) - 1; s.state(slot).key == k {
				return slot, true
			}
		}
	}
}

// edgeIndex finds a stripe's edges by their hash: an open-addressing table
// with linear probing, each entry an edge's hash (high 32 bits) and its
// slot plus one (low 32 bits; 0 is an empty entry), at most three quarters
// full.
type edgeIndex struct {
	entries []uint64
	n       int
}

// insert adds the edge in slot, whose hash is h.
func (t *edgeIndex) insert(h, slot uint32) {
	if 4*(t.n+1) > 3*len(t.entries) {
		t.grow()
	}
	t.put(uint64(h)<<32 | uint64(slot+1))
	t.n++
}

// put stores entry e in the first empty entry from its hash's.
func (t *edgeIndex) put(e uint64) {
	mask := uint32(len(t.entries) - 1)
	i := uint32(e>>32) & mask
	for t.entries[i] != 0 {
		i = (i + 1) & mask
	}
	t.entries[i] = e
}

// grow doubles the table, 64 entries at first.
func (t *edgeIndex) grow() {
	old := t.entries
	t.entries = make([]uint64, max(64, 2*len(old)))
	for _, e := range old {
		if e != 0 {
			t.put(e)
		}
	}
}

// remove drops the edge in slot, whose hash is h, moving back the entries
// after it that their hash would have put before it, so that no look-up
// stops short at the hole.
func (t *edgeIndex) remove(h, slot uint32) {
	if t.n == 0 {
		return
	}
	mask := uint32(len(t.entries) - 1)
	want := uint64(h)<<32 | uint64(slot+1)
	i := h & mask
	for t.entries[i] != want {
		if t.entries[i] == 0 {
			return // not indexed
		}
		i = (i + 1) & mask
	}
	t.n--
	for j := (i + 1) & mask; t.entries[j] != 0; j = (j + 1) & mask {
		// The entry at j may move back into the hole at i unless its
		// home lies cyclically after i, up to j.
		if home := uint32(t.entries[j]>>32) & mask; (j-home)&mask >= (j-i)&mask {
			t.entries[i] = t.entries[j]
			i = j
		}
	}
	t.entries[i] = 0
}

// state returns the edge in slot.
func (s *modelStripe) state(slot uint32) *edgeState {
	return &s.chunks[slot>>chunkBits][slot&(1<<chunkBits-1)]
}

// observe counts one call of edge k, whose hash is h, in stripe s, adding
// the edge if it is new. Call with s.mu held.
func (m *EdgeModel) observe(s *modelStripe, h uint32, k EdgeKey, callFailed, alone, reqFailed bool, w float64, at pcommon.Timestamp) *edgeState {
	cs := &s.cache[h%uint32(len(s.cache))]
	var e *edgeState
	if cs.k == k {
		e = s.state(cs.slot)
	} else {
		slot, ok := s.find(h, k)
		if !ok {
			slot = m.add(s, h, k)
		}
		*cs = stripeSlot{k, slot}
		e = s.state(slot)
	}
	e.last = max(e.last, at)
	c := &e.counts
	switch {
	case callFailed && alone:
		c.Failed += w
		c.Samples++
		if reqFailed {
			c.FailedRequestFailed += w
		}
	case !callFailed:
		c.OK += w
		if reqFailed {
			c.OKRequestFailed += w
		}
	}
	return e
}

// add gives new edge k, whose hash is h, a slot in stripe s, first
// forgetting the least recent of the stripe's edges if the model is full.
// Call with s.mu held.
func (m *EdgeModel) add(s *modelStripe, h uint32, k EdgeKey) uint32 {
	if m.edges.Load() >= m.maxEdges && s.index.n > 0 {
		m.edges.Add(-int64(s.evictLeastRecent()))
	}
	var slot uint32
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		last := len(s.chunks) - 1
		if last < 0 || len(s.chunks[last]) == cap(s.chunks[last]) {
			s.chunks = append(s.chunks, make([]edgeState, 0, 1<<chunkBits))
			last++
		}
		slot = uint32(last<<chunkBits | len(s.chunks[last]))
		s.chunks[last] = s.chunks[last][:len(s.chunks[last])+1]
	}
	*s.state(slot) = edgeState{key: k}
	s.index.insert(h, slot)
	m.edges.Add(1)
	return slot
}

// evictLeastRecent forgets about the eighth of the stripe's edges observed
// least recently, and reports how many it forgot. The cutoff comes from a
// sample of the edges, so that forgetting costs a scan, not a sort. Call
// with mu held.
func (s *modelStripe) evictLeastRecent() int {
	const sample = 256
	lasts := make([]pcommon.Timestamp, 0, sample)
	step := max(1, s.index.n/sample)
	i := 0
	s.each(func(_ uint32, e *edgeState) bool {
		if i%step == 0 && len(lasts) < sample {
			lasts = append(lasts, e.last)
		}
		i++
		return true
	})
	slices.Sort(lasts)
	cutoff := lasts[max(len(lasts)/8, 1)-1]
	want := max(s.index.n/8, 1)
	n := 0
	s.each(func(slot uint32, e *edgeState) bool {
		if e.last <= cutoff {
			s.forget(slot, e)
			n++
		}
		return n < want
	})
	s.evicted += uint64(n)
	return n
}

// each calls fn for every edge of the stripe, in slot order, until fn
// returns false.
func (s *modelStripe) each(fn func(slot uint32, e *edgeState) bool) {
	for c, chunk := range s.chunks {
		for i := range chunk {
			if e := &chunk[i]; e.key != (EdgeKey{}) {
				if !fn(uint32(c<<chunkBits|i), e) {
					return
				}
			}
		}
	}
}

// forget drops the edge in slot. Call with mu held.
func (s *modelStripe) forget(slot uint32, e *edgeState) {
	s.index.remove(e.key.hash(), slot)
	*e = edgeState{}
	s.free = append(s.free, slot)
	clear(s.cache[:])
}

// Forget drops the edges not observed since before, such as those whose
// weight has decayed to nothing, and reports how many it dropped.
func (m *EdgeModel) Forget(before time.Time) int {
	t := pcommon.NewTimestampFromTime(before)
	n := 0
	for i := range m.stripes {
		s := &m.stripes[i]
		s.mu.Lock()
		s.each(func(slot uint32, e *edgeState) bool {
			if e.last < t {
				s.forget(slot, e)
				n++
			}
			return true
		})
		s.mu.Unlock()
	}
	m.edges.Add(-int64(n))
	return n
}

// Evicted reports how many edges the bound made the model forget.
func (m *EdgeModel) Evicted() uint64 {
	var n uint64
	for i := range m.stripes {
		s := &m.stripes[i]
		s.mu.RLock()
		n += s.evicted
		s.mu.RUnlock()
	}
	return n
}

// Mode returns the edge's mode.
func (m *EdgeModel) Mode(k EdgeKey) ownership.Mode {
	return m.Estimate(k).Mode
}

// Estimate returns the edge's counts, weighted by age at the newest span
// seen, and its mode.
func (m *EdgeModel) Estimate(k EdgeKey) Estimate {
	var c EdgeCounts
	h := k.hash()
	s := m.stripe(h)
	s.mu.RLock()
	if slot, ok := s.find(h, k); ok {
		c = m.unscale(s.epoch, s.state(slot).counts)
	}
	s.mu.RUnlock()
	return m.Judge(c)
}

// Judge gives the estimate the model's rule assigns to counts, wherever they
// were summed: this model's own, or several collectors' merged in the store.
func (m *EdgeModel) Judge(c EdgeCounts) Estimate { return m.cfg.judge(c, m.z) }

// Judge gives the estimate the rule configured by c assigns to counts, for
// readers that hold counts but no model (the store).
func (c ModelConfig) Judge(counts EdgeCounts) Estimate { return c.judge(counts, c.z()) }

// z is the normal quantile of the configured two-sided confidence.
func (c ModelConfig) z() float64 { return math.Sqrt2 * math.Erfinv(c.Confidence) }

// judge applies the rule: with at least MinSamples requests of evidence
// (counted, not weighted), fail-close when the Wilson lower bound of
// P(request fails | call failed alone) on the weighted counts, over no more
// requests than were seen, reaches
// FailCloseThreshold, fail-open when its upper bound is at most
// FailOpenThreshold, else unknown.
func (c ModelConfig) judge(counts EdgeCounts, z float64) Estimate {
	est := Estimate{Counts: counts, Lower: 0, Upper: 1}
	n := counts.Failed
	if n <= 0 {
		return est
	}
	k := counts.FailedRequestFailed
	if s := counts.Samples; s > 0 && s < n {
		// Weighted by sampling, the counts stand for more requests than
		// the evidence comes from: the frequency is theirs, the interval's
		// width that of the traces seen.
		k, n = k*s/n, s
	}
	est.Lower, est.Upper = Wilson(k, n, z)
	if counts.Samples+1e-9 < float64(c.MinSamples) {
		return est
	}
	switch {
	case est.Lower >= c.FailCloseThreshold:
		est.Mode = ownership.ModeFailClose
	case est.Upper <= c.FailOpenThreshold:
		est.Mode = ownership.ModeFailOpen
	}
	return est
}

// Edges calls fn for every edge with its estimate and the addresses its
// caller used to reach the peer (when named otherwise), in no particular
// order. A stripe's lock is held only while its edges are copied.
func (m *EdgeModel) Edges(fn func(k EdgeKey, est Estimate, addresses []Symbol)) {
	type edge struct {
		k EdgeKey
		c EdgeCounts
		a []Symbol
	}
	var edges []edge
	for i := range m.stripes {
		s := &m.stripes[i]
		s.mu.RLock()
		edges = slices.Grow(edges[:0], s.index.n)
		s.each(func(_ uint32, e *edgeState) bool {
			edges = append(edges, edge{e.key, m.unscale(s.epoch, e.counts), e.addressList()})
			return true
		})
		s.mu.RUnlock()
		for _, e := range edges {
			fn(e.k, m.Judge(e.c), e.a)
		}
	}
}

// Len reports how many edges the model tracks.
func (m *EdgeModel) Len() int { return int(m.edges.Load()) }

// Symbols calls keep for every symbol the model holds, so that a sweep of
// the symbol table (Symbols.Sweep) keeps them.
func (m *EdgeModel) Symbols(keep func(Symbol)) {
	for i := range m.stripes {
		s := &m.stripes[i]
		s.mu.RLock()
		s.each(func(_ uint32, e *edgeState) bool {
			e.key.symbols(keep)
			for _, a := range e.addresses {
				keep(a)
			}
			return true
		})
		s.mu.RUnlock()
	}
}

func (k EdgeKey) symbols(keep func(Symbol)) {
	keep(k.Service)
	keep(k.Operation)
	keep(k.PeerService)
	keep(k.PeerOperation)
}

// Wilson returns the Wilson score interval for k successes in n trials at
// normal quantile z. It accepts fractional (decayed) counts.
func Wilson(k, n, z float64) (lower, upper float64) {
	if n <= 0 {
		return 0, 1
	}
	p := min(max(k/n, 0), 1)
	z2 := z * z
	den := 1 + z2/n
	center := (p + z2/(2*n)) / den
	half := z / den * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	return max(center-half, 0), min(center+half, 1)
}
