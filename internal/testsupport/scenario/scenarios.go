// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"cmp"
	"slices"
	"time"

	"github.com/errorownership/errorownership/ownership"
)

// The keys of the Expected maps, in the ownership vocabulary.
var (
	own          = ownership.ReasonOwn.String()
	propagated   = ownership.ReasonPropagated.String()
	coincidental = ownership.ReasonCoincidental.String()
	claimed      = ownership.ClaimClaimed.String()
	unclaimed    = ownership.ClaimUnclaimed.String()
	missing      = ownership.ClaimMissing.String()
)

// All returns every scenario, in a fixed order.
func All() []Scenario {
	return []Scenario{
		ChainRetryEveryHop(),
		ChainRetryBudget(),
		ChainOwnership(),
		Coincidental(),
		MissingClaims(),
		NoRetryPolicy(),
		BrokenContext(),
		Fanout(),
		GRPCStatus(),
		MessageQueue(),
		Timeout(),
		HTTP4xx(),
	}
}

// chain declares the call chain of docs/design.md §1, a → b → c → d → e → f → g:
// service x answers "GET /x" by calling the next one. d fails on its own
// on every request, after its call to e succeeded; the others fail when
// their call failed.
func chain(w *World, p Policy, hooks bool) {
	const names = "abcdefg"
	for i := range len(names) {
		name := names[i : i+1]
		s := w.Service(name).Retry(p)
		if hooks {
			s.Hooks()
		}
		s.Handle("GET /"+name, func(r *Request) Response {
			if i+1 == len(names) {
				return OK()
			}
			next := names[i+1 : i+2]
			res := r.Call(next, "GET /"+next)
			if name == "d" || res.Failed {
				return Fail()
			}
			return OK()
		})
	}
}

// forward answers by calling service's op and fails when the call failed.
func forward(service, op string) Handler {
	return func(r *Request) Response {
		if r.Call(service, op).Failed {
			return Fail()
		}
		return OK()
	}
}

// fail always fails.
func fail(*Request) Response { return Fail() }

// succeed always succeeds.
func succeed(*Request) Response { return OK() }

// ChainRetryEveryHop is docs/design.md §1's first table: every hop retries once.
func ChainRetryEveryHop() Scenario {
	w := NewWorld("chain_retry_every_hop")
	w.RouteAttr = AttrHTTPRoute
	chain(w, RetryOnce, false)
	w.Roots(10, "a", "GET /a")
	return w.Scenario(`The chain a→b→c→d→e→f→g; d fails on its own on every request. `+
		`No service has hooks and every hop retries a failed call once, marking retries with `+
		`http.request.resend_count: each hop above d doubles the load, so per root request `+
		`a serves 1, b 2, c 4 and d, e, f, g 8 requests (Ƞ, 2Ƞ, 4Ƞ, 8Ƞ for Ƞ root requests).`,
		Expected{
			Roots: 10,
			Services: map[string]ServiceExpectation{
				"a": {Served: 10, Verdicts: map[string]int{propagated: 10}, ExpectedClaims: map[string]int{unclaimed: 10}, SentClaims: map[string]int{missing: 10}},
				"b": {Served: 20, RetriesReceived: 10, Verdicts: map[string]int{propagated: 20}, ExpectedClaims: map[string]int{unclaimed: 20}, SentClaims: map[string]int{missing: 20}},
				"c": {Served: 40, RetriesReceived: 20, Verdicts: map[string]int{propagated: 40}, ExpectedClaims: map[string]int{unclaimed: 40}, SentClaims: map[string]int{missing: 40}},
				"d": {Served: 80, RetriesReceived: 40, Verdicts: map[string]int{own: 80}, ExpectedClaims: map[string]int{claimed: 80}, SentClaims: map[string]int{missing: 80}},
				"e": {Served: 80},
				"f": {Served: 80},
				"g": {Served: 80},
			},
			Edges: []EdgeExpectation{
				{"a", "GET /a", "b", "GET /b", ownership.ModeUnknown}, // 10 failed calls: too few
				{"b", "GET /b", "c", "GET /c", ownership.ModeFailClose},
				{"c", "GET /c", "d", "GET /d", ownership.ModeFailClose},
				{"d", "GET /d", "e", "GET /e", ownership.ModeUnknown}, // never failed
			},
			StormRadius: map[string]int{"a GET /a": 3},
		})
}

