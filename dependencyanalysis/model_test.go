package dependencyanalysis

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
		tr := a.Link(records(1,
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
		want              Mode
	}{
		{"no samples", 0, 0, 50, ModeUnknown},
		{"too few samples", 19, 0, 0, ModeUnknown},
		{"fail-close at the minimum", 20, 0, 0, ModeFailClose},
		{"fail-open at the minimum", 0, 20, 0, ModeFailOpen},
		{"mostly fail-close", 95, 5, 0, ModeFailClose},
		{"mostly fail-open", 5, 95, 0, ModeFailOpen},
		{"in between", 50, 50, 0, ModeUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewEdgeModel(cfg, 0)
			observeN(m, tt.failedAndFailed, true, true, time.Second)
			observeN(m, tt.failedButSurvived, true, false, time.Second)
			observeN(m, tt.succeeded, false, false, time.Second)
			est := m.Estimate(edgeAB)
			assert.Equal(t, tt.want, est.Mode)
			assert.InDelta(t, tt.failedAndFailed+tt.failedButSurvived, est.Counts.CallFailed, 1e-9)
			assert.InDelta(t, tt.succeeded, est.Counts.CallOK, 1e-9)
		})
	}
}

func TestEdgeModelFollowsChange(t *testing.T) {
	cfg := DefaultConfig().EdgeModel
	cfg.HalfLife = time.Minute
	m := NewEdgeModel(cfg, 0)
	observeN(m, 100, true, false, time.Minute)
	assert.Equal(t, ModeFailOpen, m.Mode(edgeAB), "tolerated at first")

	// The service stops tolerating the failure: ten half-lives later the old
	// observations weigh a thousandth and the edge turns fail-close.
	observeN(m, 50, true, true, 11*time.Minute)
	est := m.Estimate(edgeAB)
	assert.Equal(t, ModeFailClose, est.Mode)
	assert.InDelta(t, 50+100*math.Exp2(-10), est.Counts.CallFailed, 1e-6)

	// Observations that arrive late weigh by their age.
	observeN(m, 1, true, false, 10*time.Minute)
	assert.InDelta(t, 50+100*math.Exp2(-10)+0.5, m.Estimate(edgeAB).Counts.CallFailed, 1e-6)
}

func TestEdgeModelIsBounded(t *testing.T) {
	m := NewEdgeModel(DefaultConfig().EdgeModel, 1)
	observeN(m, 1, true, true, 0)
	a := NewAnalyzer()
	m.Observe(a.Link(records(1,
		sp{id: 1, kind: KindServer, svc: "x", op: "GET /x"},
		sp{id: 2, parent: 1, kind: KindClient, svc: "x", op: "GET", peer: "y"},
	)))
	assert.Equal(t, 1, m.Len())
}

func TestEdgeModelRebasesLongRuns(t *testing.T) {
	cfg := DefaultConfig().EdgeModel
	cfg.HalfLife = time.Millisecond
	m := NewEdgeModel(cfg, 0)
	observeN(m, 30, true, true, time.Millisecond)
	// 2,000 half-lives later the old counts have faded to nothing and the
	// scaled weights have not overflowed.
	observeN(m, 25, true, false, 2*time.Second)
	est := m.Estimate(edgeAB)
	assert.InDelta(t, 25, est.Counts.CallFailed, 1e-9)
	assert.InDelta(t, 0, est.Counts.CallFailedRequestFailed, 1e-9)
	assert.Equal(t, ModeFailOpen, est.Mode)
}
