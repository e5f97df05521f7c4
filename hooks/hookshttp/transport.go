// SPDX-License-Identifier: Apache-2.0

package hookshttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/internal/retrying"
	"github.com/errorownership/errorownership/ownership"
)

// Transport returns a RoundTripper that retries server faults on base only
// where the decision matrix allows (hooks.Retry): claimed or unlabelled
// errors, within a per-peer budget and the attempt limit, with jittered
// exponential backoff that never sleeps past the request's deadline; never
// an error the callee unclaimed, and never a request without a retry policy
// (by default non-idempotent methods such as POST and PATCH, and bodies
// without GetBody). Retries carry Retry-Attempt: N (1, 2, …); the first
// attempt goes out unchanged, so the header is absent, meaning 0, like
// gRPC's grpc-previous-rpc-attempts. Each call's outcome is recorded in the
// caller's hooks.Ledger, if its context has one.
//
// For a client span per attempt, wrap the OpenTelemetry transport, not the
// other way round:
//
//	hookshttp.Transport(otelhttp.NewTransport(http.DefaultTransport))
//
// Each attempt is then its own CLIENT span, and Transport sets
// error_ownership.claim.received, error_ownership.retry.decision, error_ownership.retry.attempt and
// http.request.resend_count on it (it finds the span through the
// response's request, before the span ends with the body). Wrapped the
// other way, all attempts share one span and get no attributes. An attempt
// that fails without a response ends its span inside otelhttp before its
// attributes are known; it keeps otelhttp's error.type only.
//
// Options: WithHints, WithBudget, WithMaxAttempts, WithBackoff,
// WithRetryPolicy, WithFault, WithPeerService, WithPeerOperation.
func Transport(base http.RoundTripper, opts ...Option) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	c := newConfig(opts)
	return &transport{base: base, cfg: c, budgets: c.NewBudgets()}
}

type transport struct {
	base    http.RoundTripper
	cfg     *config
	budgets retrying.Budgets
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	peer := t.cfg.peerService(req)
	budget := t.budgets.For(peer)
	budget.Deposit()
	ledger := hooks.LedgerFrom(ctx)
	call := ledger.Begin(peer)

	attemptReq := req
	for attempt := 0; ; attempt++ {
		res, err := t.base.RoundTrip(attemptReq)
		if err == nil && !t.cfg.fault(res.StatusCode) {
			annotate(ctx, res, attempt, ownership.ClaimMissing, ownership.DecisionNone)
			ledger.End(call, hooks.Outcome{PeerService: peer})
			return res, nil
		}

		received := ownership.ClaimMissing
		if res != nil {
			received = ClaimOf(res.Header)
		}
		out := hooks.Outcome{PeerService: peer, Failed: true, Received: received}
		if t.cfg.peerOp != nil {
			out.PeerOperation = t.cfg.peerOp(req)
		}

		var next *http.Request
		var delay time.Duration
		if ctx.Err() != nil {
			// The caller stopped waiting: no retry can help it, and the
			// call was cut short rather than answered.
			out.Decision, out.InFlight = ownership.DecisionExhausted, true
		} else {
			hasPolicy := t.cfg.MaxAttempts > 1 && t.cfg.policy(req) && replayable(req)
			left := attempt+1 < t.cfg.MaxAttempts
			if hasPolicy && left && received != ownership.ClaimUnclaimed {
				delay = t.cfg.Backoff.Delay(attempt + 1)
				left = retrying.Fits(ctx, delay)
				if left {
					var gerr error
					if next, gerr = retryRequest(req, attempt+1); gerr != nil {
						hasPolicy = false // the body cannot be had again
					}
				}
				t.budgets.Refresh(budget)
			}
			out.Decision = hooks.Retry(received, hasPolicy, left, budget)
		}
		annotate(ctx, res, attempt, received, out.Decision)
		if out.Decision != ownership.DecisionRetried {
			if next != nil && next.Body != nil {
				next.Body.Close()
			}
			ledger.End(call, out)
			return res, err
		}

		if res != nil {
			discard(res.Body)
		}
		if serr := retrying.Sleep(ctx, delay); serr != nil {
			if next.Body != nil {
				next.Body.Close()
			}
			out.InFlight = true
			ledger.End(call, out)
			return nil, fmt.Errorf("hookshttp: retry %d of %s %s abandoned: %w", attempt+1, req.Method, req.URL.Redacted(), serr)
		}
		attemptReq = next
	}
}

// ClaimOf reads the Error-Claim header of a response. Anything but exactly
// one "claimed" or "unclaimed" value, including oversized values, is
// ClaimMissing: a malformed claim must never pass for a claimed one.
func ClaimOf(h http.Header) ownership.Claim {
	v := h[ownership.HTTPClaimHeader]
	if len(v) != 1 || len(v[0]) > ownership.MaxClaimValueLen {
		return ownership.ClaimMissing
	}
	return ownership.ParseClaim(v[0])
}

// replayable reports whether req's body can be sent again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// retryRequest makes attempt n of req: a copy with Retry-Attempt: n and a
// fresh body. The caller's request is left untouched, as RoundTripper's
// contract asks.
func retryRequest(req *http.Request, n int) (*http.Request, error) {
	r := req.Clone(req.Context())
	r.Header.Set(ownership.HTTPRetryAttemptHeader, strconv.Itoa(n))
	if req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	return r, nil
}

// Reading a failed attempt's body to its end lets its connection carry
// the retry or another call. The hooks read at most maxDrain bytes of it,
// for at most drainTimeout.
const (
	maxDrain     = 64 << 10
	drainTimeout = time.Second
)

// discard reads what is left of a failed attempt's body and closes it, in
// the background, so that the retry never waits on the callee: a body
// that stalls or trickles is closed where it stands after drainTimeout
// (which, for net/http's bodies, interrupts the read and drops the
// connection), one longer than maxDrain once that much is read. Close is
// called once, by the timer or after the read.
func discard(body io.ReadCloser) {
	if body == nil || body == http.NoBody {
		return
	}
	go func() {
		stop := time.AfterFunc(drainTimeout, func() { _ = body.Close() })
		_, _ = io.CopyN(io.Discard, body, maxDrain)
		if stop.Stop() {
			_ = body.Close()
		}
	}()
}

// annotate sets the attempt's attributes on the attempt's client span: the
// span in the context of the request that produced res (otelhttp's clone),
// if it is recording and is not the caller's own span (which it is when no
// per-attempt span wraps the base transport). decision is DecisionNone for
// a successful attempt.
func annotate(ctx context.Context, res *http.Response, attempt int, received ownership.Claim, decision ownership.RetryDecision) {
	if res == nil || res.Request == nil {
		return
	}
	span := trace.SpanFromContext(res.Request.Context())
	if !span.IsRecording() || span.SpanContext().SpanID() == trace.SpanContextFromContext(ctx).SpanID() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, attribute.Int(ownership.AttrRetryAttempt, attempt))
	if attempt > 0 {
		attrs = append(attrs, attribute.Int(ownership.AttrHTTPResendCount, attempt))
	}
	if decision != ownership.DecisionNone {
		attrs = append(attrs,
			attribute.String(ownership.AttrClaimReceived, received.String()),
			attribute.String(ownership.AttrRetryDecision, decision.String()))
	}
	span.SetAttributes(attrs...)
}