// ChainRetryBudget is docs/design.md §1's retry-budget table: every hop retries
// within a 10 % budget.
func ChainRetryBudget() Scenario {
	w := NewWorld("chain_retry_budget")
	w.RouteAttr = AttrHTTPRoute
	w.MarkResends = false
	chain(w, Budget(10), false)
	w.Roots(100, "a", "GET /a")
	return w.Scenario(`The chain a→b→c→d→e→f→g; d fails on its own on every request. `+
		`No service has hooks; every caller retries a failed call once within a 10 % retry budget `+
		`(a retry is allowed while retries+1 <= 10 % of the calls made so far), and nothing marks `+
		`the retries: the analysis must infer them from repeated attempts after a failure. `+
		`Each hop adds 10 %: a 100, b 110, c 121, d, e, f and g 133 (1.1Ƞ, 1.21Ƞ, 1.33Ƞ).`,
		Expected{
			Roots: 100,
			Services: map[string]ServiceExpectation{
				"a": {Served: 100, Verdicts: map[string]int{propagated: 100}, ExpectedClaims: map[string]int{unclaimed: 100}, SentClaims: map[string]int{missing: 100}},
				"b": {Served: 110, RetriesReceived: 10, Verdicts: map[string]int{propagated: 110}, ExpectedClaims: map[string]int{unclaimed: 110}, SentClaims: map[string]int{missing: 110}},
				"c": {Served: 121, RetriesReceived: 11, Verdicts: map[string]int{propagated: 121}, ExpectedClaims: map[string]int{unclaimed: 121}, SentClaims: map[string]int{missing: 121}},
				"d": {Served: 133, RetriesReceived: 12, Verdicts: map[string]int{own: 133}, ExpectedClaims: map[string]int{claimed: 133}, SentClaims: map[string]int{missing: 133}},
				"e": {Served: 133},
				"f": {Served: 133},
				"g": {Served: 133},
			},
			Edges: []EdgeExpectation{
				{"a", "GET /a", "b", "GET /b", ownership.ModeFailClose},
				{"b", "GET /b", "c", "GET /c", ownership.ModeFailClose},
				{"c", "GET /c", "d", "GET /d", ownership.ModeFailClose},
				{"d", "GET /d", "e", "GET /e", ownership.ModeUnknown},
			},
			// Root request 10 (the 10th) is retried at every hop above d.
			StormRadius: map[string]int{"a GET /a": 3},
		})
}

// ChainOwnership is docs/design.md §1's error-ownership case: only the edge
// next to the origin retries.
func ChainOwnership() Scenario {
	w := NewWorld("chain_ownership")
	w.RouteAttr = AttrHTTPRoute
	chain(w, Budget(10), true)
	w.Roots(100, "a", "GET /a")
	return w.Scenario(`The chain a→b→c→d→e→f→g; d fails on its own on every request. `+
		`Every service has the hooks and a 10 % retry budget. d claims its errors; c retries d `+
		`within its budget (10 of 100 calls), then returns the error unclaimed; b and a see it unclaimed `+
		`and do not retry (suppressed_unclaimed). a, b and c serve exactly 100, d to g 110.`,
		Expected{
			Roots: 100,
			Services: map[string]ServiceExpectation{
				"a": {Served: 100, Verdicts: map[string]int{propagated: 100}, ExpectedClaims: map[string]int{unclaimed: 100}, SentClaims: map[string]int{unclaimed: 100}},
				"b": {Served: 100, Verdicts: map[string]int{propagated: 100}, ExpectedClaims: map[string]int{unclaimed: 100}, SentClaims: map[string]int{unclaimed: 100}},
				"c": {Served: 100, Verdicts: map[string]int{propagated: 100}, ExpectedClaims: map[string]int{unclaimed: 100}, SentClaims: map[string]int{unclaimed: 100}},
				"d": {Served: 110, RetriesReceived: 10, Verdicts: map[string]int{own: 110}, ExpectedClaims: map[string]int{claimed: 110}, SentClaims: map[string]int{claimed: 110}},
				"e": {Served: 110},
				"f": {Served: 110},
				"g": {Served: 110},
			},
			Edges: []EdgeExpectation{
				{"a", "GET /a", "b", "GET /b", ownership.ModeFailClose},
				{"b", "GET /b", "c", "GET /c", ownership.ModeFailClose},
				{"c", "GET /c", "d", "GET /d", ownership.ModeFailClose},
				{"d", "GET /d", "e", "GET /e", ownership.ModeUnknown},
			},
			StormRadius: map[string]int{"a GET /a": 1},
		})
}

