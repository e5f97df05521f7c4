// SPDX-License-Identifier: Apache-2.0

// Package hooks is the core of the error-ownership SDK hooks: the pure
// decisions of docs/design.md §4, the request-scoped Ledger that feeds them, and the
// retry Budget. The transports and middleware live in hookshttp and
// hooksgrpc; the hint client in hints. This package depends on nothing of
// ours but the shared vocabulary (ownership), and on no tracing library, so
// the decisions can be tested and reused without a network.
//
// # The two decisions
//
// A server, when its inbound request ends in an error, decides what to tell
// its caller (Claim; docs/design.md §4.2 and §4.4):
//
//	outbound logical calls in the request          claim      reason
//	none failed                                    claimed    own
//	a failed one on a fail-close or unknown edge   unclaimed  propagated
//	  … and every such callee sent no claim        unclaimed  missing_downstream_claim
//	  … but every such call had no retry policy
//	    here (no_policy) and no callee unclaimed   claimed    propagated (at least one retry)
//	every failed one on a fail-open edge           claimed    coincidental
//	the request gave up waiting on a call          unclaimed  propagated (timeouts)
//
// A client, when an attempt fails with a server fault, decides whether to
// retry it (Retry, the decision matrix of docs/design.md §4.3):
//
//	no retry policy for the call                  no_policy
//	callee sent unclaimed                         suppressed_unclaimed
//	claimed or missing, attempts used up          exhausted
//	claimed or missing, budget empty              suppressed_budget
//	claimed or missing, budget allows             retried
//
// The broken-context refinement needs no code: a call made with a context
// that lost the request's Ledger is invisible to Claim, so the service
// claims the error itself and the retry point moves one hop up, exactly as
// docs/design.md §4.4 describes.
//
// # Hostile peers
//
// A callee, and the collector that serves hints, can lie or send garbage;
// the hooks only ever ignore or neutralise what they send, and a service's
// own request never fails or waits because of it:
//
//   - A claim is read only from exactly one Error-Claim header (error-claim
//     trailer) of at most 64 bytes spelling claimed or unclaimed; anything
//     else is missing, which never passes for claimed. Nothing of a
//     response's headers or trailers is copied or kept.
//   - A callee that claims everything gets retried within its budget and
//     the attempt limit, no more; one that unclaims everything is not
//     retried. A service's own claim is decided from its Ledger. A handler
//     may set its own, but a value that is not one clean claim (a relayed
//     callee's garbage) is replaced; a relay (httputil.ReverseProxy, a
//     gRPC proxy) must drop the callee's claim, or a clean lie passes
//     through it as the relay's own.
//   - A failed attempt's body is drained in the background, at most 64 KiB
//     for at most a second: a callee that stalls its body does not hold the
//     retry.
//   - The hint client bounds what it reads (1 MiB), how long a fetch takes
//     and how big a retry-budget floor it accepts, backs off on failures,
//     and keeps the last good hints (or the safe defaults); the hooks'
//     questions to it never wait on a fetch.
//
// The tests named TestHostile… and TestSoak… in this package's
// sub-packages prove each of these; make soak runs the soak tests' long
// forms.
package hooks
