// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/ownership"
)

func TestWilson(t *testing.T) {
	tests := []struct {
		name         string
		k, n         float64
		lower, upper float64
	}{
		{"no trials", 0, 0, 0, 1},
		{"all of 20", 20, 20, 0.8389, 1},
		{"none of 20", 0, 20, 0, 0.1611},
		{"half of 100", 50, 100, 0.4038, 0.5962},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := Wilson(tt.k, tt.n, 1.959964)
			assert.InDelta(t, tt.lower, lo, 1e-3)
			assert.InDelta(t, tt.upper, hi, 1e-3)
		})
	}
}

// observeN feeds the model n requests of service a calling b at time at.
func observeN(m *EdgeModel, n int, callFailed, reqFailed bool, at time.Duration) {
	a := NewAnalyzer()
	for range n {
		tr := a.Link(testTrace, records(
			sp{id: 1, kind: KindServer, svc: "a", op: "GET /a", start: int(at / time.Millisecond), end: int(at/time.Millisecond) + 1, failed: reqFailed},
			sp{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET /b", peer: "b", start: int(at / time.Millisecond), end: int(at / time.Millisecond), failed: callFailed},
		))
		m.Observe(tr)
	}
}

var edgeAB = EdgeKey{sym("a"), sym("GET /a"), sym("b"), sym("GET /b")}

func TestEdgeModelModes(t *testing.T) {
	cfg := DefaultConfig().EdgeModel
	cfg.HalfLife = 0
	tests := []struct {
		name              string
		failedAndFailed   int
		failedButSurvived int
		succeeded         int
		want              ownership.Mode
	}{
		{"no samples", 0, 0, 50, ownership.ModeUnknown},
		{"too few samples", 19, 0, 0, ownership.ModeUnknown},
		{"fail-close at the minimum", 20, 0, 0, ownership.ModeFailClose},
		{"fail-open at the minimum", 0, 20, 0, ownership.ModeFailOpen},
		{"mostly fail-close", 95, 5, 0, ownership.ModeFailClose},
		{"mostly fail-open", 5, 95, 0, ownership.ModeFailOpen},
		{"in between", 50, 50, 0, ownership.ModeUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewEdgeModel(cfg)
			observeN(m, tt.failedAndFailed, true, true, time.Second)
			observeN(m, tt.failedButSurvived, true, false, time.Second)
			observeN(m, tt.succeeded, false, false, time.Second)
			est := m.Estimate(edgeAB)
			assert.Equal(t, tt.want, est.Mode)
			assert.InDelta(t, tt.failedAndFailed+tt.failedButSurvived, est.Counts.Failed, 1e-9)
			assert.InDelta(t, tt.succeeded, est.Counts.OK, 1e-9)
		})
	}
}

func TestEdgeModelFollowsChange(t *testing.T) {
	cfg := DefaultConfig().EdgeModel
	cfg.HalfLife = time.Minute
	m := NewEdgeModel(cfg)
	observeN(m, 100, true, false, time.Minute)
	assert.Equal(t, ownership.ModeFailOpen, m.Mode(edgeAB), "tolerated at first")

	// The service stops tolerating the failure: ten half-lives later the old
	// observations weigh a thousandth and the edge turns fail-close.
	observeN(m, 50, true, true, 11*time.Minute)
	est := m.Estimate(edgeAB)
	assert.Equal(t, ownership.ModeFailClose, est.Mode)
	assert.InDelta(t, 50+100*math.Exp2(-10), est.Counts.Failed, 1e-6)

	// Observations that arrive late weigh by their age.
	observeN(m, 1, true, false, 10*time.Minute)
	assert.InDelta(t, 50+100*math.Exp2(-10)+0.5, m.Estimate(edgeAB).Counts.Failed, 1e-6)
}