// Coincidental is a service failing for its own reason while a call it
// tolerates also failed.
func Coincidental() Scenario {
	const (
		ok           = "nothing fails"
		recsDown     = "recommendations fail, checkout copes"
		paymentsDown = "payments fail"
		coincident   = "recommendations fail and checkout fails on its own"
		bothDown     = "recommendations and payments fail"
		checkoutBug  = "checkout fails on its own"
		paymentsBlip = "payments fail once, the retry succeeds"
	)
	kinds := schedule(
		runs{ok, 40}, runs{recsDown, 160}, runs{paymentsDown, 40}, runs{coincident, 10},
		runs{bothDown, 5}, runs{checkoutBug, 5}, runs{paymentsBlip, 5},
	)

	w := NewWorld("coincidental")
	w.Service("checkout").Hooks().Retry(RetryOnce).FailOpen("recommendations").
		Handle("POST /checkout", func(r *Request) Response {
			r.Call("recommendations", "GET /recommendations") // fail-open: the page shows without them
			pay := r.Call("payments", "POST /payments")
			if pay.Failed || kinds[r.Root] == coincident || kinds[r.Root] == checkoutBug {
				return Fail()
			}
			return OK()
		})
	w.Service("recommendations").Hooks().Handle("GET /recommendations", func(r *Request) Response {
		switch kinds[r.Root] {
		case recsDown, coincident, bothDown:
			return Fail()
		}
		return OK()
	})
	w.Service("payments").Hooks().Handle("POST /payments", func(r *Request) Response {
		switch kinds[r.Root] {
		case paymentsDown, bothDown:
			return Fail()
		case paymentsBlip:
			if r.Attempt == 0 {
				return Fail()
			}
		}
		return OK()
	})
	w.Roots(len(kinds), "checkout", "POST /checkout")
	return w.Scenario(`checkout calls recommendations, which it tolerates (fail-open), then payments, `+
		`which it needs (fail-close); all three have the hooks and checkout retries a failed call once. `+
		`Of 265 checkouts, 160 survive a recommendations failure and 40 fail with payments, so the model `+
		`learns both edges. 10 checkouts fail for their own reason while recommendations also failed: `+
		`coincidental, and checkout claims them. 5 fail with both calls failed (propagated, payments is `+
		`fail-close), 5 fail with no failed call (own), and 5 see payments fail once and the retry succeed.`,
		Expected{
			Roots: 265,
			Services: map[string]ServiceExpectation{
				"checkout": {
					Served:         265,
					Verdicts:       map[string]int{own: 5, propagated: 45, coincidental: 10},
					ExpectedClaims: map[string]int{claimed: 15, unclaimed: 45},
					SentClaims:     map[string]int{claimed: 15, unclaimed: 45},
				},
				"recommendations": {Served: 440, RetriesReceived: 175, Verdicts: map[string]int{own: 350}, ExpectedClaims: map[string]int{claimed: 350}, SentClaims: map[string]int{claimed: 350}},
				"payments":        {Served: 315, RetriesReceived: 50, Verdicts: map[string]int{own: 95}, ExpectedClaims: map[string]int{claimed: 95}, SentClaims: map[string]int{claimed: 95}},
			},
			Edges: []EdgeExpectation{
				{"checkout", "POST /checkout", "recommendations", "GET /recommendations", ownership.ModeFailOpen}, // k/n = 10/170, failed alone
				{"checkout", "POST /checkout", "payments", "POST /payments", ownership.ModeFailClose},             // 40/40
			},
			StormRadius: map[string]int{"checkout POST /checkout": 1},
		})
}

