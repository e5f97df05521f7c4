// SPDX-License-Identifier: Apache-2.0

// Package hookshttp puts error ownership into net/http services: a server
// Middleware that tells callers whether it owns an error (the Error-Claim
// response header), and a client Transport that retries only where the
// error began (the decision matrix of docs/design.md §4.3), within a retry budget.
//
// Setup, with hints from the collector (package hints):
//
//	h := hints.Start(ctx, "http://otel-collector:4320", "checkout")
//	client := &http.Client{Transport: hookshttp.Transport(otelhttp.NewTransport(http.DefaultTransport), hookshttp.WithHints(h))}
//	handler := otelhttp.NewHandler(hookshttp.Middleware(mux, hookshttp.WithHints(h)), "checkout")
//
// Order matters for tracing. The Middleware goes inside otelhttp.NewHandler,
// so the server span is active when the claim is decided and gets
// error_ownership.claim.sent and error_ownership.claim.reason. The Transport goes outside
// otelhttp.NewTransport, so each attempt is its own CLIENT span carrying
// error_ownership.retry.attempt, error_ownership.claim.received and error_ownership.retry.decision (wrapped the other
// way, one span covers all attempts and none gets them). Handlers must make
// their outbound calls with the request's context (r.Context()): that is
// how the Transport finds the request's hooks.Ledger. A call made with
// another context is invisible to the claim decision, the broken-context
// case of docs/design.md §4.4.
//
// Without a tracer, or with an unsampled span, the hooks build no
// attributes at all. On the success path the Middleware costs one
// allocation per request and the Transport none.
package hookshttp
