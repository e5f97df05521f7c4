// SPDX-License-Identifier: Apache-2.0

// Package chaintest is the table both the HTTP and the gRPC hooks are tested
// against: a chain of three services A → B → C in which C fails, walked
// through every row of the decision matrix (docs/design.md §4.3) and the
// three refinements of §4.4, with and without hooks on B. Each
// transport's tests build the chain from real servers on 127.0.0.1 and
// check what each service saw and claimed.
package chaintest

import (
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/errorownership/errorownership/ownership"
)

// Leaf is what C does with a request.
type Leaf int

const (
	// LeafOK answers successfully.
	LeafOK Leaf = iota
	// LeafFail fails on its own (500 / INTERNAL).
	LeafFail
	// LeafUnclaim fails and unclaims the error in its handler, as a C whose
	// own dependency failed would.
	LeafUnclaim
	// LeafHang does not answer until its caller gives up.
	LeafHang
)

// Middle configures B. A always has hooks with a retry policy.
type Middle struct {
	// Hooks puts the middleware and the client hook on B; without, B has a
	// plain server and a plain client that never retries.
	Hooks bool
	// NoPolicy gives B's client no retry policy for its call to C.
	NoPolicy bool
	// EmptyBudget gives B's client a budget with nothing in it.
	EmptyBudget bool
	// Broken makes B call C with a context that lost the request's (and
	// its Ledger): the broken-context refinement.
	Broken bool
	// Timeout makes B give up after a short while and answer with a
	// timeout while its call to C is still in flight.
	Timeout bool
}

// Case is one row. Every client makes at most two attempts per call.
type Case struct {
	Name string
	// CHooks puts the middleware on C.
	CHooks bool
	C      Leaf
	B      Middle

	// WantA, WantB, WantC are the requests each service saw.
	WantA, WantB, WantC int
	// WantFromC and WantFromB are the claims B and A read on each response
	// they got from C and B: "claimed", "unclaimed" or "" for none.
	WantFromC, WantFromB []string
	// WantRoot is the claim on A's answer to the (plain) root client.
	WantRoot string
	// WantRetryAttempts are the retry-attempt numbers C saw, in order
	// ("" when absent, i.e. the first attempt).
	WantRetryAttempts []string
	// WantBClaim and WantBReason are error_ownership.claim.sent and error_ownership.claim.reason on
	// B's server spans ("" to skip).
	WantBClaim, WantBReason string
	// WantBDecisions are error_ownership.retry.decision on B's attempt spans to C, in
	// order, "" for an attempt without one (nil to skip).
	WantBDecisions []string
	// WantADecisions likewise for A's attempts to B.
	WantADecisions []string
}