// MissingClaims is a service without hooks in the middle of a chain.
func MissingClaims() Scenario {
	w := NewWorld("missing_claims")
	w.Service("a").Hooks().Retry(Budget(50)).Handle("GET /a", forward("b", "GET /b"))
	w.Service("b").Retry(RetryOnce).Handle("GET /b", forward("c", "GET /c")) // no hooks
	w.Service("c").Hooks().Handle("GET /c", fail)
	w.Roots(30, "a", "GET /a")
	return w.Scenario(`a (hooks) → b (no hooks) → c (hooks); c fails on its own on every request and `+
		`claims it. b retries c once, blindly, and returns a 500 with no claim. a receives the claim `+
		`"missing", retries b within its 50 % budget (15 of 30 calls; suppressed_budget for the others), `+
		`and as the first hop able to, returns the error unclaimed with reason missing_downstream_claim.`,
		Expected{
			Roots: 30,
			Services: map[string]ServiceExpectation{
				"a": {Served: 30, Verdicts: map[string]int{propagated: 30}, ExpectedClaims: map[string]int{unclaimed: 30}, SentClaims: map[string]int{unclaimed: 30}},
				"b": {Served: 45, RetriesReceived: 15, Verdicts: map[string]int{propagated: 45}, ExpectedClaims: map[string]int{unclaimed: 45}, SentClaims: map[string]int{missing: 45}},
				"c": {Served: 90, RetriesReceived: 45, Verdicts: map[string]int{own: 90}, ExpectedClaims: map[string]int{claimed: 90}, SentClaims: map[string]int{claimed: 90}},
			},
			Edges: []EdgeExpectation{
				{"a", "GET /a", "b", "GET /b", ownership.ModeFailClose},
				{"b", "GET /b", "c", "GET /c", ownership.ModeFailClose},
			},
			StormRadius: map[string]int{"a GET /a": 2},
		})
}

// NoRetryPolicy is the at-least-one-retry rule: the hop next to the origin
// cannot retry, so it passes the error up claimed.
func NoRetryPolicy() Scenario {
	w := NewWorld("no_retry_policy")
	w.Service("web").Hooks().Retry(RetryOnce).Handle("POST /checkout", forward("orders", "POST /orders"))
	w.Service("orders").Hooks().Handle("POST /orders", forward("payments", "POST /charge")) // a charge is not idempotent: no retry policy
	w.Service("payments").Hooks().Handle("POST /charge", fail)
	w.Roots(30, "web", "POST /checkout")
	return w.Scenario(`web → orders → payments, all with hooks; payments fails on its own on every request and claims it. `+
		`orders has no retry policy for the charge (not idempotent), so it records no_policy and passes the `+
		`error up still claimed, though propagated: the retry moves one hop up. web retries orders once, `+
		`then returns the error unclaimed.`,
		Expected{
			Roots: 30,
			Services: map[string]ServiceExpectation{
				"web":      {Served: 30, Verdicts: map[string]int{propagated: 30}, ExpectedClaims: map[string]int{unclaimed: 30}, SentClaims: map[string]int{unclaimed: 30}},
				"orders":   {Served: 60, RetriesReceived: 30, Verdicts: map[string]int{propagated: 60}, ExpectedClaims: map[string]int{claimed: 60}, SentClaims: map[string]int{claimed: 60}},
				"payments": {Served: 60, Verdicts: map[string]int{own: 60}, ExpectedClaims: map[string]int{claimed: 60}, SentClaims: map[string]int{claimed: 60}},
			},
			Edges: []EdgeExpectation{
				{"web", "POST /checkout", "orders", "POST /orders", ownership.ModeFailClose},
				{"orders", "POST /orders", "payments", "POST /charge", ownership.ModeFailClose},
			},
			StormRadius: map[string]int{"web POST /checkout": 1},
		})
}

