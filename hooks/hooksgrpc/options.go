// SPDX-License-Identifier: Apache-2.0

package hooksgrpc

import (
	"net"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/internal/retrying"
)

// An Option configures the interceptors. Each option says which side it
// applies to; the other ignores it, so one option list can serve both.
type Option func(*config)

type config struct {
	retrying.Settings
	policy      func(fullMethod string) bool
	faults      [32]bool // indexed by codes.Code; codes run 0–16
	peerService string
}

// DefaultFaultCodes returns the status codes that are the server's fault
// (docs/design.md §4.1): the server claims them, the client retries them. Invalid
// arguments, missing entities and the like are the caller's.
func DefaultFaultCodes() []codes.Code {
	return []codes.Code{
		codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented,
		codes.Internal, codes.Unavailable, codes.DataLoss,
	}
}

func newConfig(opts []Option) *config {
	c := &config{
		Settings: retrying.DefaultSettings(),
	}
	WithFaultCodes(DefaultFaultCodes()...)(c)
	for _, o := range opts {
		o(c)
	}
	return c
}

func (c *config) fault(code codes.Code) bool { return int(code) < len(c.faults) && c.faults[code] }

func (c *config) hasPolicy(fullMethod string) bool {
	return c.MaxAttempts > 1 && (c.policy == nil || c.policy(fullMethod))
}

// WithHints makes the interceptors use src, usually a *hints.Client: the
// server side for edge modes, the client side for its budgets' limits.
func WithHints(src hooks.HintSource) Option { return func(c *config) { c.Hints = src } }

// WithBudget makes the client draw every retry from b instead of from a
// budget per peer service; b keeps its own limits.
func WithBudget(b *hooks.Budget) Option { return func(c *config) { c.Budget = b } }

// WithMaxAttempts sets the client's attempts per call, the first included
// (default 3). 1 disables retries: calls then have no policy (no_policy).
func WithMaxAttempts(n int) Option { return func(c *config) { c.MaxAttempts = max(n, 1) } }

// WithBackoff sets the client's backoff: retry n waits a random time in
// [d/2, d], d = min(maximum, initial × 2^(n−1)). Defaults 50 ms and 1 s.
func WithBackoff(initial, maximum time.Duration) Option {
	return func(c *config) { c.Backoff = retrying.Backoff{Initial: initial, Max: maximum} }
}

// WithRetryPolicy sets which methods ("/pkg.Service/Method") the client
// may retry at all; a method it rejects fails with decision no_policy.
// By default every method may be retried, as under a gRPC service config
// retry policy naming the whole service: reject the non-idempotent ones.
func WithRetryPolicy(f func(fullMethod string) bool) Option { return func(c *config) { c.policy = f } }

// WithFaultCodes sets the status codes that are server faults (default
// DefaultFaultCodes()), on both sides.
func WithFaultCodes(cs ...codes.Code) Option {
	return func(c *config) {
		c.faults = [32]bool{}
		for _, code := range cs {
			if int(code) < len(c.faults) {
				c.faults[code] = true
			}
		}
	}
}

// WithPeerService names the service the client's connection talks to, as
// its service.name (and the hints) spell it. Without it the callee is named
// by the connection's target address, which the hints list for every edge:
// use it only when the target does not say where calls go.
func WithPeerService(name string) Option { return func(c *config) { c.peerService = name } }

// operation names a method as otelgrpc names its span and the analysis its
// operation: "pkg.Service/Method".
func operation(fullMethod string) string { return strings.TrimPrefix(fullMethod, "/") }

// targetAddress names a connection's callee as otelgrpc records it on
// client spans (server.address and server.port of the dial target):
// "dns:///checkout.prod:443" is "checkout.prod:443", "127.0.0.1:5000"
// itself. The hints list these addresses for every edge.
func targetAddress(target string) string {
	if _, _, err := net.SplitHostPort(target); err == nil {
		return target
	}
	u, err := url.Parse(target)
	if err != nil {
		return target
	}
	ep := strings.TrimPrefix(u.Path, "/")
	if ep == "" {
		ep = u.Opaque
	}
	if ep == "" {
		return target
	}
	return ep
}
