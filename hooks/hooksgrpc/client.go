// SPDX-License-Identifier: Apache-2.0

package hooksgrpc

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/internal/retrying"
	"github.com/errorownership/errorownership/ownership"
)

// UnaryClientInterceptor returns an interceptor that retries server-fault
// statuses (WithFaultCodes) only where the decision matrix allows
// (hooks.Retry): claimed or unlabelled errors, within a per-peer budget and
// the attempt limit, with jittered exponential backoff that never sleeps
// past the deadline; never an error the callee unclaimed, never a method
// without a retry policy (WithRetryPolicy). Retries carry
// grpc-previous-rpc-attempts: N. Each call's outcome is recorded in the
// caller's hooks.Ledger, if its context has one.
//
// It retries by calling the invoker again, so do not also configure a gRPC
// retry policy (service config) for the same methods: the two would
// multiply. For retry attributes on each attempt's client span, wrap the
// OpenTelemetry stats handler with ClientHandler.
//
// Options: WithHints, WithBudget, WithMaxAttempts, WithBackoff,
// WithRetryPolicy, WithFaultCodes, WithPeerService.
func UnaryClientInterceptor(opts ...Option) grpc.UnaryClientInterceptor {
	cl := newClient(opts)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		lc := cl.begin(ctx, cc)
		hasPolicy := cl.cfg.hasPolicy(method)
		policy := func() bool { return hasPolicy }
		// The caller's options, and room for ours, without touching theirs.
		withTrailer := append(callOpts[:len(callOpts):len(callOpts)], nil)
		for n := 0; ; n++ {
			a := cl.newAttempt(lc, n, policy)
			var trailer metadata.MD
			withTrailer[len(callOpts)] = grpc.Trailer(&trailer)
			err := invoker(a.context(), method, req, reply, cc, withTrailer...)
			a.setTrailer(trailer)
			a.settle(err)
			if done, err := lc.after(a, method, err); done {
				return err
			}
		}
	}
}

// StreamClientInterceptor returns an interceptor that does for streams what
// UnaryClientInterceptor does for unary calls, but retries a stream only
// before any response message arrived, and only once the client has
// finished sending (CloseSend, as server-streaming calls do at once) having
// sent at most 8 messages, which it replays on the new attempt. A stream
// that cannot be retried fails with decision no_policy.
func StreamClientInterceptor(opts ...Option) grpc.StreamClientInterceptor {
	cl := newClient(opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		s := &clientStream{lc: cl.begin(ctx, cc), desc: desc, cc: cc, method: method, streamer: streamer, opts: callOpts}
		hasPolicy := cl.cfg.hasPolicy(method)
		policy := func() bool { return hasPolicy && s.replayable() }
		for n := 0; ; n++ {
			a := cl.newAttempt(s.lc, n, policy)
			err := s.open(a)
			if err == nil {
				return s, nil
			}
			a.settle(err)
			if done, err := s.lc.after(a, method, err); done {
				return nil, err
			}
		}
	}
}

// ClientHandler wraps the stats.Handler that makes a client span per attempt
// (otelgrpc.NewClientHandler()), so that each attempt's span gets
// error_ownership.claim.received, error_ownership.retry.decision and error_ownership.retry.attempt before it ends:
//
//	grpc.WithStatsHandler(hooksgrpc.ClientHandler(otelgrpc.NewClientHandler()))
//
// The interceptors leave the attempt in the call's context; at the
// attempt's end the handler makes the retry decision there, while the span
// is still open, and the interceptor then acts on it.
func ClientHandler(h stats.Handler) stats.Handler { return &clientHandler{h} }

type clientHandler struct{ stats.Handler }

func (h *clientHandler) HandleRPC(ctx context.Context, rs stats.RPCStats) {
	if a, ok := ctx.Value(attemptKey{}).(*attempt); ok {
		switch rs := rs.(type) {
		case *stats.InTrailer:
			a.setTrailer(rs.Trailer)
		case *stats.End:
			a.settle(rs.Error)
			a.annotate(trace.SpanFromContext(ctx))
		}
	}
	h.Handler.HandleRPC(ctx, rs)
}

// client is one interceptor's configuration and budgets.
type client struct {
	cfg     *config
	budgets retrying.Budgets
}