// BrokenContext is trace context lost inside a service.
func BrokenContext() Scenario {
	w := NewWorld("broken_context")
	w.Service("a").Hooks().Retry(RetryOnce).Handle("GET /a", forward("b", "GET /b"))
	w.Service("b").Hooks().Retry(RetryOnce).Handle("GET /b", forward("c", "GET /c"))
	w.Service("c").Hooks().Handle("GET /c", func(r *Request) Response {
		// A background goroutine drops the context: the call to d
		// starts a trace of its own, and c's hooks cannot see it fail.
		if r.CallWith(Target{Service: "d", Operation: "GET /d", LoseContext: true}).Failed {
			return Fail()
		}
		return OK()
	})
	w.Service("d").Hooks().Handle("GET /d", fail)
	w.Roots(30, "a", "GET /a")
	return w.Scenario(`a → b → c → d, all with hooks; d fails on its own on every request. Inside c the trace `+
		`context is lost: c's client span to d starts a new trace with no parent, d's span below it. In the `+
		`main traces c makes no call, so its error is its own, and c claims it itself. b retries c once `+
		`(the retry point moves one hop up) and returns the error unclaimed; a does not retry. Each of the `+
		`60 requests c served left a parentless CLIENT span in a trace of its own, and d's request below `+
		`it is that trace's root request.`,
		Expected{
			Roots: 90,
			Services: map[string]ServiceExpectation{
				"a": {Served: 30, Verdicts: map[string]int{propagated: 30}, ExpectedClaims: map[string]int{unclaimed: 30}, SentClaims: map[string]int{unclaimed: 30}},
				"b": {Served: 30, Verdicts: map[string]int{propagated: 30}, ExpectedClaims: map[string]int{unclaimed: 30}, SentClaims: map[string]int{unclaimed: 30}},
				"c": {Served: 60, RetriesReceived: 30, Verdicts: map[string]int{own: 60}, ExpectedClaims: map[string]int{claimed: 60}, SentClaims: map[string]int{claimed: 60}},
				"d": {Served: 60, Verdicts: map[string]int{own: 60}, ExpectedClaims: map[string]int{claimed: 60}, SentClaims: map[string]int{claimed: 60}},
			},
			Edges: []EdgeExpectation{
				{"a", "GET /a", "b", "GET /b", ownership.ModeFailClose},
				{"b", "GET /b", "c", "GET /c", ownership.ModeFailClose},
			},
			StormRadius:   map[string]int{"a GET /a": 1},
			BrokenContext: 60,
		})
}

// Fanout is parallel calls, two logical calls to one destination, an
// INTERNAL span between a request and its calls, and lost client spans.
func Fanout() Scenario {
	w := NewWorld("fanout")
	w.PeerAttr = AttrPeerService
	w.Service("frontend").SplitBatches().Handle("GET /product", func(r *Request) Response {
		failed := false
		page := func() {
			res := r.Parallel(
				Target{Service: "catalog", Operation: "GET /item"},
				Target{Service: "pricing", Operation: "GET /price"},
				Target{Service: "inventory", Operation: "GET /stock"},
			)
			if res[2].Failed {
				failed = true
				return
			}
			r.Call("pricing", "GET /price") // the bundle's price: a second logical call, not a retry
		}
		if r.Root%4 == 0 {
			r.Internal("render product page", page)
		} else {
			page()
		}
		if failed {
			return Fail()
		}
		return OK()
	})
	w.Service("catalog").Handle("GET /item", succeed)
	w.Service("pricing").Handle("GET /price", succeed)
	w.Service("inventory").Handle("GET /stock", func(r *Request) Response {
		if r.Root%3 == 2 {
			return Fail()
		}
		return OK()
	})
	w.Roots(75, "frontend", "GET /product")
	return w.Scenario(`frontend calls catalog, pricing and inventory in parallel, then pricing a second time `+
		`after the first call succeeded: two logical calls, not a retry. Nobody has hooks or retries. `+
		`inventory fails in every third request (25 of 75) and frontend fails with it: propagated. In every `+
		`fourth request the calls go through an INTERNAL span; frontend exports its client spans in a `+
		`ResourceSpans of their own. pricing serves 75 + 50.`,
		Expected{
			Roots: 75,
			Services: map[string]ServiceExpectation{
				"frontend":  {Served: 75, Verdicts: map[string]int{propagated: 25}, ExpectedClaims: map[string]int{unclaimed: 25}, SentClaims: map[string]int{missing: 25}},
				"catalog":   {Served: 75},
				"pricing":   {Served: 125}, // 75 first calls, 50 second ones where inventory answered
				"inventory": {Served: 75, Verdicts: map[string]int{own: 25}, ExpectedClaims: map[string]int{claimed: 25}, SentClaims: map[string]int{missing: 25}},
			},
			Edges: []EdgeExpectation{
				{"frontend", "GET /product", "inventory", "GET /stock", ownership.ModeFailClose},
				{"frontend", "GET /product", "pricing", "GET /price", ownership.ModeUnknown},
			},
			StormRadius: map[string]int{"frontend GET /product": 0},
		})
}

