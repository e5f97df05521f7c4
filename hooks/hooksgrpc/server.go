// SPDX-License-Identifier: Apache-2.0

package hooksgrpc

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/ownership"
)

// UnaryServerInterceptor returns an interceptor that serves each call with a
// hooks.Ledger in its context, so the client interceptors can record the
// call's outbound calls, and that, when the handler returns a server-fault
// status (WithFaultCodes), sets the trailer error-claim from those calls and
// the hints (hooks.Claim) — with grpc-retry-pushback-ms: -1 alongside
// unclaimed, so a plain gRPC retry policy (gRFC A6) does not retry either.
// A handler that sets error-claim in its trailer itself, to one claimed or
// unclaimed, wins; any other value is dropped and replaced. A handler that
// relays a callee's trailer (a proxy) relays its error-claim too, which
// the interceptor cannot tell from the handler's own: delete it first, or
// a callee that claims everything makes the relay's callers retry what its
// client already retried.
//
// On the active span (the server span of otelgrpc.NewServerHandler) it sets
// error_ownership.claim.sent and error_ownership.claim.reason.
//
// Options: WithHints, WithFaultCodes.
func UnaryServerInterceptor(opts ...Option) grpc.UnaryServerInterceptor {
	cfg := newConfig(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		c := &serverCall{cfg: cfg}
		ctx = c.bind(ctx)
		resp, err := handler(ctx, req)
		if err != nil {
			c.settle(ctx, info.FullMethod, err, func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) })
		}
		return resp, err
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streaming calls.
func StreamServerInterceptor(opts ...Option) grpc.StreamServerInterceptor {
	cfg := newConfig(opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		c := &serverCall{cfg: cfg}
		s := &serverStream{ServerStream: ss, call: c}
		s.ctx = c.bind(ss.Context())
		err := handler(srv, s)
		if err != nil {
			c.settle(s.ctx, info.FullMethod, err, ss.SetTrailer)
		}
		return err
	}
}

// serverCall is a call's server-side state: its Ledger, and the claim the
// handler put in the trailer, if it did.
type serverCall struct {
	cfg    *config
	ledger hooks.Ledger
	stream trailerWatch
	own    atomic.Uint32 // 1 + the claim the handler set; 0 if it set none
}

// bind returns ctx carrying the Ledger, and a transport stream that notices
// a handler's grpc.SetTrailer.
func (c *serverCall) bind(ctx context.Context) context.Context {
	ctx = c.ledger.Bind(ctx)
	if ts := grpc.ServerTransportStreamFromContext(ctx); ts != nil {
		c.stream = trailerWatch{ServerTransportStream: ts, call: c}
		ctx = grpc.NewContextWithServerTransportStream(ctx, &c.stream)
	}
	return ctx
}

// note remembers a claim the handler put in its trailer and returns the
// trailer to send: md, or a copy without error-claim if that is not one
// clean claim (a relayed callee's garbage, say), which settle then
// replaces with the interceptor's own.
func (c *serverCall) note(md metadata.MD) metadata.MD {
	v := md.Get(ownership.GRPCClaimKey)
	if len(v) == 0 {
		return md
	}
	if claim := claimOf(v); claim != ownership.ClaimMissing {
		c.own.Store(1 + uint32(claim))
		return md
	}
	md = md.Copy()
	md.Delete(ownership.GRPCClaimKey)
	return md
}

// settle decides and sends the claim for a call that failed with err.
func (c *serverCall) settle(ctx context.Context, fullMethod string, err error, setTrailer func(metadata.MD)) {
	code := status.Code(err)
	if !c.cfg.fault(code) {
		return
	}
	span := trace.SpanFromContext(ctx)
	if own := c.own.Load(); own != 0 {
		claim := ownership.Claim(own - 1)
		if claim == ownership.ClaimUnclaimed {
			setTrailer(metadata.Pairs(ownership.GRPCPushbackKey, "-1"))
		}
		if span.IsRecording() {
			span.SetAttributes(attribute.String(ownership.AttrClaim, claim.String()))
		}
		return
	}
	timedOut := code == codes.DeadlineExceeded || errors.Is(ctx.Err(), context.DeadlineExceeded)
	var modes hooks.ModeFunc
	if src := c.cfg.Hints; src != nil {
		op := operation(fullMethod)
		modes = func(peer, peerOp string) ownership.Mode { return src.Mode(op, peer, peerOp) }
	}
	claim, reason := c.ledger.Decide(modes, timedOut)
	md := metadata.Pairs(ownership.GRPCClaimKey, claim.String())
	if claim == ownership.ClaimUnclaimed {
		md.Set(ownership.GRPCPushbackKey, "-1")
	}
	setTrailer(md)
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(ownership.AttrClaim, claim.String()),
			attribute.String(ownership.AttrClaimReason, reason.String()),
		)
	}
}

// trailerWatch passes trailers on and notes a claim among them.
type trailerWatch struct {
	grpc.ServerTransportStream
	call *serverCall
}

func (t *trailerWatch) SetTrailer(md metadata.MD) error {
	return t.ServerTransportStream.SetTrailer(t.call.note(md))
}

// serverStream gives the handler the context with the Ledger and notes a
// claim the handler sets with SetTrailer.
type serverStream struct {
	grpc.ServerStream
	ctx  context.Context
	call *serverCall
}

func (s *serverStream) Context() context.Context { return s.ctx }

func (s *serverStream) SetTrailer(md metadata.MD) {
	s.ServerStream.SetTrailer(s.call.note(md))
}

// claimOf reads error-claim values: anything but exactly one "claimed" or
// "unclaimed", including oversized values, is ClaimMissing.
func claimOf(v []string) ownership.Claim {
	if len(v) != 1 || len(v[0]) > ownership.MaxClaimValueLen {
		return ownership.ClaimMissing
	}
	return ownership.ParseClaim(v[0])
}
