// SPDX-License-Identifier: Apache-2.0

package hookshttp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/ownership"
)

// Middleware returns a handler that serves next with a hooks.Ledger in the
// request's context, so the Transport can record the request's outbound
// calls, and that sets the Error-Claim header on server-fault responses
// (see WithFault) from those calls and the hints (hooks.Claim). The header
// is set just before the status is written, so the handler writes as usual.
// A handler that sets Error-Claim itself, to one claimed or unclaimed,
// wins; any other value is replaced.
//
// A handler that relays a callee's answer with its headers, such as
// httputil.ReverseProxy, relays the callee's Error-Claim too, and the
// middleware cannot tell it from the handler's own: delete it (in
// ReverseProxy.ModifyResponse), or a callee that claims everything makes
// the relay's callers retry what its transport already retried.
//
// On the active span (the server span, when Middleware runs inside
// otelhttp.NewHandler) it sets error_ownership.claim.sent and error_ownership.claim.reason.
//
// Put it outside anything that answers for the handler, such as
// http.TimeoutHandler: an answer written around it carries no claim, and a
// timeout answered while a call is in flight must be seen to be unclaimed.
//
// Options: WithHints, WithFault, WithOperation.
func Middleware(next http.Handler, opts ...Option) http.Handler {
	return &middleware{next: next, cfg: newConfig(opts)}
}

type middleware struct {
	next http.Handler
	cfg  *config
}

// serverCall is all the middleware's per-request state, allocated at once:
// the response writer (serverCall is it), the Ledger with the context that
// carries it, and the request copy that carries that context. It is kept
// within 512 bytes, the largest allocation the Go allocator serves without
// a per-object header (see TestServerCallSize).
type serverCall struct {
	http.ResponseWriter
	cfg         *config
	wroteHeader bool
	ledger      hooks.Ledger
	req         http.Request
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := &serverCall{ResponseWriter: w, cfg: m.cfg}
	// WithContext is inlined, so its copy lands in c.req without a second
	// allocation.
	c.req = *r.WithContext(c.ledger.Bind(r.Context()))
	m.next.ServeHTTP(c, &c.req)
	// A ServeMux inside sets the route on the copy it was given; handing
	// it back lets an otelhttp.Handler outside name its span after the
	// route ("GET /items/{id}"), as it does without the middleware.
	if c.req.Pattern != "" && r.Pattern == "" {
		r.Pattern = c.req.Pattern
	}
}

// decide sets Error-Claim for a response with status code, unless the
// handler set it.
func (c *serverCall) decide(code int) {
	h := c.Header()
	span := trace.SpanFromContext(c.req.Context())
	if _, ok := h[ownership.HTTPClaimHeader]; ok {
		// The handler's own claim, if it is one. Anything else (a relayed
		// callee's garbage, say) is replaced by the middleware's.
		if own := ClaimOf(h); own != ownership.ClaimMissing {
			if span.IsRecording() {
				span.SetAttributes(attribute.String(ownership.AttrClaim, own.String()))
			}
			return
		}
	}
	ctx := c.req.Context()
	timedOut := code == http.StatusGatewayTimeout || errors.Is(ctx.Err(), context.DeadlineExceeded)
	var modes hooks.ModeFunc
	if src := c.cfg.Hints; src != nil {
		op := c.cfg.operation(&c.req)
		modes = func(peer, peerOp string) ownership.Mode { return src.Mode(op, peer, peerOp) }
	}
	claim, reason := c.ledger.Decide(modes, timedOut)
	h[ownership.HTTPClaimHeader] = []string{claim.String()}
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(ownership.AttrClaim, claim.String()),
			attribute.String(ownership.AttrClaimReason, reason.String()),
		)
	}
}

// serverCall is the handler's http.ResponseWriter: it decides the claim
// when the status is written. It keeps the optional interfaces net/http's
// writer has: Flusher and Hijacker directly (older code asserts them),
// io.StringWriter and io.ReaderFrom (no copies, sendfile), and Unwrap for
// http.ResponseController.

func (c *serverCall) WriteHeader(code int) {
	// 1xx responses are informational: the final status is still to come.
	if !c.wroteHeader && code >= 200 {
		c.wroteHeader = true
		if c.cfg.fault(code) {
			c.decide(code)
		}
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *serverCall) Write(p []byte) (int, error) {
	c.wroteHeader = true // an implicit 200
	return c.ResponseWriter.Write(p)
}

// WriteString keeps io.WriteString free of a []byte conversion.
func (c *serverCall) WriteString(s string) (int, error) {
	c.wroteHeader = true
	return io.WriteString(c.ResponseWriter, s)
}

// ReadFrom keeps io.Copy on the underlying writer's fast path.
func (c *serverCall) ReadFrom(src io.Reader) (int64, error) {
	c.wroteHeader = true
	if rf, ok := c.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(struct{ io.Writer }{c.ResponseWriter}, src)
}

// Flush sends buffered data, and with it an implicit 200 if no status was
// written.
func (c *serverCall) Flush() {
	c.wroteHeader = true
	_ = http.NewResponseController(c.ResponseWriter).Flush()
}

// Hijack hands over the connection where the underlying writer can.
func (c *serverCall) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(c.ResponseWriter).Hijack()
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (c *serverCall) Unwrap() http.ResponseWriter { return c.ResponseWriter }
