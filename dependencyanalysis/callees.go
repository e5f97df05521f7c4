// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// calleeKey names a destination a service calls, by the address or the peer
// name its own outbound spans give.
type calleeKey struct {
	service, dest Symbol
}

// Callees remembers the destinations seen answering a call with an inbound
// span of their own: instrumented callees, whose inbound span a whole trace
// has wherever they answered. It is safe for concurrent use.
type Callees struct {
	limit int
	mu    sync.RWMutex
	last  map[calleeKey]pcommon.Timestamp
}

// NewCallees returns an empty memory of at most limit destinations (limit
// <= 0: DefaultMaxEdges); past it, new destinations are not remembered and
// their callers' traces are judged as they come.
func NewCallees(limit int) *Callees {
	if limit <= 0 {
		limit = DefaultMaxEdges
	}
	return &Callees{limit: limit, last: make(map[calleeKey]pcommon.Timestamp)}
}

// calleeRefresh is how stale a destination's last sighting may grow before
// an observation takes the write lock to move it.
const calleeRefresh = pcommon.Timestamp(time.Minute)

// Check remembers the destinations t's calls reached with their inbound
// span in the trace, and sets t apart as IncompleteMissingCallee if a
// client attempt was answered (Span.Answered) by a destination known so to
// be instrumented while its inbound span is missing: the callee's spans were
// sampled out below, or went elsewhere, and judging the caller from what
// remains would take a failure it passed on for its own. Call it after Link
// and before Observe and Judge, for every trace, whole or not. A destination
// is known once a trace has shown it; its callers' traces before that one
// are judged as they come.
func (c *Callees) Check(t *Trace) {
	missing := false
	for ci := range t.Calls {
		call := &t.Calls[ci]
		svc := t.Spans[t.Requests[call.Request].Span].Service
		for _, ai := range t.CallAttempts(call) {
			s := &t.Spans[ai]
			if s.Kind != KindClient {
				continue
			}
			if t.Callee[ai] >= 0 {
				at := s.End()
				c.see(calleeKey{svc, s.PeerAddress}, at)
				c.see(calleeKey{svc, s.PeerService}, at)
				continue
			}
			if s.Answered() && !missing {
				missing = c.known(calleeKey{svc, s.PeerAddress}) || c.known(calleeKey{svc, s.PeerService})
			}
		}
	}
	if missing && t.Incomplete == IncompleteNone {
		t.Incomplete = IncompleteMissingCallee
	}
}

func (c *Callees) known(k calleeKey) bool {
	if k.dest == NoSymbol {
		return false
	}
	c.mu.RLock()
	_, ok := c.last[k]
	c.mu.RUnlock()
	return ok
}

// see records a sighting of k at at.
func (c *Callees) see(k calleeKey, at pcommon.Timestamp) {
	if k.dest == NoSymbol {
		return
	}
	c.mu.RLock()
	last, ok := c.last[k]
	c.mu.RUnlock()
	if ok && last+calleeRefresh > at {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.last[k]; !ok && len(c.last) >= c.limit {
		return
	}
	c.last[k] = max(c.last[k], at)
}

// Forget drops the destinations not seen since before.
func (c *Callees) Forget(before time.Time) {
	t := pcommon.NewTimestampFromTime(before)
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, at := range c.last {
		if at < t {
			delete(c.last, k)
		}
	}
}

// Symbols calls keep for every symbol c holds, so that a sweep of the
// symbol table (Symbols.Sweep) keeps them.
func (c *Callees) Symbols(keep func(Symbol)) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for k := range c.last {
		keep(k.service)
		keep(k.dest)
	}
}
