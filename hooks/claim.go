// SPDX-License-Identifier: Apache-2.0

package hooks

import "github.com/errorownership/errorownership/ownership"

// ModeFunc tells the mode of the edge from the current inbound operation to
// (peerService, peerOperation). peerOperation is "" when the client does not
// know the callee's operation. A nil ModeFunc knows nothing: every edge is
// ownership.ModeUnknown.
type ModeFunc func(peerService, peerOperation string) ownership.Mode

// HintSource is what the hooks need from the learned model: edge modes by
// (inbound operation, peer service, peer operation) and the retry budget's
// limits. *hints.Client implements it; a static table can too.
type HintSource interface {
	Mode(operation, peerService, peerOperation string) ownership.Mode
	BudgetLimits() Limits
}

// Outcome is the final outcome of one outbound logical call: the first
// attempt and its retries.
type Outcome struct {
	// PeerService names the callee (service.peer.name).
	PeerService string
	// PeerOperation names the callee's operation, "" when not known.
	PeerOperation string
	// Failed reports that the last attempt failed with a server fault (or
	// never got an answer).
	Failed bool
	// Received is the claim on the last attempt's error response.
	Received ownership.Claim
	// Decision is the retry decision taken after the last attempt.
	Decision ownership.RetryDecision
	// InFlight reports that the request stopped waiting for the call: it
	// was still running when the request's answer was decided, or it was
	// cut short because the caller's context ended.
	InFlight bool
}

// Claim decides what a server tells its caller about an error it returns
// (the table in the package documentation). outcomes are the request's
// outbound logical calls; modes tells which edges are fail-open; timedOut
// reports that the request gave up waiting (its deadline passed, it answered
// with a timeout, or it answered while a call was still in flight).
//
// Claim is meant for a request that ends in an error; for one with no
// failed call it returns (claimed, own).
func Claim(outcomes []Outcome, modes ModeFunc, timedOut bool) (ownership.Claim, ownership.Reason) {
	// Timeouts: the downstream we were waiting on owns the error, whatever
	// the edge's mode, because the wait is what made us fail.
	if timedOut {
		for i := range outcomes {
			if outcomes[i].InFlight {
				return ownership.ClaimUnclaimed, ownership.ReasonPropagated
			}
		}
	}
	var failed, blocking, missing, noPolicy int
	for i := range outcomes {
		o := &outcomes[i]
		if !o.Failed {
			continue
		}
		failed++
		if modes != nil && modes(o.PeerService, o.PeerOperation) == ownership.ModeFailOpen {
			continue
		}
		blocking++
		if o.Received == ownership.ClaimMissing {
			missing++
		}
		// At least one retry: a caller without a retry policy for a
		// claimed (or unlabelled) error passes it up claimed, or nobody
		// would retry it.
		if o.Decision == ownership.DecisionNoPolicy && o.Received != ownership.ClaimUnclaimed {
			noPolicy++
		}
	}
	switch {
	case failed == 0:
		return ownership.ClaimClaimed, ownership.ReasonOwn
	case blocking == 0:
		return ownership.ClaimClaimed, ownership.ReasonCoincidental
	case noPolicy == blocking:
		return ownership.ClaimClaimed, ownership.ReasonPropagated
	case missing == blocking:
		return ownership.ClaimUnclaimed, ownership.ReasonMissingDownstreamClaim
	}
	return ownership.ClaimUnclaimed, ownership.ReasonPropagated
}

// Retry decides whether a caller retries a failed attempt (the matrix in the
// package documentation). received is the claim on the attempt's error;
// hasPolicy reports that the caller may retry this call at all (configured,
// idempotent, body replayable); attemptsLeft that another attempt fits the
// attempt limit and the deadline. Only when every other check passes does it
// withdraw from budget, so a suppressed retry costs no token. A nil budget
// allows every retry.
func Retry(received ownership.Claim, hasPolicy bool, attemptsLeft bool, budget *Budget) ownership.RetryDecision {
	switch {
	case !hasPolicy:
		return ownership.DecisionNoPolicy
	case received == ownership.ClaimUnclaimed:
		return ownership.DecisionSuppressedUnclaimed
	case !attemptsLeft:
		return ownership.DecisionExhausted
	case !budget.TryWithdraw():
		return ownership.DecisionSuppressedBudget
	}
	return ownership.DecisionRetried
}
