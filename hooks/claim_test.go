package hooks

import (
	"testing"

	"github.com/errorownership/errorownership/ownership"
)

const (
	claimed   = ownership.ClaimClaimed
	unclaimed = ownership.ClaimUnclaimed
	missing   = ownership.ClaimMissing
)

// staticModes is a ModeFunc over a table keyed by peer service.
func staticModes(m map[string]ownership.Mode) ModeFunc {
	return func(peer, _ string) ownership.Mode { return m[peer] }
}

func TestClaim(t *testing.T) {
	failOpenRecs := staticModes(map[string]ownership.Mode{"recs": ownership.ModeFailOpen, "db": ownership.ModeFailClose})
	tests := []struct {
		name       string
		outcomes   []Outcome
		modes      ModeFunc
		timedOut   bool
		wantClaim  ownership.Claim
		wantReason ownership.Reason
	}{
		{"no calls", nil, nil, false, claimed, ownership.ReasonOwn},
		{"no call failed", []Outcome{{PeerService: "db"}, {PeerService: "recs"}}, failOpenRecs, false, claimed, ownership.ReasonOwn},
		{"failed on unknown edge, callee claimed",
			[]Outcome{{PeerService: "c", Failed: true, Received: claimed, Decision: ownership.DecisionExhausted}},
			nil, false, unclaimed, ownership.ReasonPropagated},
		{"failed on unknown edge, callee sent no claim",
			[]Outcome{{PeerService: "c", Failed: true, Received: missing, Decision: ownership.DecisionExhausted}},
			nil, false, unclaimed, ownership.ReasonMissingDownstreamClaim},
		{"failed, callee unclaimed",
			[]Outcome{{PeerService: "c", Failed: true, Received: unclaimed, Decision: ownership.DecisionSuppressedUnclaimed}},
			nil, false, unclaimed, ownership.ReasonPropagated},
		{"failed on fail-close edge, budget empty",
			[]Outcome{{PeerService: "db", Failed: true, Received: claimed, Decision: ownership.DecisionSuppressedBudget}},
			failOpenRecs, false, unclaimed, ownership.ReasonPropagated},
		{"one missing, one claimed: not every blocking call lacks a claim",
			[]Outcome{
				{PeerService: "a", Failed: true, Received: missing, Decision: ownership.DecisionExhausted},
				{PeerService: "b", Failed: true, Received: claimed, Decision: ownership.DecisionExhausted},
			}, nil, false, unclaimed, ownership.ReasonPropagated},
		{"coincidental: only fail-open calls failed",
			[]Outcome{{PeerService: "recs", Failed: true, Received: missing, Decision: ownership.DecisionExhausted}, {PeerService: "db"}},
			failOpenRecs, false, claimed, ownership.ReasonCoincidental},
		{"fail-open and fail-close both failed",
			[]Outcome{
				{PeerService: "recs", Failed: true, Decision: ownership.DecisionExhausted},
				{PeerService: "db", Failed: true, Received: claimed, Decision: ownership.DecisionExhausted},
			}, failOpenRecs, false, unclaimed, ownership.ReasonPropagated},
		{"at least one retry: no policy, callee claimed",
			[]Outcome{{PeerService: "c", Failed: true, Received: claimed, Decision: ownership.DecisionNoPolicy}},
			nil, false, claimed, ownership.ReasonPropagated},
		{"at least one retry: no policy, callee sent no claim",
			[]Outcome{{PeerService: "c", Failed: true, Received: missing, Decision: ownership.DecisionNoPolicy}},
			nil, false, claimed, ownership.ReasonPropagated},
		{"no policy but callee unclaimed",
			[]Outcome{{PeerService: "c", Failed: true, Received: unclaimed, Decision: ownership.DecisionNoPolicy}},
			nil, false, unclaimed, ownership.ReasonPropagated},
		{"no policy on one call, budget empty on another",
			[]Outcome{
				{PeerService: "a", Failed: true, Received: claimed, Decision: ownership.DecisionNoPolicy},
				{PeerService: "b", Failed: true, Received: claimed, Decision: ownership.DecisionSuppressedBudget},
			}, nil, false, unclaimed, ownership.ReasonPropagated},
		{"no policy on a fail-open call does not matter",
			[]Outcome{
				{PeerService: "recs", Failed: true, Received: claimed, Decision: ownership.DecisionExhausted},
				{PeerService: "c", Failed: true, Received: claimed, Decision: ownership.DecisionNoPolicy},
			}, failOpenRecs, false, claimed, ownership.ReasonPropagated},
		{"timeout while a call was in flight",
			[]Outcome{{PeerService: "c", InFlight: true}},
			nil, true, unclaimed, ownership.ReasonPropagated},
		{"timeout while a fail-open call was in flight beats coincidental",
			[]Outcome{{PeerService: "recs", Failed: true, InFlight: true, Decision: ownership.DecisionExhausted}},
			failOpenRecs, true, unclaimed, ownership.ReasonPropagated},
		{"timeout while a no-policy call was in flight beats at-least-once",
			[]Outcome{{PeerService: "c", Failed: true, InFlight: true, Decision: ownership.DecisionNoPolicy}},
			nil, true, unclaimed, ownership.ReasonPropagated},
		{"timed out with nothing in flight: own",
			[]Outcome{{PeerService: "c"}},
			nil, true, claimed, ownership.ReasonOwn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim, reason := Claim(tt.outcomes, tt.modes, tt.timedOut)
			if claim != tt.wantClaim || reason != tt.wantReason {
				t.Errorf("Claim = %v/%v, want %v/%v", claim, reason, tt.wantClaim, tt.wantReason)
			}
		})
	}
}

