// Package chaintest is the table both the HTTP and the gRPC hooks are tested
// against: a chain of three services A → B → C in which C fails, walked
// through every row of the article's decision matrix (Figure 4) and the
// three refinements of DESIGN §3, with and without hooks on B. Each
// transport's tests build the chain from real servers on 127.0.0.1 and
// check what each service saw and claimed.
package chaintest

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
	// WantBClaim and WantBReason are error.claim and error.claim.reason on
	// B's server spans ("" to skip).
	WantBClaim, WantBReason string
	// WantBDecisions are retry.decision on B's attempt spans to C, in
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