func TestEdgeModelForgetsTheLeastRecentWhenFull(t *testing.T) {
	// Eight edges fill the model; a ninth, new one must still be learned
	// (the model does not freeze), and the edge seen longest ago goes.
	m := NewEdgeModel(DefaultConfig().EdgeModel, WithMaxEdges(8))
	a := NewAnalyzer()
	observe := func(peer string, atMillis int) {
		m.Observe(a.Link(testTrace, records(
			sp{id: 1, kind: KindServer, svc: "x", op: "GET /x", start: atMillis, end: atMillis + 1},
			sp{id: 2, parent: 1, kind: KindClient, svc: "x", op: "GET", peer: peer, start: atMillis, end: atMillis},
		)))
	}
	for i := range 8 {
		observe(fmt.Sprintf("peer-%d", i), 1000*(i+1))
	}
	require.Equal(t, 8, m.Len())
	observe("newcomer", 20_000)
	assert.Equal(t, 8, m.Len())
	assert.Equal(t, uint64(1), m.Evicted())
	keys := map[string]bool{}
	m.Edges(func(k EdgeKey, _ Estimate, _ []Symbol) { keys[testSymbols.Name(k.PeerService)] = true })
	assert.True(t, keys["newcomer"], "the new edge is learned")
	assert.False(t, keys["peer-0"], "the edge seen longest ago is forgotten")
}

func TestEdgeModelRebasesLongRuns(t *testing.T) {
	cfg := DefaultConfig().EdgeModel
	cfg.HalfLife = time.Millisecond
	m := NewEdgeModel(cfg)
	observeN(m, 30, true, true, time.Millisecond)
	// 2,000 half-lives later the old counts have faded to nothing and the
	// scaled weights have not overflowed.
	observeN(m, 25, true, false, 2*time.Second)
	est := m.Estimate(edgeAB)
	assert.InDelta(t, 25, est.Counts.Failed, 1e-9)
	assert.InDelta(t, 0, est.Counts.FailedRequestFailed, 1e-9)
	assert.Equal(t, ownership.ModeFailOpen, est.Mode)
}

// checkoutRequest links one request of service checkout at atMillis with a call to
// recommendations and one to payments.
func checkoutRequest(a *Analyzer, atMillis int, recsFailed, paymentsFailed, failed bool) *Trace {
	return a.Link(testTrace, records(
		sp{id: 1, kind: KindServer, svc: "checkout", op: "POST /checkout", start: atMillis, end: atMillis + 10, failed: failed},
		sp{id: 2, parent: 1, kind: KindClient, svc: "checkout", op: "GET", peer: "recommendations", peerOp: "GET /recs", start: atMillis + 1, end: atMillis + 2, failed: recsFailed},
		sp{id: 3, parent: 1, kind: KindClient, svc: "checkout", op: "POST", peer: "payments", peerOp: "POST /pay", start: atMillis + 3, end: atMillis + 4, failed: paymentsFailed},
	))
}

var edgeRecs = EdgeKey{sym("checkout"), sym("POST /checkout"), sym("recommendations"), sym("GET /recs")}

// TestEdgeModelIsNotConfounded: checkout tolerates recommendations failing,
// but often fails through payments at the same time. Those requests say
// nothing about recommendations; judged on the requests where it failed
// alone, it is fail-open.
func TestEdgeModelIsNotConfounded(t *testing.T) {
	cfg := DefaultConfig().EdgeModel
	cfg.HalfLife = 0
	m := NewEdgeModel(cfg)
	a := NewAnalyzer()
	for i := range 100 {
		m.Observe(checkoutRequest(a, i, true, true, true)) // both failed: payments failed it
	}
	for i := range 30 {
		m.Observe(checkoutRequest(a, 1000+i, true, false, false)) // recommendations alone: tolerated
	}
	est := m.Estimate(edgeRecs)
	assert.Equal(t, ownership.ModeFailOpen, est.Mode, "P(fail | recs failed) over all requests would be 100/130")
	assert.InDelta(t, 30, est.Counts.Failed, 1e-9)
	assert.InDelta(t, 0, est.Counts.FailedRequestFailed, 1e-9)
}