// GRPCStatus is gRPC status codes in their three spellings, and codes that
// are not errors.
func GRPCStatus() Scenario {
	w := NewWorld("grpc_status")
	w.PeerAttr = AttrPeerService
	w.Service("orders").GRPC(AttrGRPCStatusCode).Handle("shop.Orders/PlaceOrder", func(r *Request) Response {
		// Any code but OK from stock or quotes is passed up as it is:
		// UNAVAILABLE and INTERNAL as errors, NOT_FOUND and
		// INVALID_ARGUMENT as plain answers.
		if res := r.Call("stock", "shop.Stock/Reserve"); res.Code != GRPCOK {
			return Status(res.Code)
		}
		if res := r.Call("quotes", "shop.Quotes/Quote"); res.Code != GRPCOK {
			return Status(res.Code)
		}
		if res := r.Call("tax", "shop.Tax/Compute"); res.Failed {
			return Status(res.Code)
		} // NOT_FOUND: no tax applies
		if r.Root%10 == 6 {
			return Status(GRPCUnknown)
		}
		return OK()
	})
	w.Service("stock").GRPC(AttrGRPCStatusCode).Handle("shop.Stock/Reserve", func(r *Request) Response {
		switch r.Root % 10 {
		case 0:
			return Status(GRPCUnavailable)
		case 3:
			return Status(GRPCNotFound)
		}
		return OK()
	})
	w.Service("quotes").GRPC(AttrRPCResponseStatusCode).Handle("shop.Quotes/Quote", func(r *Request) Response {
		switch r.Root % 10 {
		case 1:
			return Status(GRPCInternal)
		case 4:
			return Status(GRPCInvalidArgument)
		}
		return OK()
	})
	w.Service("tax").GRPC(AttrRPCStatusCode).Handle("shop.Tax/Compute", func(r *Request) Response {
		switch r.Root % 10 {
		case 2:
			return Status(GRPCInternal)
		case 5:
			return Status(GRPCNotFound).WithSpanError() // status ERROR, but the code says it is no error
		}
		return OK()
	})
	w.Roots(300, "orders", "shop.Orders/PlaceOrder")
	return w.Scenario(`orders calls stock, quotes and tax over gRPC, one after the other, and stops at the `+
		`first answer that is not OK. Each hop spells the status its own way: rpc.grpc.status_code (int) for `+
		`orders and stock, rpc.response.status_code (name) for quotes, rpc.status_code (int) for tax. stock `+
		`fails with UNAVAILABLE, quotes and tax with INTERNAL, 30 times each, and orders passes the code up `+
		`(propagated); orders also fails 30 times with UNKNOWN on its own. NOT_FOUND from stock and `+
		`INVALID_ARGUMENT from quotes are answers, not errors (span status unset), and so is tax's NOT_FOUND `+
		`though its server span says ERROR: the code wins.`,
		Expected{
			Roots: 300,
			Services: map[string]ServiceExpectation{
				"orders": {Served: 300, Verdicts: map[string]int{own: 30, propagated: 90}, ExpectedClaims: map[string]int{claimed: 30, unclaimed: 90}, SentClaims: map[string]int{missing: 120}},
				"stock":  {Served: 300, Verdicts: map[string]int{own: 30}, ExpectedClaims: map[string]int{claimed: 30}, SentClaims: map[string]int{missing: 30}},
				"quotes": {Served: 240, Verdicts: map[string]int{own: 30}, ExpectedClaims: map[string]int{claimed: 30}, SentClaims: map[string]int{missing: 30}},
				"tax":    {Served: 180, Verdicts: map[string]int{own: 30}, ExpectedClaims: map[string]int{claimed: 30}, SentClaims: map[string]int{missing: 30}},
			},
			Edges: []EdgeExpectation{
				{"orders", "shop.Orders/PlaceOrder", "stock", "shop.Stock/Reserve", ownership.ModeFailClose},
				{"orders", "shop.Orders/PlaceOrder", "quotes", "shop.Quotes/Quote", ownership.ModeFailClose},
				{"orders", "shop.Orders/PlaceOrder", "tax", "shop.Tax/Compute", ownership.ModeFailClose},
			},
		})
}

