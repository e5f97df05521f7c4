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
	// Reason is what the service should record as error.claim.reason.
	Reason ownership.Reason
	// Expected is the claim the rules say the service should send.
	Expected ownership.Claim
	// Sent is the claim the service did send (error.claim).
	Sent ownership.Claim
	// TimedOut: the timeout rule decided (the request gave up while a call
	// was in flight).
	TimedOut bool
	// FailedCalls are the indexes in Trace.Calls of the failed logical calls
	// (and, under the timeout rule, of the calls in flight).
	FailedCalls []int32
}

// Judge gives a verdict for every failed request of t, using m for edge
// modes. The result is valid until the Analyzer's next Judge.
func (a *Analyzer) Judge(t *Trace, m Modes) []Verdict {
	a.verdicts = a.verdicts[:0]
	a.failed = a.failed[:0]
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
	var closed, noPolicy, missing int
	for ci := r.CallsStart; ci < r.CallsEnd; ci++ {
		c := &t.Calls[ci]
		switch {
		case req.TimedOut() && c.InFlight:
			// The timeout rule: the call still running when the request gave
			// up owns the error, whatever the edge's mode.
			v.TimedOut = true
		case c.Failed:
			if m.Mode(EdgeKey{req.Service, req.Operation, c.PeerService, c.PeerOperation}) == ownership.ModeFailOpen {
				a.failed = append(a.failed, ci)
				continue
			}
			closed++
			// The at-least-once rule: a caller with no retry policy passes a
			// claimed (or unlabelled) error up claimed, so someone retries.
			if c.Decision == ownership.DecisionNoPolicy && c.Claim != ownership.ClaimUnclaimed {
				noPolicy++
			}
			if c.Claim == ownership.ClaimMissing {
				missing++
			}
		default:
			continue
		}
		a.failed = append(a.failed, ci)
	}
	v.FailedCalls = a.failed[start:len(a.failed):len(a.failed)]

	switch {
	case v.TimedOut:
		v.Kind, v.Reason, v.Expected = VerdictPropagated, ownership.ReasonPropagated, ownership.ClaimUnclaimed
	case len(v.FailedCalls) == 0:
		v.Kind, v.Reason, v.Expected = VerdictOwn, ownership.ReasonOwn, ownership.ClaimClaimed
	case closed == 0:
		v.Kind, v.Reason, v.Expected = VerdictCoincidental, ownership.ReasonCoincidental, ownership.ClaimClaimed
	default:
		v.Kind, v.Reason, v.Expected = VerdictPropagated, ownership.ReasonPropagated, ownership.ClaimUnclaimed
		if missing == closed {
			v.Reason = ownership.ReasonMissingDownstreamClaim
		}
		if noPolicy == closed {
			v.Expected = ownership.ClaimClaimed
		}
	}
	return v
}
