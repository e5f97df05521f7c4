// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import "github.com/errorownership/errorownership/ownership"

// VerdictKind says who originated a failed request's error.
type VerdictKind uint8

// The verdicts of docs/design.md §4.2.
const (
	// VerdictOwn: no outbound call failed; the service originated the error.
	VerdictOwn VerdictKind = iota + 1
	// VerdictPropagated: a call on a fail-close or not yet known edge failed,
	// or the request timed out while a call was in flight.
	VerdictPropagated
	// VerdictCoincidental: calls failed, but only on fail-open edges; the
	// service failed for a reason of its own.
	VerdictCoincidental
)

var verdictNames = [...]string{"", "own", "propagated", "coincidental"}

// String returns "own", "propagated" or "coincidental".
func (v VerdictKind) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return ""
}

// Verdict is the judgement of one failed request.
type Verdict struct {
	// Request is the index in Trace.Requests.
	Request int32
	Kind    VerdictKind
	// Reason is what the service should record as error_ownership.claim.reason.
	Reason ownership.Reason
	// Expected is the claim the rules say the service should send.
	Expected ownership.Claim
	// Sent is the claim the service did send (error_ownership.claim.sent).
	Sent ownership.Claim
	// TimedOut: the timeout rule decided (the request gave up while a call
	// was in flight).
	TimedOut bool
	// FailedCalls are the indexes in Trace.Calls of the failed logical calls
	// (and, under the timeout rule, of the calls in flight).
	FailedCalls []int32
	// Unsettled: the verdict rests on edges without a mode — every failed
	// call that counted against the request is on one — so that it would
	// be coincidental if they turned out fail-open. Such a verdict is
	// better held and judged again (Hold) than counted now.
	Unsettled bool
}

// Judge gives a verdict for every failed request of t, using m for edge
// modes; none for an incomplete trace. The result is valid until the Analyzer's next Judge.
func (a *Analyzer) Judge(t *Trace, m Modes) []Verdict {
	a.verdicts = a.verdicts[:0]
	a.failed = a.failed[:0]
	if t.Incomplete != IncompleteNone {
		return a.verdicts // not judged from partial evidence
	}
	for ri := range t.Requests {
		r := &t.Requests[ri]
		req := &t.Spans[r.Span]
		if !req.Failed() {
			continue
		}
		a.verdicts = append(a.verdicts, a.judge(t, int32(ri), r, req, m))
	}
	return a.verdicts
}

func (a *Analyzer) judge(t *Trace, ri int32, r *Request, req *Span, m Modes) Verdict {
	v := Verdict{Request: ri, Sent: req.Claim()}
	start := len(a.failed)
	var tally callTally
	for ci := r.CallsStart; ci < r.CallsEnd; ci++ {
		c := &t.Calls[ci]
		switch {
		case req.TimedOut() && c.InFlight:
			// The timeout rule: the call still running when the request gave
			// up owns the error, whatever the edge's mode.
			v.TimedOut = true
		case c.Failed:
			if !tally.add(m.Mode(EdgeKey{req.Service, req.Operation, c.PeerService, c.PeerOperation}), c.Claim, c.Decision) {
				a.failed = append(a.failed, ci) // fail-open: listed, not counted
				continue
			}
		default:
			continue
		}
		a.failed = append(a.failed, ci)
	}
	v.FailedCalls = a.failed[start:len(a.failed):len(a.failed)]
	v.Kind, v.Reason, v.Expected = tally.verdict(v.TimedOut, len(v.FailedCalls))
	v.Unsettled = !v.TimedOut && tally.unknown > 0 && tally.closed == tally.unknown
	return v
}

// callTally counts a request's failed calls by what the verdict makes of
// them, so that a verdict judged again (Held.Rejudge) is decided as the
// first was.
type callTally struct {
	// closed are the failed calls on edges not known to be fail-open;
	// unknown those of them on edges without a mode.
	closed, unknown int
	noPolicy        int // of closed: no retry policy, the claim not unclaimed
	missing         int // of closed: no claim received
}

// add counts a failed call on an edge of mode, and reports whether it
// counts against the request (false: fail-open, tolerated).
func (t *callTally) add(mode ownership.Mode, claim ownership.Claim, decision ownership.RetryDecision) bool {
	if mode == ownership.ModeFailOpen {
		return false
	}
	t.closed++
	if mode == ownership.ModeUnknown {
		t.unknown++
	}
	// The at-least-once rule: a caller with no retry policy passes a
	// claimed (or unlabelled) error up claimed, so someone retries.
	if decision == ownership.DecisionNoPolicy && claim != ownership.ClaimUnclaimed {
		t.noPolicy++
	}
	if claim == ownership.ClaimMissing {
		t.missing++
	}
	return true
}

// verdict decides a failed request from its tally: failed is how many
// calls failed (fail-open ones included).
func (t *callTally) verdict(timedOut bool, failed int) (VerdictKind, ownership.Reason, ownership.Claim) {
	switch {
	case timedOut:
		return VerdictPropagated, ownership.ReasonPropagated, ownership.ClaimUnclaimed
	case failed == 0:
		return VerdictOwn, ownership.ReasonOwn, ownership.ClaimClaimed
	case t.closed == 0:
		return VerdictCoincidental, ownership.ReasonCoincidental, ownership.ClaimClaimed
	}
	reason, expected := ownership.ReasonPropagated, ownership.ClaimUnclaimed
	if t.missing == t.closed {
		reason = ownership.ReasonMissingDownstreamClaim
	}
	if t.noPolicy == t.closed {
		expected = ownership.ClaimClaimed
	}
	return VerdictPropagated, reason, expected
}
