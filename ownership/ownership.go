// SPDX-License-Identifier: Apache-2.0

// Package ownership is the shared vocabulary of error ownership
// (docs/design.md §3): the header, metadata and span attribute names and the
// values they carry, the edge modes, and the ownership hints' wire format
// with the retry-budget defaults. The dependency analysis, the collector
// processor, the SDK hooks, the store and the dashboards all speak it, so a
// name is defined here once and nowhere else.
//
// The package depends on nothing but the standard library, so that services
// can import the hooks without pulling in the collector.
package ownership

// Wire names.
const (
	// HTTPClaimHeader is the HTTP response header that carries a Claim.
	HTTPClaimHeader = "Error-Claim"
	// GRPCClaimKey is the gRPC response metadata (trailer) key that carries a Claim.
	GRPCClaimKey = "error-claim"
	// GRPCPushbackKey is the gRPC trailer that, set to "-1", tells a plain
	// gRPC retry policy (gRFC A6) not to retry.
	GRPCPushbackKey = "grpc-retry-pushback-ms"
	// HTTPRetryAttemptHeader is the HTTP request header carrying the attempt
	// number: 0 for the first attempt, 1 for the first retry.
	HTTPRetryAttemptHeader = "Retry-Attempt"
	// GRPCPreviousAttemptsKey is gRPC's standard request metadata key for
	// the number of earlier attempts of the same call.
	GRPCPreviousAttemptsKey = "grpc-previous-rpc-attempts"
)

// Span attribute names.
const (
	// AttrClaim is set on a server span: the Claim the service sent upstream.
	AttrClaim = "error_ownership.claim.sent"
	// AttrClaimReason is set on a server span: the Reason for that claim.
	AttrClaimReason = "error_ownership.claim.reason"
	// AttrClaimReceived is set on a client span: the Claim the callee sent.
	AttrClaimReceived = "error_ownership.claim.received"
	// AttrRetryDecision is set on a client span: the RetryDecision taken
	// after the attempt the span records.
	AttrRetryDecision = "error_ownership.retry.decision"
	// AttrRetryAttempt is set on a client span: the attempt number, 0 first.
	AttrRetryAttempt = "error_ownership.retry.attempt"
	// AttrHTTPResendCount is the OpenTelemetry semantic convention for the
	// ordinal of an HTTP request resend; absent on the first attempt.
	AttrHTTPResendCount = "http.request.resend_count"
)

// Claim is what a callee says about an error it returns.
type Claim uint8

// The claims. The zero value is ClaimMissing, so an absent or unreadable
// claim can never be mistaken for a claimed one.
const (
	ClaimMissing Claim = iota
	ClaimClaimed
	ClaimUnclaimed
)

var claimNames = [...]string{ClaimMissing: "missing", ClaimClaimed: "claimed", ClaimUnclaimed: "unclaimed"}

// String returns the wire spelling: "claimed", "unclaimed" or "missing".
func (c Claim) String() string {
	if int(c) < len(claimNames) {
		return claimNames[c]
	}
	return "missing"
}

// maxClaimLen bounds what ParseClaim looks at, so an oversized header value
// costs nothing.
const maxClaimLen = len("unclaimed")

// ParseClaim reads a header, metadata or attribute value. It accepts the
// spellings "claimed" and "unclaimed" in any letter case; anything else,
// including "missing" and oversized values, is ClaimMissing.
func ParseClaim(s string) Claim {
	if len(s) > maxClaimLen {
		return ClaimMissing
	}
	switch {
	case equalFold(s, "claimed"):
		return ClaimClaimed
	case equalFold(s, "unclaimed"):
		return ClaimUnclaimed
	}
	return ClaimMissing
}

// equalFold is an ASCII-only strings.EqualFold: the package imports nothing.
func equalFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// Reason says why a service sent the claim it sent (AttrClaimReason).
type Reason uint8

// The reasons.
const (
	// ReasonNone: the request did not fail, or nothing is known.
	ReasonNone Reason = iota
	// ReasonOwn: no outbound call failed; the service originated the error.
	ReasonOwn
	// ReasonPropagated: a call on a fail-close (or not yet known) edge failed.
	ReasonPropagated
	// ReasonCoincidental: calls failed, but only on fail-open edges, so the
	// service failed for its own reason.
	ReasonCoincidental
	// ReasonMissingDownstreamClaim: propagated, and the failed callee sent
	// no claim (it has no hooks), so this is the first hop that can unclaim.
	ReasonMissingDownstreamClaim
)

var reasonNames = [...]string{
	ReasonNone:                   "",
	ReasonOwn:                    "own",
	ReasonPropagated:             "propagated",
	ReasonCoincidental:           "coincidental",
	ReasonMissingDownstreamClaim: "missing_downstream_claim",
}

// String returns the attribute spelling, "" for ReasonNone.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return ""
}

// ParseReason reads an AttrClaimReason value; unknown values are ReasonNone.
func ParseReason(s string) Reason {
	for r, name := range reasonNames {
		if name != "" && name == s {
			return Reason(r)
		}
	}
	return ReasonNone
}

// RetryDecision is what a caller did after a failed attempt (AttrRetryDecision).
type RetryDecision uint8

// The retry decisions.
const (
	// DecisionNone: not recorded (no hooks, or the attempt succeeded).
	DecisionNone RetryDecision = iota
	// DecisionRetried: the caller retried.
	DecisionRetried
	// DecisionSuppressedUnclaimed: the callee unclaimed the error; no retry.
	DecisionSuppressedUnclaimed
	// DecisionSuppressedBudget: the retry budget was empty; no retry.
	DecisionSuppressedBudget
	// DecisionNoPolicy: the caller has no retry policy for this call (none
	// configured, or not idempotent); it passes the error up claimed.
	DecisionNoPolicy
	// DecisionExhausted: the caller's attempts ran out.
	DecisionExhausted
)

var decisionNames = [...]string{
	DecisionNone:                "",
	DecisionRetried:             "retried",
	DecisionSuppressedUnclaimed: "suppressed_unclaimed",
	DecisionSuppressedBudget:    "suppressed_budget",
	DecisionNoPolicy:            "no_policy",
	DecisionExhausted:           "exhausted",
}

// String returns the attribute spelling, "" for DecisionNone.
func (d RetryDecision) String() string {
	if int(d) < len(decisionNames) {
		return decisionNames[d]
	}
	return ""
}

// ParseRetryDecision reads an AttrRetryDecision value; unknown values are
// DecisionNone.
func ParseRetryDecision(s string) RetryDecision {
	for d, name := range decisionNames {
		if name != "" && name == s {
			return RetryDecision(d)
		}
	}
	return DecisionNone
}

// Suppressed reports whether the decision is a retry the hooks held back:
// the storm prevented.
func (d RetryDecision) Suppressed() bool {
	return d == DecisionSuppressedUnclaimed || d == DecisionSuppressedBudget
}