// TestEdgeModelClockAhead: one span from a host whose clock is a day ahead
// must not age every other host's evidence to nothing.
func TestEdgeModelClockAhead(t *testing.T) {
	cfg := DefaultConfig().EdgeModel // a 10-minute half-life
	collectorNow := time.Unix(0, 0).Add(time.Hour)
	m := NewEdgeModel(cfg, WithClock(func() time.Time { return collectorNow }))
	observeN(m, 50, true, false, time.Hour)
	observeN(m, 1, true, false, 25*time.Hour) // a day ahead of the collector
	est := m.Estimate(edgeAB)
	assert.InDelta(t, 51, est.Counts.Failed, 1e-6, "the future span counts as made now")
	assert.Equal(t, ownership.ModeFailOpen, est.Mode)
}

// TestMinSamplesCountsRequests: min_samples is compared with the requests
// observed, not with their decayed weight. Thirty tolerated failures thirty
// seconds apart weigh about 19 at a ten-minute half-life: enough for a
// confident fail-open, and 30 ≥ 20 samples.
func TestMinSamplesCountsRequests(t *testing.T) {
	m := NewEdgeModel(DefaultConfig().EdgeModel)
	for i := range 30 {
		observeN(m, 1, true, false, time.Duration(i)*30*time.Second)
	}
	est := m.Estimate(edgeAB)
	assert.InDelta(t, 30, est.Counts.Samples, 1e-9)
	assert.Less(t, est.Counts.Failed, 20.0, "the weights")
	assert.Equal(t, ownership.ModeFailOpen, est.Mode)
}

