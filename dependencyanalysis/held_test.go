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

// storeView is what a store holds of stats written in order: Operations
// plus Provisional per operation, zero ones left out, and the audit
// entries, each flush's withdrawals applied before its additions.
func storeView(stats ...*Stats) (map[OperationKey]VerdictCounts, map[AuditKey]AuditEntry) {
	ops := map[OperationKey]VerdictCounts{}
	audit := map[AuditKey]AuditEntry{}
	for _, s := range stats {
		for k, op := range s.Operations {
			c, n := ops[k], op.VerdictCounts()
			c.Merge(&n)
			ops[k] = c
		}
		for k, p := range s.Provisional {
			c := ops[k]
			c.Merge(p)
			ops[k] = c
		}
		for _, k := range s.Unaudit {
			delete(audit, k)
		}
		for _, e := range s.Audit {
			audit[AuditKey{e.Time, e.TraceID, e.SpanID}] = e
		}
	}
	for k, c := range ops {
		if c == (VerdictCounts{}) {
			delete(ops, k)
		}
	}
	return ops, audit
}

// TestProvisionalThenCorrect: a held request's provisional verdict counts,
// for a store, as its first judgement would with Add; its final verdict
// then adds only the correction, nothing when it counts the same, so that
// the store ends with what judging the request once by the final modes
// gives. Readers of Operations alone (metrics) see the final verdict only.
func TestProvisionalThenCorrect(t *testing.T) {
	in := sp{id: 1, kind: KindServer, svc: "checkout", op: "POST /checkout", start: 0, end: 100, failed: true, claim: ownership.ClaimUnclaimed}
	recs := sp{id: 2, parent: 1, kind: KindClient, svc: "checkout", op: "GET", peer: "recs", start: 10, end: 20, failed: true}
	open := modes{{"checkout", "recs"}: ownership.ModeFailOpen}
	closed := modes{{"checkout", "recs"}: ownership.ModeFailClose}
	tests := []struct {
		name string
		// first are the modes the provisional verdict is judged by (a
		// coincidental provisional verdict is made up: Judge holds none),
		// final those of the final judgement.
		first, final modes
		changed      bool
		unaudited    bool // the provisional audit entry withdrawn from the store
	}{
		{"propagated, then the edge turns out fail-open: coincidental", modes{}, open, true, false},
		{"propagated, then the edge turns out fail-close: it stands", modes{}, closed, false, false},
		{"propagated, and the edge still has no mode: it stands", modes{}, modes{}, false, false},
		{"coincidental, then the edge turns out fail-close: the entry withdrawn", open, closed, true, true},
		{"coincidental, and it stays so: the entry stands", open, open, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAnalyzer()
			tr := a.Link(testTrace, records(in, recs))
			provisional := NewAnalyzer().Judge(tr, tc.first)
			require.Len(t, provisional, 1)
			h := Hold(tr, &provisional[0], time.Now())
			final, _ := h.Rejudge(tc.final)
			judgedFirst, judgedFinal := NewStats(), NewStats()
			judgedFirst.Add(tr, provisional)
			judgedFinal.Add(tr, NewAnalyzer().Judge(tr, tc.final))

			first := NewStats()
			first.Add(tr, nil) // the trace, its verdict apart
			first.AddProvisional(&h)
			wantOps, wantAudit := storeView(judgedFirst)
			gotOps, gotAudit := storeView(first)
			assert.Equal(t, wantOps, gotOps, "the provisional verdict, counted as Add counts the first judgement")
			assert.Equal(t, wantAudit, gotAudit, "its audit entry")
			assert.Zero(t, first.Operations[OperationKey{sym("checkout"), sym("POST /checkout")}].Failed, "metrics wait for the final verdict")

			late := NewStats() // a later flush of the bucket
			assert.Equal(t, tc.changed, late.Correct(&h, &final), "changed")
			correction, corrAudit := storeView(late)
			if !tc.changed {
				assert.Empty(t, correction, "nothing to write when the final verdict counts the same")
				assert.Empty(t, corrAudit)
				assert.Empty(t, late.Unaudit)
			}
			assert.Equal(t, tc.unaudited, len(late.Unaudit) == 1, "the provisional entry withdrawn")
			wantOps, wantAudit = storeView(judgedFinal)
			gotOps, gotAudit = storeView(first, late)
			assert.Equal(t, wantOps, gotOps, "in the store, the request judged once by the final modes")
			assert.Equal(t, wantAudit, gotAudit, "the audit log likewise")

			metrics := NewStats()
			metrics.Merge(first)
			metrics.Merge(late)
			assert.Equal(t, judgedFinal.Operations, metrics.Operations, "Operations: the final verdict only")

			// Judged for good before its bucket was flushed: one Stats
			// holds both, and an entry withdrawn leaves it.
			both := NewStats()
			both.Add(tr, nil)
			both.AddProvisional(&h)
			both.Correct(&h, &final)
			gotOps, gotAudit = storeView(both)
			assert.Equal(t, wantOps, gotOps, "provisional and final in one bucket")
			assert.Equal(t, wantAudit, gotAudit)
			assert.Empty(t, both.Unaudit, "an entry in the same bucket is taken out, not withdrawn from the store")
			for _, e := range both.Audit {
				assert.Equal(t, ownership.ClaimUnclaimed, e.ClaimSent, "what was sent stays what was sent")
				assert.Equal(t, sym("recs"), e.PeerService)
			}
		})
	}
}

// TestMergeCarriesCorrections: merging keeps the provisional counts and
// the withdrawals, and a withdrawal meeting its entry takes it out.
func TestMergeCarriesCorrections(t *testing.T) {
	in := sp{id: 1, kind: KindServer, svc: "checkout", op: "POST /checkout", start: 0, end: 100, failed: true, claim: ownership.ClaimUnclaimed}
	recs := sp{id: 2, parent: 1, kind: KindClient, svc: "checkout", op: "GET", peer: "recs", start: 10, end: 20, failed: true}
	tr := NewAnalyzer().Link(testTrace, records(in, recs))
	vs := NewAnalyzer().Judge(tr, modes{{"checkout", "recs"}: ownership.ModeFailOpen})
	h := Hold(tr, &vs[0], time.Now())
	final, _ := h.Rejudge(modes{{"checkout", "recs"}: ownership.ModeFailClose})
	tests := []struct {
		name      string
		withEntry bool // the merged-into Stats holds the provisional entry
		audit     int
		unaudit   int
	}{
		{"the entry was flushed before: withdrawn from the store", false, 0, 1},
		{"the entry is in the same bucket: taken out", true, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			into := NewStats()
			if tc.withEntry {
				into.AddProvisional(&h)
			}
			late := NewStats()
			late.Correct(&h, &final)
			into.Merge(late)
			assert.Len(t, into.Audit, tc.audit)
			assert.Len(t, into.Unaudit, tc.unaudit)
			k := OperationKey{sym("checkout"), sym("POST /checkout")}
			require.Contains(t, into.Provisional, k)
			want := int64(-1)
			if tc.withEntry {
				want = 0
			}
			assert.Equal(t, want, into.Provisional[k].Verdicts[VerdictCoincidental])
			into.Reset()
			assert.True(t, into.Empty())
		})
	}
}

// TestHeldSize keeps HeldBytes, the stated memory bound, true.
func TestHeldSize(t *testing.T) {
	assert.LessOrEqual(t, int(unsafe.Sizeof(Held{})), HeldBytes)
	assert.LessOrEqual(t, int(unsafe.Sizeof(HeldCall{})), HeldCallBytes)
}
