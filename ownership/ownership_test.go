// SPDX-License-Identifier: Apache-2.0

package ownership

import (
	"reflect"
	"slices"
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

// TestHintsJSONFields holds the hints structs' JSON tags to the field names
// of conformance/vocabulary.yaml, which the other languages' hint clients
// read by: a tag renamed here alone would be a document they cannot read.
func TestHintsJSONFields(t *testing.T) {
	for _, tt := range []struct {
		object string
		typ    reflect.Type
	}{
		{"hints", reflect.TypeFor[Hints]()},
		{"retry_budget", reflect.TypeFor[RetryBudget]()},
		{"edge", reflect.TypeFor[HintEdge]()},
	} {
		t.Run(tt.object, func(t *testing.T) {
			var tags []string
			for i := 0; i < tt.typ.NumField(); i++ {
				name, _, _ := strings.Cut(tt.typ.Field(i).Tag.Get("json"), ",")
				tags = append(tags, name)
			}
			if want := hintsFields[tt.object]; !slices.Equal(tags, want) {
				t.Errorf("%s's JSON fields are %q; the registry says %q", tt.typ, tags, want)
			}
		})
	}
}

// TestMaxClaimLen: ParseClaim's bound is the longest spelling it accepts.
func TestMaxClaimLen(t *testing.T) {
	if got := max(len(claimNames[ClaimClaimed]), len(claimNames[ClaimUnclaimed])); got != maxClaimLen {
		t.Errorf("maxClaimLen = %d, the longest claim spelling is %d bytes", maxClaimLen, got)
	}
}