// Cases returns the table.
func Cases() []Case {
	return []Case{
		{
			Name: "C succeeds", CHooks: true, C: LeafOK, B: Middle{Hooks: true},
			WantA: 1, WantB: 1, WantC: 1,
			WantFromC: []string{""}, WantFromB: []string{""}, WantRoot: "",
			WantRetryAttempts: []string{""},
			WantBDecisions:    []string{""}, WantADecisions: []string{""},
		},
		{
			Name: "matrix: C has no hooks (missing): B retries, then unclaims", C: LeafFail, B: Middle{Hooks: true},
			WantA: 1, WantB: 1, WantC: 2,
			WantFromC: []string{"", ""}, WantFromB: []string{"unclaimed"}, WantRoot: "unclaimed",
			WantRetryAttempts: []string{"", "1"},
			WantBClaim:        "unclaimed", WantBReason: "missing_downstream_claim",
			WantBDecisions: []string{"retried", "exhausted"}, WantADecisions: []string{"suppressed_unclaimed"},
		},
		{
			Name: "matrix: C claims: B retries, then unclaims", CHooks: true, C: LeafFail, B: Middle{Hooks: true},
			WantA: 1, WantB: 1, WantC: 2,
			WantFromC: []string{"claimed", "claimed"}, WantFromB: []string{"unclaimed"}, WantRoot: "unclaimed",
			WantRetryAttempts: []string{"", "1"},
			WantBClaim:        "unclaimed", WantBReason: "propagated",
			WantBDecisions: []string{"retried", "exhausted"}, WantADecisions: []string{"suppressed_unclaimed"},
		},
		{
			Name: "matrix: C unclaims: nobody retries", CHooks: true, C: LeafUnclaim, B: Middle{Hooks: true},
			WantA: 1, WantB: 1, WantC: 1,
			WantFromC: []string{"unclaimed"}, WantFromB: []string{"unclaimed"}, WantRoot: "unclaimed",
			WantRetryAttempts: []string{""},
			WantBClaim:        "unclaimed", WantBReason: "propagated",
			WantBDecisions: []string{"suppressed_unclaimed"}, WantADecisions: []string{"suppressed_unclaimed"},
		},
		{
			Name: "matrix: budget empty at B: B unclaims", CHooks: true, C: LeafFail, B: Middle{Hooks: true, EmptyBudget: true},
			WantA: 1, WantB: 1, WantC: 1,
			WantFromC: []string{"claimed"}, WantFromB: []string{"unclaimed"}, WantRoot: "unclaimed",
			WantRetryAttempts: []string{""},
			WantBClaim:        "unclaimed", WantBReason: "propagated",
			WantBDecisions: []string{"suppressed_budget"}, WantADecisions: []string{"suppressed_unclaimed"},
		},
		{
			Name: "at least one retry: B has no policy, C claims: B passes it up claimed, A retries", CHooks: true, C: LeafFail,
			B:     Middle{Hooks: true, NoPolicy: true},
			WantA: 1, WantB: 2, WantC: 2,
			WantFromC: []string{"claimed", "claimed"}, WantFromB: []string{"claimed", "claimed"}, WantRoot: "unclaimed",
			WantRetryAttempts: []string{"", ""},
			WantBClaim:        "claimed", WantBReason: "propagated",
			WantBDecisions: []string{"no_policy", "no_policy"}, WantADecisions: []string{"retried", "exhausted"},
		},
		{
			Name: "at least one retry: B has no policy, C has no hooks", C: LeafFail, B: Middle{Hooks: true, NoPolicy: true},
			WantA: 1, WantB: 2, WantC: 2,
			WantFromC: []string{"", ""}, WantFromB: []string{"claimed", "claimed"}, WantRoot: "unclaimed",
			WantRetryAttempts: []string{"", ""},
			WantBClaim:        "claimed", WantBReason: "propagated",
			WantBDecisions: []string{"no_policy", "no_policy"}, WantADecisions: []string{"retried", "exhausted"},
		},
		{
			Name: "B has no hooks, C claims: A sees no claim, retries B, unclaims", CHooks: true, C: LeafFail, B: Middle{},
			WantA: 1, WantB: 2, WantC: 2,
			WantFromC: []string{"claimed", "claimed"}, WantFromB: []string{"", ""}, WantRoot: "unclaimed",
			WantRetryAttempts: []string{"", ""},
			WantADecisions:    []string{"retried", "exhausted"},
		},
		{
			Name: "B and C have no hooks: A retries B, unclaims", C: LeafFail, B: Middle{},
			WantA: 1, WantB: 2, WantC: 2,
			WantFromC: []string{"", ""}, WantFromB: []string{"", ""}, WantRoot: "unclaimed",
			WantRetryAttempts: []string{"", ""},
			WantADecisions:    []string{"retried", "exhausted"},
		},
		{
			Name: "timeouts: B gives up while its call to C is in flight: propagated", CHooks: true, C: LeafHang,
			B:     Middle{Hooks: true, Timeout: true},
			WantA: 1, WantB: 1, WantC: 1,
			WantFromC: []string{}, WantFromB: []string{"unclaimed"}, WantRoot: "unclaimed",
			WantRetryAttempts: []string{""},
			WantBClaim:        "unclaimed", WantBReason: "propagated",
			WantADecisions: []string{"suppressed_unclaimed"},
		},
		{
			Name: "broken context: B cannot see C fail and claims: the retry point moves one hop up", CHooks: true, C: LeafFail,
			B:     Middle{Hooks: true, Broken: true},
			WantA: 1, WantB: 2, WantC: 4,
			WantFromC: []string{"claimed", "claimed", "claimed", "claimed"}, WantFromB: []string{"claimed", "claimed"}, WantRoot: "unclaimed",
			WantRetryAttempts: []string{"", "1", "", "1"},
			WantBClaim:        "claimed", WantBReason: "own",
			WantADecisions: []string{"retried", "exhausted"},
		},
	}
}

// Observed is what one service of a chain recorded while a case ran.
type Observed struct {
	Name string
	// Served counts the requests it served.
	Served int
	// Attempts are the retry-attempt values on the requests it served.
	Attempts []string
	// Claims are the claims it read on each response from its callee.
	Claims []string
	// Spans are its ended spans.
	Spans *tracetest.SpanRecorder
}

