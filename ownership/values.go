// SPDX-License-Identifier: Apache-2.0

package ownership

// The values' spellings are generated (ownership.go); reading and writing
// them is here.

// String returns the wire spelling: "claimed", "unclaimed" or "missing".
func (c Claim) String() string {
	if int(c) < len(claimNames) {
		return claimNames[c]
	}
	return "missing"
}

// maxClaimLen bounds what ParseClaim looks at, so an oversized header value
// costs nothing: the longest spelling it accepts (a test holds it to
// claimNames).
const maxClaimLen = len("unclaimed")

// ParseClaim reads a header, metadata or attribute value. It accepts the
// spellings "claimed" and "unclaimed" in any letter case; anything else,
// including "missing" and oversized values, is ClaimMissing.
func ParseClaim(s string) Claim {
	if len(s) > maxClaimLen {
		return ClaimMissing
	}
	switch {
	case equalFold(s, claimNames[ClaimClaimed]):
		return ClaimClaimed
	case equalFold(s, claimNames[ClaimUnclaimed]):
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
