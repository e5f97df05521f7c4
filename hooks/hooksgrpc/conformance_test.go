// SPDX-License-Identifier: Apache-2.0

package hooksgrpc_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hooksgrpc"
	"github.com/errorownership/errorownership/hooks/internal/conformance"
	"github.com/errorownership/errorownership/ownership"
)

// The conformance vectors of grpc.json, over real gRPC servers with
// otelgrpc's spans and the hooks' interceptors, as a service runs them.

type grpcScripted struct {
	Code  string
	Claim *string
}

type grpcVectors struct {
	Client struct {
		Cases []struct {
			Name        string
			MaxAttempts int `json:"max_attempts"`
			Budget      *hooks.Limits
			Responses   []grpcScripted
			Want        struct {
				Requests []*string
				Code     string
				Spans    []map[string]any
			}
		}
	}
	Server struct {
		Cases []struct {
			Name  string
			Calls []struct {
				Responses []grpcScripted
				Mode      string
			}
			SetClaim *string `json:"set_claim"`
			Code     string
			Want     struct {
				Claim, Pushback *string
				Span            map[string]any
			}
		}
	}
}

// codeOf reads a status code by its name ("UNAVAILABLE").
func codeOf(t *testing.T, name string) codes.Code {
	t.Helper()
	var c codes.Code
	if err := c.UnmarshalJSON([]byte(`"` + name + `"`)); err != nil {
		t.Fatalf("status code %q: %v", name, err)
	}
	return c
}

// scriptedCallee serves each attempt the next scripted response, and notes
// the grpc-previous-rpc-attempts each carried.
func scriptedCallee(t *testing.T, responses []grpcScripted) (*service, func() []*string) {
	s := newService(t, "callee")
	var mu sync.Mutex
	var attempts []*string
	s.work = func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		var a *string
		if v := md.Get(ownership.GRPCPreviousAttemptsKey); len(v) > 0 {
			a = &v[0]
		}
		mu.Lock()
		attempts = append(attempts, a)
		n := len(attempts) - 1
		mu.Unlock()
		if n >= len(responses) {
			return status.Error(codes.FailedPrecondition, "more attempts than the case scripts")
		}
		r := responses[n]
		if r.Claim != nil {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(ownership.GRPCClaimKey, *r.Claim))
		}
		if c := codeOf(t, r.Code); c != codes.OK {
			return status.Error(c, "scripted")
		}
		return nil
	}
	s.start(t, false)
	return s, func() []*string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(attempts)
	}
}

func loadGRPCVectors(t *testing.T) *grpcVectors {
	t.Helper()
	v := new(grpcVectors)
	if err := conformance.Load("grpc.json", v); err != nil {
		t.Fatal(err)
	}
	return v
}

func strs(ps []*string) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = "<absent>"
		if p != nil {
			out[i] = *p
		}
	}
	return strings.Join(out, ",")
}

func TestConformanceGRPCClient(t *testing.T) {
	v := loadGRPCVectors(t)
	for _, tc := range v.Client.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			callee, attempts := scriptedCallee(t, tc.Responses)
			caller := newService(t, "caller")
			opts := []hooksgrpc.Option{hooksgrpc.WithBackoff(time.Millisecond, time.Millisecond)}
			if tc.MaxAttempts > 0 {
				opts = append(opts, hooksgrpc.WithMaxAttempts(tc.MaxAttempts))
			}
			if tc.Budget != nil {
				opts = append(opts, hooksgrpc.WithBudget(hooks.NewBudget(*tc.Budget)))
			}
			conn := caller.dial(t, callee.addr, true, opts...)
			_, err := call(t.Context(), conn)
			if got := status.Code(err); got != codeOf(t, tc.Want.Code) {
				t.Errorf("code %v, want %s", got, tc.Want.Code)
			}
			if got, want := strs(attempts()), strs(tc.Want.Requests); got != want {
				t.Errorf("grpc-previous-rpc-attempts per attempt %s, want %s", got, want)
			}
			got := caller.TP.HookAttributes(t, trace.SpanKindClient, len(tc.Want.Spans))
			if fmt.Sprint(got) != fmt.Sprint(tc.Want.Spans) {
				t.Errorf("client spans' attributes\n got %v\nwant %v", got, tc.Want.Spans)
			}
		})
	}
}

// addrModes is a hint source that knows the modes of edges by callee
// address.
type addrModes map[string]ownership.Mode

func (m addrModes) Mode(_, peer, _ string) ownership.Mode { return m[peer] }
func (addrModes) BudgetLimits() hooks.Limits              { return hooks.DefaultLimits() }

func TestConformanceGRPCServer(t *testing.T) {
	v := loadGRPCVectors(t)
	for _, tc := range v.Server.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			modes := addrModes{}
			svc := newService(t, "service")
			var conns []*grpc.ClientConn
			for _, c := range tc.Calls {
				callee, _ := scriptedCallee(t, c.Responses)
				modes[callee.addr] = ownership.ParseMode(c.Mode)
				conns = append(conns, svc.dial(t, callee.addr, true, hooksgrpc.WithBackoff(time.Millisecond, time.Millisecond)))
			}
			svc.work = func(ctx context.Context) error {
				for _, conn := range conns {
					_, _ = call(ctx, conn)
				}
				if tc.SetClaim != nil {
					_ = grpc.SetTrailer(ctx, metadata.Pairs(ownership.GRPCClaimKey, *tc.SetClaim))
				}
				if c := codeOf(t, tc.Code); c != codes.OK {
					return status.Error(c, "the handler's answer")
				}
				return nil
			}
			svc.start(t, true, hooksgrpc.WithHints(modes))
			client := newService(t, "client")
			md, _ := call(t.Context(), client.dial(t, svc.addr, false))
			one := func(key string) string {
				if v := md.Get(key); len(v) > 0 {
					return strings.Join(v, ",")
				}
				return "<absent>"
			}
			if got, want := one(ownership.GRPCClaimKey), strs([]*string{tc.Want.Claim}); got != want {
				t.Errorf("error-claim %s, want %s", got, want)
			}
			if got, want := one(ownership.GRPCPushbackKey), strs([]*string{tc.Want.Pushback}); got != want {
				t.Errorf("grpc-retry-pushback-ms %s, want %s", got, want)
			}
			server := svc.TP.HookAttributes(t, trace.SpanKindServer, 1)
			if len(server) != 1 || fmt.Sprint(server[0]) != fmt.Sprint(tc.Want.Span) {
				t.Errorf("server span's attributes %v, want %v", server, tc.Want.Span)
			}
		})
	}
}
