// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/ownership"
)

// TestJudge walks the claim decision table (docs/design.md §4.2, after
// Figures 3 and 6) and the three refinements.
func TestJudge(t *testing.T) {
	const (
		claimed   = ownership.ClaimClaimed
		unclaimed = ownership.ClaimUnclaimed
		missing   = ownership.ClaimMissing
	)
	inbound := sp{id: 1, kind: KindServer, svc: "c", op: "GET /c", start: 0, end: 100, failed: true}
	call := func(id byte, peer string, failed bool) sp {
		return sp{id: id, parent: 1, kind: KindClient, svc: "c", op: "GET", peer: peer, start: int(id) * 10, end: int(id)*10 + 5, failed: failed}
	}
	tests := []struct {
		name     string
		in       sp
		calls    []sp
		modes    modes
		kind     VerdictKind
		reason   ownership.Reason
		expected ownership.Claim
		failed   int
		timedOut bool
	}{
		{
			name: "no call at all: own", in: inbound,
			kind: VerdictOwn, reason: ownership.ReasonOwn, expected: claimed,
		},
		{
			name: "calls succeeded: own", in: inbound, calls: []sp{call(2, "d", false), call(3, "e", false)},
			kind: VerdictOwn, reason: ownership.ReasonOwn, expected: claimed,
		},
		{
			name: "a failed call that a retry recovered: own", in: inbound,
			calls: []sp{call(2, "d", true), call(3, "d", false)},
			kind:  VerdictOwn, reason: ownership.ReasonOwn, expected: claimed,
		},
		{
			name: "failed call on a fail-close edge: propagated", in: inbound,
			calls: []sp{withClaim(call(2, "d", true), claimed)}, modes: modes{{"c", "d"}: ownership.ModeFailClose},
			kind: VerdictPropagated, reason: ownership.ReasonPropagated, expected: unclaimed, failed: 1,
		},
		{
			name: "failed call on an edge not yet known: propagated", in: inbound,
			calls: []sp{withClaim(call(2, "d", true), unclaimed)},
			kind:  VerdictPropagated, reason: ownership.ReasonPropagated, expected: unclaimed, failed: 1,
		},
		{
			name: "callee sent no claim: the first hop to see it unclaims", in: inbound,
			calls: []sp{call(2, "d", true)},
			kind:  VerdictPropagated, reason: ownership.ReasonMissingDownstreamClaim, expected: unclaimed, failed: 1,
		},
		{
			name: "only fail-open calls failed: coincidental", in: inbound,
			calls: []sp{call(2, "recs", true), call(3, "d", false)}, modes: modes{{"c", "recs"}: ownership.ModeFailOpen},
			kind: VerdictCoincidental, reason: ownership.ReasonCoincidental, expected: claimed, failed: 1,
		},
		{
			name: "a fail-open and a fail-close call failed: propagated", in: inbound,
			calls: []sp{call(2, "recs", true), withClaim(call(3, "d", true), claimed)},
			modes: modes{{"c", "recs"}: ownership.ModeFailOpen, {"c", "d"}: ownership.ModeFailClose},
			kind:  VerdictPropagated, reason: ownership.ReasonPropagated, expected: unclaimed, failed: 2,
		},
		{
			name: "at least one retry: no policy passes a claimed error up claimed", in: inbound,
			calls: []sp{withDecision(withClaim(call(2, "d", true), claimed), ownership.DecisionNoPolicy)},
			kind:  VerdictPropagated, reason: ownership.ReasonPropagated, expected: claimed, failed: 1,
		},
		{
			name: "at least one retry: no policy and a missing claim still claims", in: inbound,
			calls: []sp{withDecision(call(2, "d", true), ownership.DecisionNoPolicy)},
			kind:  VerdictPropagated, reason: ownership.ReasonMissingDownstreamClaim, expected: claimed, failed: 1,
		},
		{
			name: "no policy but the callee unclaimed: unclaimed", in: inbound,
			calls: []sp{withDecision(withClaim(call(2, "d", true), unclaimed), ownership.DecisionNoPolicy)},
			kind:  VerdictPropagated, reason: ownership.ReasonPropagated, expected: unclaimed, failed: 1,
		},
		{
			name: "budget empty: unclaims", in: inbound,
			calls: []sp{withDecision(withClaim(call(2, "d", true), claimed), ownership.DecisionSuppressedBudget)},
			kind:  VerdictPropagated, reason: ownership.ReasonPropagated, expected: unclaimed, failed: 1,
		},
		{
			name: "timeout while a call is in flight: the callee owns it, even on a fail-open edge",
			in:   sp{id: 1, kind: KindServer, svc: "c", op: "GET /c", start: 0, end: 100, failed: true, tmo: true},
			calls: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "c", op: "GET", peer: "slow", start: 10, end: 100, failed: true, tmo: true},
			},
			modes: modes{{"c", "slow"}: ownership.ModeFailOpen},
			kind:  VerdictPropagated, reason: ownership.ReasonPropagated, expected: unclaimed, failed: 1, timedOut: true,
		},
		{
			name: "timeout: a call that completed just before is not in flight",
			in:   sp{id: 1, kind: KindServer, svc: "c", op: "GET /c", start: 0, end: 100, failed: true, tmo: true},
			calls: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "c", op: "GET", peer: "fast", start: 10, end: 99},
			},
			kind: VerdictOwn, reason: ownership.ReasonOwn, expected: claimed,
		},
		{
			name: "timeout: a call cut short without an answer is in flight",
			in:   sp{id: 1, kind: KindServer, svc: "c", op: "GET /c", start: 0, end: 100, failed: true, tmo: true},
			calls: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "c", op: "GET", peer: "slow", start: 10, end: 100, cut: true},
			},
			kind: VerdictPropagated, reason: ownership.ReasonPropagated, expected: unclaimed, failed: 1, timedOut: true,
		},
		{
			name:  "timeout with no call in flight: own",
			in:    sp{id: 1, kind: KindServer, svc: "c", op: "GET /c", start: 0, end: 100, failed: true, tmo: true},
			calls: []sp{call(2, "d", false)},
			kind:  VerdictOwn, reason: ownership.ReasonOwn, expected: claimed,
		},
		{
			name: "a failure that is not a timeout ignores calls still running",
			in:   inbound,
			calls: []sp{
				{id: 2, parent: 1, kind: KindClient, svc: "c", op: "GET", peer: "slow", start: 10, end: 100},
			},
			kind: VerdictOwn, reason: ownership.ReasonOwn, expected: claimed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAnalyzer()
			tr := a.Link(testTrace, records(append([]sp{tt.in}, tt.calls...)...))
			vs := a.Judge(tr, tt.modes)
			require.Len(t, vs, 1)
			v := vs[0]
			assert.Equal(t, tt.kind, v.Kind, "verdict")
			assert.Equal(t, tt.reason, v.Reason, "reason")
			assert.Equal(t, tt.expected, v.Expected, "expected claim")
			assert.Len(t, v.FailedCalls, tt.failed, "failed calls")
			assert.Equal(t, tt.timedOut, v.TimedOut, "timed out")
		})
	}
}

