// SPDX-License-Identifier: Apache-2.0

package ownership

import (
	"strings"
	"testing"
)

func TestParseClaim(t *testing.T) {
	tests := []struct {
		in   string
		want Claim
	}{
		{"claimed", ClaimClaimed},
		{"Claimed", ClaimClaimed},
		{"UNCLAIMED", ClaimUnclaimed},
		{"", ClaimMissing},
		{"missing", ClaimMissing},
		{"claimed ", ClaimMissing},
		{"yes", ClaimMissing},
		{strings.Repeat("claimed", 1000), ClaimMissing},
	}
	for _, tt := range tests {
		if got := ParseClaim(tt.in); got != tt.want {
			t.Errorf("ParseClaim(%.20q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestNamesRoundTrip(t *testing.T) {
	for c := ClaimMissing; c <= ClaimUnclaimed; c++ {
		if c != ClaimMissing && ParseClaim(c.String()) != c {
			t.Errorf("claim %v does not round-trip", c)
		}
	}
	for r := ReasonOwn; r <= ReasonMissingDownstreamClaim; r++ {
		if ParseReason(r.String()) != r {
			t.Errorf("reason %q does not round-trip", r)
		}
	}
	for d := DecisionRetried; d <= DecisionExhausted; d++ {
		if ParseRetryDecision(d.String()) != d {
			t.Errorf("decision %q does not round-trip", d)
		}
	}
	if ParseReason("nonsense") != ReasonNone || ParseRetryDecision("nonsense") != DecisionNone {
		t.Error("unknown values must parse as none")
	}
	if !DecisionSuppressedBudget.Suppressed() || !DecisionSuppressedUnclaimed.Suppressed() || DecisionRetried.Suppressed() {
		t.Error("Suppressed is wrong")
	}
}