func newClient(opts []Option) *client {
	cfg := newConfig(opts)
	return &client{cfg: cfg, budgets: cfg.NewBudgets()}
}

// logicalCall is one call across its attempts.
type logicalCall struct {
	cl     *client
	ctx    context.Context // the caller's
	peer   string
	budget *hooks.Budget
	ledger *hooks.Ledger
	call   hooks.Call
}

func (cl *client) begin(ctx context.Context, cc *grpc.ClientConn) *logicalCall {
	peer := cl.cfg.peerService
	if peer == "" && cc != nil {
		peer = targetAddress(cc.Target())
	}
	lc := &logicalCall{cl: cl, ctx: ctx, peer: peer, budget: cl.budgets.For(peer), ledger: hooks.LedgerFrom(ctx)}
	lc.budget.Deposit()
	lc.call = lc.ledger.Begin(peer)
	return lc
}

// after acts on a settled attempt: it records the outcome and reports done
// unless the decision was to retry, in which case it waits out the backoff.
func (lc *logicalCall) after(a *attempt, method string, err error) (done bool, _ error) {
	a.mu.Lock()
	failed, decision, delay := a.failed, a.decision, a.delay
	out := hooks.Outcome{
		PeerService: lc.peer, PeerOperation: operation(method), Failed: failed,
		Received: a.received, Decision: decision, InFlight: a.inFlight,
	}
	a.mu.Unlock()
	if !failed {
		lc.ledger.End(lc.call, hooks.Outcome{PeerService: lc.peer, PeerOperation: operation(method)})
		return true, err
	}
	if decision != ownership.DecisionRetried {
		lc.ledger.End(lc.call, out)
		return true, err
	}
	if serr := retrying.Sleep(lc.ctx, delay); serr != nil {
		out.InFlight = true
		lc.ledger.End(lc.call, out)
		return true, status.FromContextError(serr).Err()
	}
	return false, nil
}

// attempt is one attempt of a call. It travels in the attempt's context so
// that ClientHandler can settle it while the attempt's span is open;
// whoever comes first settles it, once.
type attempt struct {
	lc     *logicalCall
	n      int
	policy func() bool

	mu       sync.Mutex
	trailer  metadata.MD
	settled  bool
	failed   bool
	inFlight bool
	received ownership.Claim
	decision ownership.RetryDecision
	delay    time.Duration
}

type attemptKey struct{}

func (cl *client) newAttempt(lc *logicalCall, n int, policy func() bool) *attempt {
	return &attempt{lc: lc, n: n, policy: policy}
}

// context is the attempt's context: the caller's, carrying the attempt and,
// on retries, grpc-previous-rpc-attempts.
func (a *attempt) context() context.Context {
	ctx := context.WithValue(a.lc.ctx, attemptKey{}, a)
	if a.n > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, ownership.GRPCPreviousAttemptsKey, strconv.Itoa(a.n))
	}
	return ctx
}

func (a *attempt) setTrailer(md metadata.MD) {
	a.mu.Lock()
	if a.trailer == nil {
		a.trailer = md
	}
	a.mu.Unlock()
}

// settle decides, once, what follows the attempt that ended with err.
func (a *attempt) settle(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.settled {
		return
	}
	a.settled = true
	lc, cfg := a.lc, a.lc.cl.cfg
	if err == nil || errors.Is(err, io.EOF) {
		return
	}
	if lc.ctx.Err() != nil {
		// The caller stopped waiting: the call was cut short rather than
		// answered, and no retry can help.
		a.failed, a.inFlight, a.decision = true, true, ownership.DecisionExhausted
		return
	}
	if !cfg.fault(status.Code(err)) {
		return
	}
	a.failed = true
	a.received = claimOf(a.trailer.Get(ownership.GRPCClaimKey))
	hasPolicy := a.policy()
	left := a.n+1 < cfg.MaxAttempts
	if hasPolicy && left && a.received != ownership.ClaimUnclaimed {
		a.delay = cfg.Backoff.Delay(a.n + 1)
		left = retrying.Fits(lc.ctx, a.delay)
		lc.cl.budgets.Refresh(lc.budget)
	}
	a.decision = hooks.Retry(a.received, hasPolicy, left, lc.budget)
}