// MessageQueue is an asynchronous hop: a message published by one request
// and consumed by another service.
func MessageQueue() Scenario {
	w := NewWorld("message_queue")
	w.RouteAttr = "" // the worker names ledger's operation by the span name alone
	w.Service("api").Handle("POST /orders", func(r *Request) Response {
		r.Publish("orders", "worker", "orders process")
		return Status(202)
	})
	w.Service("worker").Consume("orders process", func(r *Request) Response {
		if r.Call("ledger", "POST /entries").Failed {
			return Fail()
		}
		if r.Root%6 == 1 {
			return Fail() // a malformed order
		}
		return OK()
	})
	w.Service("ledger").Handle("POST /entries", func(r *Request) Response {
		if r.Root%3 == 0 {
			return Fail()
		}
		return OK()
	})
	w.Roots(90, "api", "POST /orders")
	return w.Scenario(`api accepts an order (202) and publishes it: a PRODUCER span "orders publish", then `+
		`worker's CONSUMER span "orders process" as its child, after api answered. worker writes to ledger. `+
		`ledger fails in every third message (30 of 90) and the consumer fails with it: propagated. worker `+
		`also fails on its own for 15 malformed orders. api never fails: the hop is asynchronous.`,
		Expected{
			Roots: 90,
			Services: map[string]ServiceExpectation{
				"api":    {Served: 90},
				"worker": {Served: 90, Verdicts: map[string]int{own: 15, propagated: 30}, ExpectedClaims: map[string]int{claimed: 15, unclaimed: 30}, SentClaims: map[string]int{missing: 45}},
				"ledger": {Served: 90, Verdicts: map[string]int{own: 30}, ExpectedClaims: map[string]int{claimed: 30}, SentClaims: map[string]int{missing: 30}},
			},
			Edges: []EdgeExpectation{
				{"worker", "orders process", "ledger", "POST /entries", ownership.ModeFailClose},
			},
		})
}

// Timeout is a request that gives up while its call is still in flight.
func Timeout() Scenario {
	const (
		ok         = "nothing fails"
		slowFails  = "slow fails fast, gateway copes"
		slowHangs  = "slow hangs, gateway gives up"
		gatewayBug = "gateway fails on its own"
	)
	kinds := schedule(runs{ok, 50}, runs{slowFails, 100}, runs{slowHangs, 10}, runs{gatewayBug, 5})

	w := NewWorld("timeout")
	w.Service("gateway").Handle("GET /home", func(r *Request) Response {
		res := r.CallWith(Target{Service: "slow", Operation: "GET /slow", Timeout: 50 * time.Millisecond})
		switch {
		case res.TimedOut:
			return GiveUp()
		case kinds[r.Root] == gatewayBug:
			return Fail()
		}
		return OK() // a failed call is fine: the page shows without it
	})
	w.Service("slow").Handle("GET /slow", func(r *Request) Response {
		switch kinds[r.Root] {
		case slowFails:
			return Fail()
		case slowHangs:
			r.Work(200 * time.Millisecond)
		}
		return OK()
	})
	w.Roots(len(kinds), "gateway", "GET /home")
	return w.Scenario(`gateway calls slow with a 50 ms timeout. When slow fails fast (100 of 165 requests) `+
		`gateway copes, so the model learns the edge fail-open (k/n = 10/110). 10 times slow hangs: gateway `+
		`gives up (504, error.type timeout) and its client span ends with its server span, while slow's span `+
		`ends some 150 ms later, successful. Those errors are propagated all the same: gateway timed out waiting `+
		`for slow. gateway also fails 5 times on its own.`,
		Expected{
			Roots: 165,
			Services: map[string]ServiceExpectation{
				"gateway": {Served: 165, Verdicts: map[string]int{own: 5, propagated: 10}, ExpectedClaims: map[string]int{claimed: 5, unclaimed: 10}, SentClaims: map[string]int{missing: 15}},
				"slow":    {Served: 165, Verdicts: map[string]int{own: 100}, ExpectedClaims: map[string]int{claimed: 100}, SentClaims: map[string]int{missing: 100}},
			},
			Edges: []EdgeExpectation{
				{"gateway", "GET /home", "slow", "GET /slow", ownership.ModeFailOpen},
			},
		})
}