func TestRetry(t *testing.T) {
	empty := NewBudget(Limits{})
	tests := []struct {
		name         string
		received     ownership.Claim
		hasPolicy    bool
		attemptsLeft bool
		budget       *Budget
		want         ownership.RetryDecision
	}{
		{"claimed", claimed, true, true, nil, ownership.DecisionRetried},
		{"missing", missing, true, true, nil, ownership.DecisionRetried},
		{"unclaimed", unclaimed, true, true, nil, ownership.DecisionSuppressedUnclaimed},
		{"claimed, no policy", claimed, false, true, nil, ownership.DecisionNoPolicy},
		{"missing, no policy", missing, false, true, nil, ownership.DecisionNoPolicy},
		{"unclaimed, no policy", unclaimed, false, true, nil, ownership.DecisionNoPolicy},
		{"claimed, budget empty", claimed, true, true, empty, ownership.DecisionSuppressedBudget},
		{"claimed, attempts used up", claimed, true, false, empty, ownership.DecisionExhausted},
		{"unclaimed, budget empty", unclaimed, true, true, empty, ownership.DecisionSuppressedUnclaimed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Retry(tt.received, tt.hasPolicy, tt.attemptsLeft, tt.budget); got != tt.want {
				t.Errorf("Retry = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRetryTakesNoTokenWhenSuppressed checks that only a retry that
// happens costs budget.
func TestRetryTakesNoTokenWhenSuppressed(t *testing.T) {
	b := NewBudget(Limits{MinRetriesPerSecond: 0.1}, BudgetWindow(10e9)) // one retry in reserve
	Retry(unclaimed, true, true, b)
	Retry(claimed, false, true, b)
	Retry(claimed, true, false, b)
	if got := Retry(claimed, true, true, b); got != ownership.DecisionRetried {
		t.Fatalf("first allowed retry = %v", got)
	}
	if got := Retry(claimed, true, true, b); got != ownership.DecisionSuppressedBudget {
		t.Fatalf("second retry = %v, want suppressed_budget", got)
	}
}

func TestModeText(t *testing.T) {
	for _, m := range []ownership.Mode{ownership.ModeUnknown, ownership.ModeFailClose, ownership.ModeFailOpen} {
		var got ownership.Mode
		b, _ := m.MarshalText()
		if err := got.UnmarshalText(b); err != nil || got != m {
			t.Errorf("%v round trip = %v, %v", m, got, err)
		}
	}
	m := ownership.ModeFailOpen
	if err := m.UnmarshalText([]byte("sometimes")); err != nil || m != ownership.ModeUnknown {
		t.Errorf("unknown mode read as %v, %v", m, err)
	}
}
