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
	Sent  ownership.Claim
	Calls []HeldCall
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

// Hold returns v, a verdict on a request of t, as a held request.
func Hold(t *Trace, v *Verdict, at time.Time) Held {
	req := t.RequestSpan(&t.Requests[v.Request])
	h := Held{
		At: at, Time: req.End(), TraceID: t.ID, SpanID: req.SpanID,
		Service: req.Service, Operation: req.Operation, Sent: v.Sent,
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

// AddHeld counts v, the final verdict of the held request h: what Add
// counts of a verdict.
func (s *Stats) AddHeld(h *Held, v *Verdict) {
	s.addVerdict(OperationKey{h.Service, h.Operation}, v, func() AuditEntry {
		fo := &h.Calls[v.FailedCalls[0]] // coincidental: every failed call is fail-open
		return AuditEntry{
			Time: h.Time, TraceID: h.TraceID, SpanID: h.SpanID,
			Service: h.Service, Operation: h.Operation,
			PeerService: fo.PeerService, PeerOperation: fo.PeerOperation,
			ClaimSent: v.Sent, ClaimExpected: v.Expected,
		}
	})
}