// HTTP4xx is client errors, which are nobody's failure.
func HTTP4xx() Scenario {
	w := NewWorld("http_4xx")
	w.PeerAttr = "" // only server.address names the callee
	w.Service("web").Handle("GET /profile", func(r *Request) Response {
		res := r.Call("users", "GET /users/{id}")
		switch {
		case res.Failed:
			return Fail()
		case res.Code == 404 && r.Root%6 == 4:
			return Fail() // web mishandles the unknown user: its own bug
		case res.Code == 404:
			return Status(404)
		}
		return OK()
	})
	postgres := DB{System: "postgresql", Name: "postgres", AsService: true}
	w.Service("users").Handle("GET /users/{id}", func(r *Request) Response {
		r.Query(postgres, "SELECT users")
		switch r.Root % 6 {
		case 3, 4:
			return Status(404)
		case 5:
			return Fail()
		}
		return OK()
	})
	w.Roots(150, "web", "GET /profile")
	return w.Scenario(`web calls users, which queries postgres in-process: that CLIENT span reports under a `+
		`resource of its own, service.name "postgres", below users' server span. users answers 404 in 50 of `+
		`150 requests (server span status unset, client span status ERROR as the conventions say): 25 times `+
		`web answers 404 too, no error anywhere; 25 times web fails with a 500, its own error, since a 4xx `+
		`call is not a failed call. users also fails 25 times (500) and web with it: propagated.`,
		Expected{
			Roots: 150,
			Services: map[string]ServiceExpectation{
				"web":      {Served: 150, Verdicts: map[string]int{own: 25, propagated: 25}, ExpectedClaims: map[string]int{claimed: 25, unclaimed: 25}, SentClaims: map[string]int{missing: 50}},
				"users":    {Served: 150, Verdicts: map[string]int{own: 25}, ExpectedClaims: map[string]int{claimed: 25}, SentClaims: map[string]int{missing: 25}},
				"postgres": {Served: 0},
			},
			Edges: []EdgeExpectation{
				{"web", "GET /profile", "users", "GET /users/{id}", ownership.ModeFailClose},
			},
		})
}

// runs is a number of root requests of one kind.
type runs struct {
	kind string
	n    int
}

// schedule spreads the runs evenly over the root requests, as traffic mixes
// them: the j-th of n requests of a kind sits at (j+½)/n of the way, ties
// in the order given. schedule(...)[i] is the kind of root request i.
func schedule(rs ...runs) []string {
	type slot struct {
		kind     string
		num, den int // position (2j+1)/(2n)
		order    int
	}
	var slots []slot
	for o, r := range rs {
		for j := range r.n {
			slots = append(slots, slot{r.kind, 2*j + 1, 2 * r.n, o})
		}
	}
	slices.SortStableFunc(slots, func(a, b slot) int {
		if c := cmp.Compare(a.num*b.den, b.num*a.den); c != 0 {
			return c
		}
		return cmp.Compare(a.order, b.order)
	})
	kinds := make([]string, len(slots))
	for i, s := range slots {
		kinds[i] = s.kind
	}
	return kinds
}
