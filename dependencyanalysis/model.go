package dependencyanalysis

import (
	"math"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Mode is what the edge model knows about an edge.
type Mode uint8

// The modes.
const (
	// ModeUnknown: too few samples, or behaviour between the thresholds.
	// The verdict rules treat an unknown edge as fail-close.
	ModeUnknown Mode = iota
	// ModeFailClose: when the call fails, the request fails.
	ModeFailClose
	// ModeFailOpen: the service tolerates the call failing.
	ModeFailOpen
)

var modeNames = [...]string{"unknown", "fail_close", "fail_open"}

// String returns "unknown", "fail_close" or "fail_open".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "unknown"
}

// ParseMode reads a Mode's String form; anything else is ModeUnknown.
func ParseMode(s string) Mode {
	for m, name := range modeNames {
		if name == s {
			return Mode(m)
		}
	}
	return ModeUnknown
}

// EdgeKey names an edge: (service, inbound operation) → (peer service, peer operation).
type EdgeKey struct {
	Service, Operation, PeerService, PeerOperation Symbol
}

// EdgeCounts are an edge's observations, weighted by age when the model decays.
type EdgeCounts struct {
	// CallFailed counts requests in which the logical call failed, and
	// CallFailedRequestFailed those of them in which the request failed too.
	CallFailed, CallFailedRequestFailed float64
	// CallOK counts requests in which the call succeeded, and
	// CallOKRequestFailed those of them in which the request failed anyway.
	CallOK, CallOKRequestFailed float64
}

func (c *EdgeCounts) scale(f float64) {
	c.CallFailed *= f
	c.CallFailedRequestFailed *= f
	c.CallOK *= f
	c.CallOKRequestFailed *= f
}

// Estimate is the model's judgement of one edge.
type Estimate struct {
	Mode   Mode
	Counts EdgeCounts
	// Lower and Upper bound P(request fails | call failed) at the configured
	// confidence (Wilson score interval); 0 and 1 without samples.
	Lower, Upper float64
}

// Modes tells the verdict rules an edge's mode. EdgeModel implements it; so
// can a model merged from several collectors.
type Modes interface {
	Mode(EdgeKey) Mode
}

// EdgeModel learns per edge whether a call's failure fails the request. It
// is safe for concurrent use. Time is the traces' own: observations fade
// with the age of their spans relative to the newest span seen, so the
// model behaves the same live and over a file.
//
// Decay costs one exponential per request, not per edge and observation:
// counts are kept scaled by 2^((t−epoch)/half-life) at the time t of each
// observation and scaled back when read; the epoch moves forward (rescaling
// every edge once) long before the scale could overflow.
type EdgeModel struct {
	cfg     ModelConfig
	z       float64
	mu      sync.RWMutex
	edges   map[EdgeKey]*EdgeCounts
	cache   [1024]modelSlot // in front of edges, as in Stats; under mu
	epoch   pcommon.Timestamp
	newest  pcommon.Timestamp
	maxSize int
}

// rebaseAfter is how many half-lives past the epoch a weight may reach
// before the epoch moves: 2^500 is far from float64's 2^1023.
const rebaseAfter = 500

// NewEdgeModel returns an empty model; cfg must be valid (Config.Validate).
// It tracks at most maxEdges edges (<= 0: 100,000); observations of new
// edges past that are ignored.
func NewEdgeModel(cfg ModelConfig, maxEdges int) *EdgeModel {
	if maxEdges <= 0 {
		maxEdges = 100_000
	}
	return &EdgeModel{
		cfg:     cfg,
		z:       cfg.z(),
		edges:   make(map[EdgeKey]*EdgeCounts),
		maxSize: maxEdges,
	}
}

// halfLives is how many half-lives from the epoch to t (negative before it).
func (m *EdgeModel) halfLives(t pcommon.Timestamp) float64 {
	return (float64(t) - float64(m.epoch)) / float64(m.cfg.HalfLife)
}

