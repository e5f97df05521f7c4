package dependencyanalysis

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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

// add adds o's counts to c.
func (c *EdgeCounts) add(o EdgeCounts) {
	c.Failed += o.Failed
	c.FailedRequestFailed += o.FailedRequestFailed
	c.Samples += o.Samples
	c.OK += o.OK
	c.OKRequestFailed += o.OKRequestFailed
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
// The model is split into parts (WithParts), each with a lock of its own:
// goroutines that learn each learn into their own part (ObserveIn), so
// that they never wait for one another, and readers sum an edge's counts
// over the parts.
//
// Decay costs one exponential per request, not per edge and observation:
// counts are kept scaled by 2^((t−epoch)/half-life) at the time t of each
// observation and scaled back when read; a part's epoch moves forward
// (rescaling its edges once) long before the scale could overflow.
type EdgeModel struct {
	cfg     ModelConfig
	z       float64
	now     func() time.Time
	parts   []modelPart
	maxPart int           // edges a part tracks at most
	newest  atomic.Uint64 // the newest span time observed, a pcommon.Timestamp
}

// modelPart is one part of the model, learned into by one goroutine at a
// time.
type modelPart struct {
	mu      sync.RWMutex
	edges   map[EdgeKey]*edgeState
	cache   [1024]modelSlot // in front of edges, as in Stats; under mu
	epoch   pcommon.Timestamp
	evicted uint64
}

// edgeState is one edge's scaled counts, when it was last observed, and
// the latest addresses its caller used to reach the peer.
type edgeState struct {
	counts    EdgeCounts
	last      pcommon.Timestamp
	addresses [maxAddresses]Symbol
	nextAddr  uint8
}

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

// A ModelOption configures an EdgeModel.
type ModelOption func(*EdgeModel)

// WithClock bounds span times by now, the collector's clock: an
// observation dated after now counts as made now.
func WithClock(now func() time.Time) ModelOption { return func(m *EdgeModel) { m.now = now } }

// WithMaxEdges bounds the edges the model tracks (default 100,000), split
// evenly over its parts. When a new edge would pass a part's share, the
// eighth of the part's edges seen least recently are forgotten, so that
// the model keeps learning.
func WithMaxEdges(n int) ModelOption {
	return func(m *EdgeModel) {
		if n > 0 {
			m.maxPart = n
		}
	}
}

// WithParts splits the model into n parts (default 1), one for each
// goroutine that learns (ObserveIn).
func WithParts(n int) ModelOption {
	return func(m *EdgeModel) {
		if n > 0 {
			m.parts = make([]modelPart, n)
		}
	}
}

// NewEdgeModel returns an empty model; cfg must be valid (Config.Validate).
func NewEdgeModel(cfg ModelConfig, opts ...ModelOption) *EdgeModel {
	m := &EdgeModel{
		cfg:     cfg,
		z:       cfg.z(),
		maxPart: 100_000,
		parts:   make([]modelPart, 1),
	}
	for _, o := range opts {
		o(m)
	}
	m.maxPart = max(1, (m.maxPart+len(m.parts)-1)/len(m.parts))
	for i := range m.parts {
		m.parts[i].edges = make(map[EdgeKey]*edgeState)
	}
	return m
}

// Config returns the model's configuration.
func (m *EdgeModel) Config() ModelConfig { return m.cfg }

// halfLives is how many half-lives from the part's epoch to t (negative
// before it).
func (m *EdgeModel) halfLives(p *modelPart, t pcommon.Timestamp) float64 {
	return (float64(t) - float64(p.epoch)) / float64(m.cfg.HalfLife)
}

// weight is the scaled weight in part p of an observation at t. Call with
// p.mu held.
func (m *EdgeModel) weight(p *modelPart, t pcommon.Timestamp) float64 {
	if m.cfg.HalfLife <= 0 {
		return 1
	}
	if p.epoch == 0 {
		p.epoch = t
	}
	if h := m.halfLives(p, t); h > rebaseAfter {
		shift := math.Exp2(-h)
		for _, e := range p.edges {
			e.counts.scale(shift)
		}
		p.epoch = t
	}
	return math.Exp2(m.halfLives(p, t))
}

// unscale turns part p's stored counts into counts weighted by age at the
// newest span. Call with p.mu held.
func (m *EdgeModel) unscale(p *modelPart, c EdgeCounts) EdgeCounts {
	if m.cfg.HalfLife > 0 {
		c.scale(math.Exp2(-m.halfLives(p, pcommon.Timestamp(m.newest.Load()))))
	}
	return c
}

// Observe learns from every logical call of a linked trace, into the
// first part.
func (m *EdgeModel) Observe(t *Trace) { m.ObserveIn(0, t) }

// ObserveIn learns from every logical call of a linked trace into part
// part (modulo the number of parts): a goroutine that always learns into
// its own part never waits for another that learns.
func (m *EdgeModel) ObserveIn(part int, t *Trace) {
	if len(t.Calls) == 0 {
		return
	}
	bound := pcommon.Timestamp(math.MaxUint64)
	if m.now != nil {
		bound = pcommon.NewTimestampFromTime(m.now())
	}
	p := &m.parts[part%len(m.parts)]
	p.mu.Lock()
	defer p.mu.Unlock()
	newest := pcommon.Timestamp(0)
	for ri := range t.Requests {
		r := &t.Requests[ri]
		if r.CallsStart == r.CallsEnd {
			continue
		}
		req := &t.Spans[r.Span]
		at := min(req.End(), bound)
		w := m.weight(p, at)
		newest = max(newest, at)
		calls := t.RequestCalls(r)
		failed := failedCalls(calls)
		for ci := range calls {
			c := &calls[ci]
			e := m.observe(p, EdgeKey{req.Service, req.Operation, c.PeerService, c.PeerOperation}, c.Failed, failed == 1, req.Failed(), w, at)
			if c.PeerAddress != NoSymbol && c.PeerAddress != c.PeerService {
				e.remember(c.PeerAddress)
			}
		}
	}
	for {
		old := m.newest.Load()
		if uint64(newest) <= old || m.newest.CompareAndSwap(old, uint64(newest)) {
			break
		}
	}
}

type modelSlot struct {
	k EdgeKey
	e *edgeState
}

func (m *EdgeModel) observe(p *modelPart, k EdgeKey, callFailed, alone, reqFailed bool, w float64, at pcommon.Timestamp) *edgeState {
	slot := &p.cache[(mix(k.Service, k.Operation)^mix(k.PeerService, k.PeerOperation)*31)%uint32(len(p.cache))]
	e := slot.e
	if e == nil || slot.k != k {
		var ok bool
		if e, ok = p.edges[k]; !ok {
			if len(p.edges) >= m.maxPart {
				p.evictLeastRecent()
			}
			e = new(edgeState)
			p.edges[k] = e
		}
		*slot = modelSlot{k, e}
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

// evictLeastRecent forgets the eighth of the part's edges observed least
// recently. Call with mu held.
func (p *modelPart) evictLeastRecent() {
	lasts := make([]pcommon.Timestamp, 0, len(p.edges))
	for _, e := range p.edges {
		lasts = append(lasts, e.last)
	}
	slices.Sort(lasts)
	n := max(len(lasts)/8, 1)
	cutoff := lasts[n-1]
	for k, e := range p.edges {
		if n == 0 {
			break
		}
		if e.last <= cutoff {
			delete(p.edges, k)
			n--
			p.evicted++
		}
	}
	clear(p.cache[:])
}

// Forget drops the edges not observed since before, such as those whose
// weight has decayed to nothing, and reports how many it dropped.
func (m *EdgeModel) Forget(before time.Time) int {
	t := pcommon.NewTimestampFromTime(before)
	n := 0
	for i := range m.parts {
		p := &m.parts[i]
		p.mu.Lock()
		dropped := 0
		for k, e := range p.edges {
			if e.last < t {
				delete(p.edges, k)
				dropped++
			}
		}
		if dropped > 0 {
			clear(p.cache[:])
		}
		p.mu.Unlock()
		n += dropped
	}
	return n
}

// Evicted reports how many edges the bound made the model forget.
func (m *EdgeModel) Evicted() uint64 {
	var n uint64
	for i := range m.parts {
		p := &m.parts[i]
		p.mu.RLock()
		n += p.evicted
		p.mu.RUnlock()
	}
	return n
}

// Mode returns the edge's mode.
func (m *EdgeModel) Mode(k EdgeKey) ownership.Mode {
	return m.Estimate(k).Mode
}

// Estimate returns the edge's counts, summed over the parts and weighted
// by age at the newest span seen, and its mode.
func (m *EdgeModel) Estimate(k EdgeKey) Estimate {
	var c EdgeCounts
	for i := range m.parts {
		p := &m.parts[i]
		p.mu.RLock()
		if e, ok := p.edges[k]; ok {
			c.add(m.unscale(p, e.counts))
		}
		p.mu.RUnlock()
	}
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
// P(request fails | call failed alone) on the weighted counts reaches
// FailCloseThreshold, fail-open when its upper bound is at most
// FailOpenThreshold, else unknown.
func (c ModelConfig) judge(counts EdgeCounts, z float64) Estimate {
	est := Estimate{Counts: counts, Lower: 0, Upper: 1}
	n := counts.Failed
	if n <= 0 {
		return est
	}
	est.Lower, est.Upper = Wilson(counts.FailedRequestFailed, n, z)
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
// order. A part's lock is held only while its edges are copied.
func (m *EdgeModel) Edges(fn func(k EdgeKey, est Estimate, addresses []Symbol)) {
	type edge struct {
		c EdgeCounts
		a []Symbol
	}
	all := make(map[EdgeKey]*edge)
	for i := range m.parts {
		p := &m.parts[i]
		p.mu.RLock()
		for k, e := range p.edges {
			x := all[k]
			if x == nil {
				x = &edge{}
				all[k] = x
			}
			x.c.add(m.unscale(p, e.counts))
			for _, a := range e.addressList() {
				if !slices.Contains(x.a, a) {
					x.a = append(x.a, a)
				}
			}
		}
		p.mu.RUnlock()
	}
	for k, x := range all {
		fn(k, m.Judge(x.c), x.a)
	}
}

// Len reports how many edges the model tracks.
func (m *EdgeModel) Len() int {
	if len(m.parts) == 1 {
		p := &m.parts[0]
		p.mu.RLock()
		defer p.mu.RUnlock()
		return len(p.edges)
	}
	n := 0
	m.Edges(func(EdgeKey, Estimate, []Symbol) { n++ })
	return n
}

// Symbols calls keep for every symbol the model holds, so that a sweep of
// the symbol table (Symbols.Sweep) keeps them.
func (m *EdgeModel) Symbols(keep func(Symbol)) {
	for i := range m.parts {
		p := &m.parts[i]
		p.mu.RLock()
		for k, e := range p.edges {
			k.symbols(keep)
			for _, a := range e.addresses {
				keep(a)
			}
		}
		p.mu.RUnlock()
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
