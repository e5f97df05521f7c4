// SPDX-License-Identifier: Apache-2.0

package hookshttp

import (
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/internal/retrying"
)

// An Option configures Middleware or Transport. Each option says which it
// applies to; the other ignores it, so one option list can serve both.
type Option func(*config)

type config struct {
	retrying.Settings
	policy      func(*http.Request) bool
	fault       func(status int) bool
	operation   func(*http.Request) string
	peerService func(*http.Request) string
	peerOp      func(*http.Request) string
}

func newConfig(opts []Option) *config {
	c := &config{
		Settings:    retrying.DefaultSettings(),
		policy:      Idempotent,
		fault:       ServerFault,
		operation:   Operation,
		peerService: PeerAddress,
		peerOp:      Operation,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// WithHints makes the hooks use src, usually a *hints.Client: the middleware
// for edge modes, the transport for its budgets' limits. Without it every
// edge is unknown (fail-close) and budgets use hooks.DefaultLimits.
func WithHints(src hooks.HintSource) Option { return func(c *config) { c.Hints = src } }

// WithBudget makes the transport draw every retry from b, shared by all
// peers, instead of from a budget per peer service; b keeps its own limits.
func WithBudget(b *hooks.Budget) Option { return func(c *config) { c.Budget = b } }

// WithMaxAttempts sets the transport's attempts per call, the first one
// included (default 3). 1 disables retries; the calls then have no retry
// policy (no_policy), so the at-least-once rule applies.
func WithMaxAttempts(n int) Option { return func(c *config) { c.MaxAttempts = max(n, 1) } }

// WithBackoff sets the transport's backoff: retry n waits a random time in
// [d/2, d], d = min(maximum, initial × 2^(n−1)). Defaults 50 ms and 1 s.
func WithBackoff(initial, maximum time.Duration) Option {
	return func(c *config) { c.Backoff = retrying.Backoff{Initial: initial, Max: maximum} }
}

// WithRetryPolicy sets which requests the transport may retry at all
// (default Idempotent). A request it rejects fails with decision no_policy.
// Whatever it says, a request whose body cannot be replayed (a Body and no
// GetBody) is not retried.
func WithRetryPolicy(f func(*http.Request) bool) Option { return func(c *config) { c.policy = f } }

// WithFault sets which response statuses are server faults (default
// ServerFault: 500 and above). The middleware claims those; the transport
// retries those. Use it to count some 4xx as failures too.
func WithFault(f func(status int) bool) Option { return func(c *config) { c.fault = f } }

// WithOperation sets how the middleware names the inbound operation for
// hint lookups (default Operation). The defaults need no help: the hints
// match a concrete request to the route its server span is named after.
func WithOperation(f func(*http.Request) string) Option { return func(c *config) { c.operation = f } }

// WithPeerService sets how the transport names the callee (default
// PeerAddress, which the hints list for every edge). Use it when the
// request's URL does not say where the call goes, such as a service mesh
// that routes by header; name the callee's service.name then.
func WithPeerService(f func(*http.Request) string) Option {
	return func(c *config) { c.peerService = f }
}

// WithPeerOperation sets how the transport names the callee's operation
// for hint lookups (default Operation: "GET /recommendations/42", which the
// hints match to the route "GET /recommendations/{id}"). It is only called
// for failed calls.
func WithPeerOperation(f func(*http.Request) string) Option {
	return func(c *config) { c.peerOp = f }
}

// ServerFault reports whether status is a server fault: 500 and above.
// 4xx are the caller's fault (docs/design.md §4.1).
func ServerFault(status int) bool { return status >= 500 }

// Idempotent reports whether r may be retried by default: its method is
// idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or it carries an
// Idempotency-Key header, the same test net/http uses for its own retries.
func Idempotent(r *http.Request) bool {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, ok := r.Header["Idempotency-Key"]
	if !ok {
		_, ok = r.Header["X-Idempotency-Key"]
	}
	return ok
}

// PeerAddress names the callee as the OpenTelemetry HTTP client
// instrumentation records it (server.address and server.port): the
// request's host, with the port when the URL gives one other than its
// scheme's default ("10.0.0.7:8080", "catalog.shop.svc"). The hints list
// these addresses for every edge, so the hooks need no service names.
func PeerAddress(r *http.Request) string {
	host := r.Host
	https := false
	if r.URL != nil {
		if r.URL.Host != "" {
			host = r.URL.Host
		}
		https = r.URL.Scheme == "https"
	}
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if port == "" || (port == "80" && !https) || (port == "443" && https) {
		return h
	}
	return net.JoinHostPort(h, port)
}

// Operation names a request as the server span is named by convention,
// "METHOD route" (e.g. "POST /checkout"), taking the route from the
// http.ServeMux pattern that matched; without one, "METHOD /concrete/path",
// which the hints match to the route. The transport names a callee's
// operation the same way.
func Operation(r *http.Request) string {
	p := r.Pattern
	if p == "" {
		if r.URL == nil {
			return r.Method
		}
		return r.Method + " " + r.URL.Path
	}
	if i := strings.IndexAny(p, " \t"); i >= 0 { // "METHOD [host]/path"
		p = strings.TrimLeft(p[i:], " \t")
	}
	if i := strings.IndexByte(p, '/'); i > 0 { // "host/path"
		p = p[i:]
	}
	return r.Method + " " + p
}