// weight is the scaled weight of an observation at t. Call with mu held.
func (m *EdgeModel) weight(t pcommon.Timestamp) float64 {
	if m.cfg.HalfLife <= 0 {
		return 1
	}
	if m.epoch == 0 {
		m.epoch = t
	}
	if h := m.halfLives(t); h > rebaseAfter {
		shift := math.Exp2(-h)
		for _, c := range m.edges {
			c.scale(shift)
		}
		m.epoch = t
	}
	return math.Exp2(m.halfLives(t))
}

// unscale turns stored counts into counts weighted by age at the newest span.
func (m *EdgeModel) unscale(c EdgeCounts) EdgeCounts {
	if m.cfg.HalfLife > 0 {
		c.scale(math.Exp2(-m.halfLives(m.newest)))
	}
	return c
}

// Observe learns from every logical call of a linked trace.
func (m *EdgeModel) Observe(t *Trace) {
	if len(t.Calls) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for ri := range t.Requests {
		r := &t.Requests[ri]
		if r.CallsStart == r.CallsEnd {
			continue
		}
		req := &t.Spans[r.Span]
		w := m.weight(req.End)
		m.newest = max(m.newest, req.End)
		for ci := r.CallsStart; ci < r.CallsEnd; ci++ {
			c := &t.Calls[ci]
			m.observe(EdgeKey{req.Service, req.Operation, c.PeerService, c.PeerOperation}, c.Failed, req.Failed(), w)
		}
	}
}

type modelSlot struct {
	k EdgeKey
	c *EdgeCounts
}

func (m *EdgeModel) observe(k EdgeKey, callFailed, reqFailed bool, w float64) {
	slot := &m.cache[(mix(k.Service, k.Operation)^mix(k.PeerService, k.PeerOperation)*31)%uint32(len(m.cache))]
	c := slot.c
	if c == nil || slot.k != k {
		var ok bool
		if c, ok = m.edges[k]; !ok {
			if len(m.edges) >= m.maxSize {
				return
			}
			c = new(EdgeCounts)
			m.edges[k] = c
		}
		*slot = modelSlot{k, c}
	}
	if callFailed {
		c.CallFailed += w
		if reqFailed {
			c.CallFailedRequestFailed += w
		}
		return
	}
	c.CallOK += w
	if reqFailed {
		c.CallOKRequestFailed += w
	}
}

// Mode returns the edge's mode.
func (m *EdgeModel) Mode(k EdgeKey) Mode {
	return m.Estimate(k).Mode
}

// Estimate returns the edge's counts, weighted by age at the newest span
// seen, and its mode.
func (m *EdgeModel) Estimate(k EdgeKey) Estimate {
	m.mu.RLock()
	var c EdgeCounts
	if e, ok := m.edges[k]; ok {
		c = m.unscale(*e)
	}
	m.mu.RUnlock()
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

func (c ModelConfig) judge(counts EdgeCounts, z float64) Estimate {
	est := Estimate{Counts: counts, Lower: 0, Upper: 1}
	n := counts.CallFailed
	if n <= 0 {
		return est
	}
	est.Lower, est.Upper = Wilson(counts.CallFailedRequestFailed, n, z)
	if n+1e-9 < float64(c.MinSamples) {
		return est
	}
	switch {
	case est.Lower >= c.FailCloseThreshold:
		est.Mode = ModeFailClose
	case est.Upper <= c.FailOpenThreshold:
		est.Mode = ModeFailOpen
	}
	return est
}

// Edges calls fn for every edge with its estimate, in no particular order.
func (m *EdgeModel) Edges(fn func(EdgeKey, Estimate)) {
	type kc struct {
		k EdgeKey
		c EdgeCounts
	}
	m.mu.RLock()
	all := make([]kc, 0, len(m.edges))
	for k, e := range m.edges {
		all = append(all, kc{k, m.unscale(*e)})
	}
	m.mu.RUnlock()
	for _, x := range all {
		fn(x.k, m.Judge(x.c))
	}
}

// Len reports how many edges the model tracks.
func (m *EdgeModel) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.edges)
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