// TestEdgeModelLearnsFromGoroutinesAtOnce: traces learned by several
// goroutines at once give the estimates one goroutine learning them all
// gives, with decay and without.
func TestEdgeModelLearnsFromGoroutinesAtOnce(t *testing.T) {
	for _, halfLife := range []time.Duration{0, time.Minute} {
		t.Run(fmt.Sprint("half-life ", halfLife), func(t *testing.T) {
			cfg := DefaultConfig().EdgeModel
			cfg.HalfLife = halfLife
			whole, parted := NewEdgeModel(cfg), NewEdgeModel(cfg)
			type obs struct {
				callFailed, reqFailed bool
				at                    time.Duration
			}
			var all []obs
			for i := range 90 {
				all = append(all, obs{i%3 != 0, i%4 == 0, time.Duration(i) * time.Second})
			}
			for _, o := range all {
				observeN(whole, 1, o.callFailed, o.reqFailed, o.at)
			}
			var wg sync.WaitGroup
			for part := range 3 {
				wg.Go(func() {
					a := NewAnalyzer()
					for i := part; i < len(all); i += 3 {
						o := all[i]
						ms := int(o.at / time.Millisecond)
						parted.Observe(a.Link(testTrace, records(
							sp{id: 1, kind: KindServer, svc: "a", op: "GET /a", start: ms, end: ms + 1, failed: o.reqFailed},
							sp{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET /b", peer: "b", start: ms, end: ms, failed: o.callFailed},
						)))
					}
				})
			}
			wg.Wait()
			want, got := whole.Estimate(edgeAB), parted.Estimate(edgeAB)
			assert.Equal(t, want.Mode, got.Mode)
			assert.InDelta(t, want.Counts.Failed, got.Counts.Failed, 1e-9)
			assert.InDelta(t, want.Counts.FailedRequestFailed, got.Counts.FailedRequestFailed, 1e-9)
			assert.InDelta(t, want.Counts.OK, got.Counts.OK, 1e-9)
			assert.Equal(t, want.Counts.Samples, got.Counts.Samples)
			assert.Equal(t, 1, parted.Len())
			edges := 0
			parted.Edges(func(k EdgeKey, est Estimate, _ []Symbol) {
				edges++
				assert.Equal(t, edgeAB, k)
				assert.InDelta(t, want.Counts.Failed, est.Counts.Failed, 1e-9)
			})
			assert.Equal(t, 1, edges, "one edge, however many parts learned it")
		})
	}
}

// fillEdges has m observe n distinct edges once each, spread over 5,000
// services as a fleet's are.
func fillEdges(m *EdgeModel, n int, at pcommon.Timestamp) {
	for i := range n {
		k := EdgeKey{Symbol(i%5000 + 1), Symbol(i/5000 + 1), Symbol((i*7)%5000 + 1), Symbol(i%97 + 1)}
		h := k.hash()
		s := m.stripe(h)
		s.mu.Lock()
		m.observe(s, h, k, i%50 == 0, true, i%100 == 0, 1, at+pcommon.Timestamp(i))
		s.mu.Unlock()
	}
}

// TestEdgeModelMemoryPerEdge: the default bound, a million edges, fits in
// 256 MiB, and a full model stays within its bound.
func TestEdgeModelMemoryPerEdge(t *testing.T) {
	const n = 250_000
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	m := NewEdgeModel(DefaultConfig().EdgeModel)
	fillEdges(m, n, 1)
	perEdge := float64(heap()-before) / n
	runtime.KeepAlive(m)
	require.Equal(t, n, m.Len())
	t.Logf("%.0f B per edge with %d edges (%d B of state each); %d edges would take %.0f MiB",
		perEdge, n, edgeStateBytes, DefaultMaxEdges, perEdge*DefaultMaxEdges/(1<<20))
	assert.LessOrEqual(t, perEdge*DefaultMaxEdges, float64(256<<20), "the default bound's edges fit in 256 MiB")

	small := NewEdgeModel(DefaultConfig().EdgeModel, WithMaxEdges(10_000))
	fillEdges(small, 50_000, 1)
	assert.LessOrEqual(t, small.Len(), 10_000)
	assert.Greater(t, small.Len(), 8_000, "a full model forgets an eighth at a time")
	assert.Equal(t, uint64(50_000-small.Len()), small.Evicted())
}

// TestEdgeIndex adds and forgets edges of one stripe at random, against a
// map, so that the index's probe chains are long and cut in every way its
// removal must mend: every edge kept is found in its slot, none forgotten
// is.
func TestEdgeIndex(t *testing.T) {
	for _, tc := range []struct {
		name     string
		keys     int // distinct keys drawn from
		ops      int
		forgetPc int // share of operations that forget an edge
	}{
		{"grows only", 3000, 3000, 0},
		{"adds and forgets", 2000, 20000, 40},
		{"mostly forgets", 500, 20000, 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewEdgeModel(DefaultConfig().EdgeModel, WithMaxEdges(8_000)) // one stripe, never full
			require.Len(t, m.stripes, 1)
			s := &m.stripes[0]
			rng := rand.New(rand.NewPCG(1, uint64(tc.keys))) //nolint:gosec // G404: a test's draw
			key := func(i int) EdgeKey { return EdgeKey{Symbol(i%37 + 1), Symbol(i/37 + 1), 1, 1} }
			want := map[EdgeKey]uint32{}
			for range tc.ops {
				k := key(rng.IntN(tc.keys))
				h := k.hash()
				if slot, ok := want[k]; ok && rng.IntN(100) < tc.forgetPc {
					s.forget(slot, s.state(slot))
					m.edges.Add(-1) // as Forget does
					delete(want, k)
					continue
				}
				if _, ok := want[k]; !ok {
					want[k] = m.add(s, h, k)
				}
			}
			assert.Equal(t, len(want), s.index.n)
			for i := range tc.keys {
				k := key(i)
				slot, ok := s.find(k.hash(), k)
				wantSlot, kept := want[k]
				require.Equal(t, kept, ok, "edge %d found", i)
				if kept {
					require.Equal(t, wantSlot, slot, "edge %d's slot", i)
				}
			}
		})
	}
}
