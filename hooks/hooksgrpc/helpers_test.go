// SPDX-License-Identifier: Apache-2.0

package hooksgrpc_test

import (
	"context"
	"net"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/errorownership/errorownership/hooks/hooksgrpc"
	"github.com/errorownership/errorownership/hooks/internal/chaintest"
	"github.com/errorownership/errorownership/ownership"
)

// The test service, registered by hand: one unary method and one
// server-streaming method, carrying strings.
const (
	workMethod  = "/chain.Chain/Work"
	watchMethod = "/chain.Chain/Watch"
)

var watchDesc = &grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}

// service is one gRPC server of a test: what it does, what it saw
// (grpc-previous-rpc-attempts on each call it served, error-claim on each
// answer from its callee) and its spans.
type service struct {
	*chaintest.Recorder
	addr  string
	work  func(ctx context.Context) error
	watch func(attempt int, send func(string) error) error
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: "chain.Chain",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Work",
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, _ any) (any, error) {
				if err := srv.(*service).work(ctx); err != nil {
					return nil, err
				}
				return wrapperspb.String("ok"), nil
			}
			if icpt == nil {
				return h(ctx, in)
			}
			return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: workMethod}, h)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Watch",
		ServerStreams: true,
		Handler: func(srv any, ss grpc.ServerStream) error {
			s := srv.(*service)
			if err := ss.RecvMsg(new(wrapperspb.StringValue)); err != nil {
				return err
			}
			return s.watch(int(s.Requests.Load()), func(v string) error { return ss.SendMsg(wrapperspb.String(v)) })
		},
	}},
}

func newService(t *testing.T, name string) *service {
	return &service{Recorder: chaintest.NewRecorder(t, name)}
}

func (s *service) otelOpts() []otelgrpc.Option {
	return []otelgrpc.Option{otelgrpc.WithTracerProvider(s.TP), otelgrpc.WithPropagators(propagation.TraceContext{})}
}

// start serves s on 127.0.0.1 with otelgrpc, counting calls first, then
// with the hooks' server interceptors if hooks is set.
func (s *service) start(t *testing.T, hooks bool, opts ...hooksgrpc.Option) {
	count := func(ctx context.Context) {
		md, _ := metadata.FromIncomingContext(ctx)
		v := ""
		if a := md.Get(ownership.GRPCPreviousAttemptsKey); len(a) > 0 {
			v = a[0]
		}
		s.Served(v)
	}
	unary := []grpc.UnaryServerInterceptor{func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		count(ctx)
		return h(ctx, req)
	}}
	stream := []grpc.StreamServerInterceptor{func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		count(ss.Context())
		return h(srv, ss)
	}}
	if hooks {
		unary = append(unary, hooksgrpc.UnaryServerInterceptor(opts...))
		stream = append(stream, hooksgrpc.StreamServerInterceptor(opts...))
	}
	srv := grpc.NewServer(
		grpc.StatsHandler(otelgrpc.NewServerHandler(s.otelOpts()...)),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	)
	srv.RegisterService(&serviceDesc, s)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
}

// dial connects s to target: otelgrpc's client span per attempt, then a
// recorder of the callee's claims, under the hooks' client interceptors if
// hooks is set.
func (s *service) dial(t *testing.T, target string, hooks bool, opts ...hooksgrpc.Option) *grpc.ClientConn {
	handler := otelgrpc.NewClientHandler(s.otelOpts()...)
	var unary []grpc.UnaryClientInterceptor
	var stream []grpc.StreamClientInterceptor
	if hooks {
		handler = hooksgrpc.ClientHandler(handler)
		unary = append(unary, hooksgrpc.UnaryClientInterceptor(opts...))
		stream = append(stream, hooksgrpc.StreamClientInterceptor(opts...))
	}
	unary = append(unary, s.record)
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(handler),
		grpc.WithChainUnaryInterceptor(unary...),
		grpc.WithChainStreamInterceptor(stream...),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// record notes the claim on each answer the callee sent (not on calls the
// caller itself abandoned, which got no answer).
func (s *service) record(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var md metadata.MD
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Trailer(&md))...)
	if ctx.Err() == nil {
		v := ""
		if c := md.Get(ownership.GRPCClaimKey); len(c) > 0 {
			v = c[0]
		}
		s.Observed(v)
	}
	return err
}

// call makes one unary call and returns its trailer.
func call(ctx context.Context, conn *grpc.ClientConn) (metadata.MD, error) {
	var md metadata.MD
	err := conn.Invoke(ctx, workMethod, wrapperspb.String("work"), new(wrapperspb.StringValue), grpc.Trailer(&md))
	return md, err
}