func TestJudgeOnlyFailedRequests(t *testing.T) {
	a := NewAnalyzer()
	tr := a.Link(testTrace, records(
		sp{id: 1, kind: KindServer, svc: "a", op: "GET /a", end: 10},
		sp{id: 2, parent: 1, kind: KindClient, svc: "a", op: "GET", peer: "b", end: 5, failed: true},
		sp{id: 3, parent: 2, kind: KindServer, svc: "b", op: "GET /b", end: 5, failed: true, claim: ownership.ClaimClaimed},
	))
	vs := a.Judge(tr, modes{})
	require.Len(t, vs, 1)
	assert.Equal(t, "b", testSymbols.Name(tr.Spans[tr.Requests[vs[0].Request].Span].Service))
	assert.Equal(t, ownership.ClaimClaimed, vs[0].Sent)
	assert.Equal(t, VerdictOwn, vs[0].Kind)
}

func withClaim(s sp, c ownership.Claim) sp { s.claimRx = c; return s }

func withDecision(s sp, d ownership.RetryDecision) sp { s.decision = d; return s }

// TestClaimFromTheCalleesServerSpan: a caller without the hooks records no
// claim received, but the callee's own server span says what it sent; the
// verdict reads it there rather than calling the claim missing.
func TestClaimFromTheCalleesServerSpan(t *testing.T) {
	in := sp{id: 1, kind: KindServer, svc: "node-gateway", op: "GET /checkout", start: 0, end: 100, failed: true}
	call := sp{id: 2, parent: 1, kind: KindClient, svc: "node-gateway", op: "GET", peer: "checkout", start: 10, end: 90, failed: true}
	tests := []struct {
		name       string
		calleeSent ownership.Claim
		callRx     ownership.Claim
		want       ownership.Reason
	}{
		{"the callee claimed, the caller recorded nothing", ownership.ClaimClaimed, ownership.ClaimMissing, ownership.ReasonPropagated},
		{"the callee unclaimed, the caller recorded nothing", ownership.ClaimUnclaimed, ownership.ClaimMissing, ownership.ReasonPropagated},
		{"neither recorded a claim: missing", ownership.ClaimMissing, ownership.ClaimMissing, ownership.ReasonMissingDownstreamClaim},
		{"what the caller received wins", ownership.ClaimClaimed, ownership.ClaimUnclaimed, ownership.ReasonPropagated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			callee := sp{id: 3, parent: 2, kind: KindServer, svc: "checkout", op: "GET /checkout", start: 20, end: 80, failed: true, claim: tc.calleeSent}
			c := call
			c.claimRx = tc.callRx
			a := NewAnalyzer()
			tr := a.Link(testTrace, records(in, c, callee))
			vs := a.Judge(tr, modes{})
			var got *Verdict
			for i := range vs {
				if testSymbols.Name(tr.RequestSpan(&tr.Requests[vs[i].Request]).Service) == "node-gateway" {
					got = &vs[i]
				}
			}
			require.NotNil(t, got, "the gateway's request is judged")
			assert.Equal(t, tc.want, got.Reason)
			want := tc.callRx
			if want == ownership.ClaimMissing {
				want = tc.calleeSent
			}
			assert.Equal(t, want, tr.Calls[got.FailedCalls[0]].Claim, "the claim the call got")
		})
	}
}
