// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/ownership"
)

// TestHoldAndRejudge: a failure judged while its edge had no mode is held,
// and judged again as Judge would judge it once the edge has one.
func TestHoldAndRejudge(t *testing.T) {
	in := sp{id: 1, kind: KindServer, svc: "checkout", op: "POST /checkout", start: 0, end: 100, failed: true, claim: ownership.ClaimUnclaimed}
	recs := sp{id: 2, parent: 1, kind: KindClient, svc: "checkout", op: "GET", peer: "recs", start: 10, end: 20, failed: true, claimRx: ownership.ClaimClaimed}
	pay := sp{id: 3, parent: 1, kind: KindClient, svc: "checkout", op: "POST", peer: "payments", start: 30, end: 40, failed: true, claimRx: ownership.ClaimClaimed}
	tests := []struct {
		name      string
		calls     []sp
		atFirst   modes
		later     modes
		unsettled bool // at first
		settled   bool // later
		kind      VerdictKind
	}{
		{"the edge turns out fail-open: coincidental", []sp{recs}, modes{}, modes{{"checkout", "recs"}: ownership.ModeFailOpen}, true, true, VerdictCoincidental},
		{"the edge turns out fail-close: propagated", []sp{recs}, modes{}, modes{{"checkout", "recs"}: ownership.ModeFailClose}, true, true, VerdictPropagated},
		{"the edge still has no mode", []sp{recs}, modes{}, modes{}, true, false, VerdictPropagated},
		{"one of two edges learned fail-open, the other not yet", []sp{recs, pay}, modes{}, modes{{"checkout", "recs"}: ownership.ModeFailOpen}, true, false, VerdictPropagated},
		{"both learned: fail-open and fail-close", []sp{recs, pay}, modes{},
			modes{{"checkout", "recs"}: ownership.ModeFailOpen, {"checkout", "payments"}: ownership.ModeFailClose}, true, true, VerdictPropagated},
		{"a fail-close edge already failed: settled at once", []sp{recs, pay}, modes{{"checkout", "payments"}: ownership.ModeFailClose}, nil, false, true, VerdictPropagated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAnalyzer()
			tr := a.Link(testTrace, records(append([]sp{in}, tc.calls...)...))
			vs := a.Judge(tr, tc.atFirst)
			require.Len(t, vs, 1)
			assert.Equal(t, tc.unsettled, vs[0].Unsettled, "unsettled at first")
			if !tc.unsettled {
				return
			}
			h := Hold(tr, &vs[0], time.Now())
			v, settled := h.Rejudge(tc.later)
			assert.Equal(t, tc.settled, settled, "settled later")
			assert.Equal(t, tc.kind, v.Kind, "the verdict judged again")
			// Judge with the later modes gives the same.
			again := NewAnalyzer().Judge(tr, tc.later)
			assert.Equal(t, again[0].Kind, v.Kind)
			assert.Equal(t, again[0].Reason, v.Reason)
			assert.Equal(t, again[0].Expected, v.Expected)
		})
	}
}

// TestAddHeld: the final verdict of a held request counts as Add counts a
// verdict, the audit entry included, with the claim sent at the time.
func TestAddHeld(t *testing.T) {
	in := sp{id: 1, kind: KindServer, svc: "checkout", op: "POST /checkout", start: 0, end: 100, failed: true, claim: ownership.ClaimUnclaimed}
	recs := sp{id: 2, parent: 1, kind: KindClient, svc: "checkout", op: "GET", peer: "recs", start: 10, end: 20, failed: true}
	a := NewAnalyzer()
	tr := a.Link(testTrace, records(in, recs))
	vs := a.Judge(tr, modes{})
	h := Hold(tr, &vs[0], time.Now())
	later := modes{{"checkout", "recs"}: ownership.ModeFailOpen}

	held := NewStats()
	held.Add(tr, nil) // the trace counted at once, its verdict not
	v, _ := h.Rejudge(later)
	held.AddHeld(&h, &v)

	direct := NewStats()
	direct.Add(tr, NewAnalyzer().Judge(tr, later))
	assert.Equal(t, direct.Operations, held.Operations)
	require.Len(t, held.Audit, 1)
	assert.Equal(t, direct.Audit, held.Audit)
	assert.Equal(t, ownership.ClaimUnclaimed, held.Audit[0].ClaimSent, "what was sent stays what was sent")
	assert.Equal(t, sym("recs"), held.Audit[0].PeerService)
}

// TestHeldSize keeps HeldBytes, the stated memory bound, true.
func TestHeldSize(t *testing.T) {
	assert.LessOrEqual(t, int(unsafe.Sizeof(Held{})), HeldBytes)
	assert.LessOrEqual(t, int(unsafe.Sizeof(HeldCall{})), HeldCallBytes)
}
