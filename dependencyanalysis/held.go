// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/ownership"
)

// Held is a failed request whose verdict was unsettled (Verdict.Unsettled):
// it rested on edges that had no mode yet, as every new edge has while the
// model learns it. It is kept compactly — what the verdict, the claim
// accuracy and the audit need, not the trace — and judged again when the
// model gives its edges a mode, or finally when it is too old to wait.
// Meanwhile its first verdict is counted provisionally (AddProvisional),
// so that a holder that dies before the final judgement leaves a verdict
// for every request it counted; the final one then corrects it (Correct).
type Held struct {
	// At is when it was held, by the clock of whoever holds it.
	At time.Time
	// Time is when the request ended, the audit entry's time.
	Time               pcommon.Timestamp
	TraceID            pcommon.TraceID
	SpanID             pcommon.SpanID
	Service, Operation Symbol
	// Sent is the claim the service sent at the time: it stays what was
	// sent, and claim accuracy counts it against the final verdict.
	Sent ownership.Claim
	// Provisional and ProvisionalExpected are the verdict and the claim
	// expected that the first judgement gave, as AddProvisional counted
	// them: what Correct takes back.
	Provisional         VerdictKind
	ProvisionalExpected ownership.Claim
	// Weight is the adjusted count of the request's trace, and Method
	// how it was known.
	Weight float64
	Method SamplingMethod
	Calls  []HeldCall
}

// HeldCall is one failed call of a held request.
type HeldCall struct {
	PeerService, PeerOperation Symbol
	Claim                      ownership.Claim
	Decision                   ownership.RetryDecision
}

// HeldBytes is what a held request takes in memory besides HeldCallBytes
// per failed call: a holder's bound is its count times their sum.
const (
	HeldBytes     = 160
	HeldCallBytes = 24
)

// Hold returns v, a verdict on a request of t, as a held request whose
// provisional verdict is v.
func Hold(t *Trace, v *Verdict, at time.Time) Held {
	req := t.RequestSpan(&t.Requests[v.Request])
	h := Held{
		At: at, Time: req.End(), TraceID: t.ID, SpanID: req.SpanID,
		Service: req.Service, Operation: req.Operation, Sent: v.Sent,
		Provisional: v.Kind, ProvisionalExpected: v.Expected, Weight: t.Weight, Method: t.Sampling.Method(),
		Calls: make([]HeldCall, len(v.FailedCalls)),
	}
	for i, ci := range v.FailedCalls {
		c := &t.Calls[ci]
		h.Calls[i] = HeldCall{PeerService: c.PeerService, PeerOperation: c.PeerOperation, Claim: c.Claim, Decision: c.Decision}
	}
	return h
}

// Rejudge judges h again by m, as Judge would have with m: settled is
// false while it still rests on edges without a mode. The verdict's
// FailedCalls index h.Calls.
func (h *Held) Rejudge(m Modes) (v Verdict, settled bool) {
	var tally callTally
	v.Sent = h.Sent
	for i := range h.Calls {
		c := &h.Calls[i]
		tally.add(m.Mode(EdgeKey{h.Service, h.Operation, c.PeerService, c.PeerOperation}), c.Claim, c.Decision)
		v.FailedCalls = append(v.FailedCalls, int32(i))
	}
	v.Kind, v.Reason, v.Expected = tally.verdict(false, len(h.Calls))
	v.Unsettled = tally.unknown > 0 && tally.closed == tally.unknown
	return v, !v.Unsettled
}

// Symbols calls keep for every symbol h holds.
func (h *Held) Symbols(keep func(Symbol)) {
	keep(h.Service)
	keep(h.Operation)
	for i := range h.Calls {
		keep(h.Calls[i].PeerService)
		keep(h.Calls[i].PeerOperation)
	}
}

// AddProvisional counts the provisional verdict of the held request h
// into s.Provisional, and audits it if it is coincidental, as Add counts a
// verdict: a store adds Provisional to Operations, so that the request has
// its verdict in its bucket from the start; Operations, which readers that
// only count up (metrics) read, waits for the final verdict.
func (s *Stats) AddProvisional(h *Held) {
	s.provisional(OperationKey{h.Service, h.Operation}).add(h.Provisional, h.Sent, h.ProvisionalExpected, 1, h.Weight, h.Method)
	if h.Provisional == VerdictCoincidental {
		s.audit(h.auditEntry(h.ProvisionalExpected))
	}
}

// Correct counts v, the final verdict of the held request h, in place of
// its provisional one: v into Operations, as Add counts a verdict, and the
// provisional verdict taken back from Provisional. Operations plus
// Provisional — what a store writes — then holds the correction alone,
// and nothing where v counts as the provisional verdict did; the audit
// entry is withdrawn (Unaudit) or added where the two differ. It reports
// whether they differ, that is whether a correction is written.
func (s *Stats) Correct(h *Held, v *Verdict) (changed bool) {
	k := OperationKey{h.Service, h.Operation}
	op := s.operation(k)
	op.count(v.Kind, h.Sent, v.Expected, 1)
	op.Est[h.Method].count(v.Kind, h.Sent, v.Expected, h.Weight)
	s.provisional(k).add(h.Provisional, h.Sent, h.ProvisionalExpected, -1, h.Weight, h.Method)
	wasAudited, audited := h.Provisional == VerdictCoincidental, v.Kind == VerdictCoincidental
	changed = v.Kind != h.Provisional || v.Expected != h.ProvisionalExpected
	if wasAudited && audited && !changed {
		return false // the provisional entry is the final one
	}
	if wasAudited {
		s.unaudit(AuditKey{Time: h.Time, TraceID: h.TraceID, SpanID: h.SpanID})
	}
	if audited {
		s.audit(h.auditEntry(v.Expected))
	}
	return changed
}

// auditEntry is h's audit entry, were it coincidental expecting expected.
// Its peer is the first failed call, as Add's is: Rejudge lists them all,
// in the order Hold kept.
func (h *Held) auditEntry(expected ownership.Claim) AuditEntry {
	fo := &h.Calls[0] // coincidental: every failed call is fail-open
	return AuditEntry{
		Time: h.Time, TraceID: h.TraceID, SpanID: h.SpanID,
		Service: h.Service, Operation: h.Operation,
		PeerService: fo.PeerService, PeerOperation: fo.PeerOperation,
		ClaimSent: h.Sent, ClaimExpected: expected, Weight: h.Weight,
	}
}