// annotate puts the attempt's attributes on its span, unless the span is
// the caller's own (no per-attempt span) or not recording.
func (a *attempt) annotate(span trace.Span) {
	if !span.IsRecording() || span.SpanContext().SpanID() == trace.SpanContextFromContext(a.lc.ctx).SpanID() {
		return
	}
	a.mu.Lock()
	failed, received, decision := a.failed, a.received, a.decision
	a.mu.Unlock()
	attrs := make([]attribute.KeyValue, 0, 3)
	attrs = append(attrs, attribute.Int(ownership.AttrRetryAttempt, a.n))
	if failed {
		attrs = append(attrs,
			attribute.String(ownership.AttrClaimReceived, received.String()),
			attribute.String(ownership.AttrRetryDecision, decision.String()))
	}
	span.SetAttributes(attrs...)
}

// maxReplay bounds the messages a stream keeps for replay.
const maxReplay = 8

// clientStream is a stream that can be reopened, before any response
// message, on a new attempt.
type clientStream struct {
	lc       *logicalCall
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption

	mu       sync.Mutex
	cur      grpc.ClientStream
	a        *attempt
	sent     []any
	overflow bool // sent more than maxReplay messages
	closed   bool // CloseSend was called
	received bool // a response message arrived
	ended    bool // the outcome is recorded
}

// open starts attempt a: a new stream, with what was sent so far replayed.
func (s *clientStream) open(a *attempt) error {
	cs, err := s.streamer(a.context(), s.desc, s.cc, s.method, s.opts...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cur, s.a = cs, a
	sent, closed := s.sent, s.closed
	s.mu.Unlock()
	// A replay error surfaces, with the stream's status, from RecvMsg.
	for _, m := range sent {
		if cs.SendMsg(m) != nil {
			break
		}
	}
	if closed {
		_ = cs.CloseSend()
	}
	return nil
}

func (s *clientStream) stream() grpc.ClientStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// replayable reports whether the stream could be retried now: it never
// opened, or no response message arrived and the client finished sending
// what it kept.
func (s *clientStream) replayable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur == nil || !s.received && !s.overflow && s.closed
}

func (s *clientStream) Header() (metadata.MD, error) { return s.stream().Header() }
func (s *clientStream) Trailer() metadata.MD         { return s.stream().Trailer() }
func (s *clientStream) Context() context.Context     { return s.stream().Context() }

func (s *clientStream) SendMsg(m any) error {
	s.mu.Lock()
	if !s.received && !s.overflow {
		if len(s.sent) < maxReplay {
			s.sent = append(s.sent, m)
		} else {
			s.overflow, s.sent = true, nil
		}
	}
	cs := s.cur
	s.mu.Unlock()
	return cs.SendMsg(m)
}

func (s *clientStream) CloseSend() error {
	s.mu.Lock()
	s.closed = true
	cs := s.cur
	s.mu.Unlock()
	return cs.CloseSend()
}

func (s *clientStream) RecvMsg(m any) error {
	for {
		s.mu.Lock()
		cs, a := s.cur, s.a
		s.mu.Unlock()
		err := cs.RecvMsg(m)
		if err == nil {
			s.mu.Lock()
			s.received, s.sent = true, nil
			s.mu.Unlock()
			return nil
		}
		if errors.Is(err, io.EOF) {
			// The stream ended cleanly: end records the call's outcome
			// and, given no error, has none to give back.
			_, _ = s.end(a, nil)
			return err
		}
		a.setTrailer(cs.Trailer())
		a.settle(err)
		if err = s.retry(a, err); err != nil {
			return err
		}
	}
}

// retry follows a failed attempt: it returns nil once a new attempt is
// open, or the error to give the caller.
func (s *clientStream) retry(a *attempt, err error) error {
	for {
		if done, derr := s.end(a, err); done {
			return derr
		}
		next := s.lc.cl.newAttempt(s.lc, a.n+1, a.policy)
		if err = s.open(next); err == nil {
			return nil
		}
		next.settle(err)
		a = next
	}
}

// end hands a settled attempt to the logical call, once the stream's
// outcome is final.
func (s *clientStream) end(a *attempt, err error) (bool, error) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return true, err
	}
	s.mu.Unlock()
	if err == nil {
		a.settle(nil)
	}
	done, err := s.lc.after(a, s.method, err)
	if done {
		s.mu.Lock()
		s.ended = true
		s.mu.Unlock()
	}
	return done, err
}