// Check compares what A, B and C observed with the case; attemptKey names
// the retry-attempt header or metadata key for messages.
func Check(t *testing.T, tc Case, attemptKey string, a, b, c Observed) {
	t.Helper()
	for _, s := range []struct {
		o    Observed
		want int
	}{{a, tc.WantA}, {b, tc.WantB}, {c, tc.WantC}} {
		if s.o.Served != s.want {
			t.Errorf("%s served %d requests, want %d", s.o.Name, s.o.Served, s.want)
		}
	}
	if !slices.Equal(b.Claims, tc.WantFromC) {
		t.Errorf("B read claims %q from C, want %q", b.Claims, tc.WantFromC)
	}
	if !slices.Equal(a.Claims, tc.WantFromB) {
		t.Errorf("A read claims %q from B, want %q", a.Claims, tc.WantFromB)
	}
	if !slices.Equal(c.Attempts, tc.WantRetryAttempts) {
		t.Errorf("C saw %s %q, want %q", attemptKey, c.Attempts, tc.WantRetryAttempts)
	}
	if tc.WantBClaim != "" {
		claims := SpanAttrs(b.Spans, trace.SpanKindServer, ownership.AttrClaim, tc.WantB)
		reasons := SpanAttrs(b.Spans, trace.SpanKindServer, ownership.AttrClaimReason, tc.WantB)
		for i := range claims {
			if claims[i] != tc.WantBClaim || reasons[i] != tc.WantBReason {
				t.Errorf("B's server span %d: error_ownership.claim.sent %q, reason %q; want %q, %q", i, claims[i], reasons[i], tc.WantBClaim, tc.WantBReason)
			}
		}
	}
	if tc.WantBDecisions != nil {
		got := SpanAttrs(b.Spans, trace.SpanKindClient, ownership.AttrRetryDecision, len(tc.WantBDecisions))
		if !slices.Equal(got, tc.WantBDecisions) {
			t.Errorf("B's attempt spans: error_ownership.retry.decision %q, want %q", got, tc.WantBDecisions)
		}
	}
	if got := SpanAttrs(a.Spans, trace.SpanKindClient, ownership.AttrRetryDecision, len(tc.WantADecisions)); !slices.Equal(got, tc.WantADecisions) {
		t.Errorf("A's attempt spans: error_ownership.retry.decision %q, want %q", got, tc.WantADecisions)
	}
}

// SpanAttrs returns attribute key of the recorder's ended spans of kind, in
// the order they started, waiting briefly for n of them: a server span ends
// just after its response is written.
func SpanAttrs(spans *tracetest.SpanRecorder, kind trace.SpanKind, key string, n int) []string {
	var out []string
	for _, sp := range endedSpans(spans, kind, n) {
		v := ""
		for _, kv := range sp.Attributes() {
			if kv.Key == attribute.Key(key) {
				v = kv.Value.String()
			}
		}
		out = append(out, v)
	}
	return out
}

// hookAttrs are the attributes the hooks set.
var hookAttrs = []attribute.Key{ownership.AttrRetryAttempt, ownership.AttrHTTPResendCount, ownership.AttrClaimReceived,
	ownership.AttrRetryDecision, ownership.AttrClaim, ownership.AttrClaimReason}

// HookAttributes returns the attributes the hooks set on each of the
// recorder's ended spans of kind, as the conformance vectors state them
// (JSON's numbers and strings), in the order the spans started, waiting
// briefly for n of them.
func HookAttributes(spans *tracetest.SpanRecorder, kind trace.SpanKind, n int) []map[string]any {
	return hookAttributes(endedSpans(spans, kind, n))
}

func hookAttributes(spans []sdktrace.ReadOnlySpan) []map[string]any {
	out := make([]map[string]any, 0, len(spans))
	for _, sp := range spans {
		m := map[string]any{}
		for _, kv := range sp.Attributes() {
			if !slices.Contains(hookAttrs, kv.Key) {
				continue
			}
			if kv.Value.Type() == attribute.INT64 {
				m[string(kv.Key)] = float64(kv.Value.AsInt64())
			} else {
				m[string(kv.Key)] = kv.Value.AsString()
			}
		}
		out = append(out, m)
	}
	return out
}

// endedSpans returns the recorder's ended spans of kind in the order they
// started, which is the attempts' order (an attempt's span ends when its
// body is closed, which may come after the next attempt's began), waiting
// up to 5 s for n of them.
func endedSpans(spans *tracetest.SpanRecorder, kind trace.SpanKind, n int) []sdktrace.ReadOnlySpan {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var out []sdktrace.ReadOnlySpan
		for _, sp := range spans.Ended() {
			if sp.SpanKind() == kind {
				out = append(out, sp)
			}
		}
		if len(out) >= n || time.Now().After(deadline) {
			slices.SortStableFunc(out, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
			return out
		}
		time.Sleep(5 * time.Millisecond)
	}
}
