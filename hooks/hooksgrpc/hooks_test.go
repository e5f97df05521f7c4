// SPDX-License-Identifier: Apache-2.0

package hooksgrpc_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hooksgrpc"
	"github.com/errorownership/errorownership/hooks/internal/chaintest"
	"github.com/errorownership/errorownership/ownership"
)

// ledgerCall makes one unary call from inside a server request's Ledger
// and returns the call's recorded outcome and the error.
func ledgerCall(t *testing.T, conn *grpc.ClientConn) (hooks.Outcome, error) {
	t.Helper()
	ctx, ledger := hooks.WithLedger(context.Background())
	_, err := call(ctx, conn)
	outs := ledger.Outcomes(nil)
	if len(outs) != 1 {
		t.Fatalf("ledger has %d outcomes, want 1", len(outs))
	}
	return outs[0], err
}

// TestMalformedClaims: anything but one clean claimed or unclaimed in the
// trailer reads as missing, and is retried.
func TestMalformedClaims(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   ownership.Claim
	}{
		{"claimed", []string{"claimed"}, ownership.ClaimClaimed},
		{"upper case", []string{"Unclaimed"}, ownership.ClaimUnclaimed},
		{"absent", nil, ownership.ClaimMissing},
		{"unknown", []string{"perhaps"}, ownership.ClaimMissing},
		{"two values", []string{"claimed", "unclaimed"}, ownership.ClaimMissing},
		{"oversized", []string{strings.Repeat("x", 65)}, ownership.ClaimMissing},
		{"oversized claim-like", []string{"claimed" + strings.Repeat("d", 60)}, ownership.ClaimMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newService(t, "C")
			c.work = func(ctx context.Context) error {
				if tc.values != nil {
					md := metadata.MD{}
					md.Append(ownership.GRPCClaimKey, tc.values...)
					_ = grpc.SetTrailer(ctx, md)
				}
				return status.Error(codes.Unavailable, "down")
			}
			c.start(t, false)
			b := newService(t, "B")
			out, err := ledgerCall(t, b.dial(t, c.addr, true, fastRetries...))
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("err %v", err)
			}
			if out.Received != tc.want {
				t.Errorf("received %v, want %v", out.Received, tc.want)
			}
			wantCalls := int32(2)
			if tc.want == ownership.ClaimUnclaimed {
				wantCalls = 1
			}
			if got := c.Requests.Load(); got != wantCalls {
				t.Errorf("%d calls, want %d", got, wantCalls)
			}
		})
	}
}

// TestNotAFault: a status that is the caller's fault is neither claimed nor
// retried.
func TestNotAFault(t *testing.T) {
	c := newService(t, "C")
	c.work = func(context.Context) error { return status.Error(codes.NotFound, "no such order") }
	c.start(t, true)
	b := newService(t, "B")
	ctx, ledger := hooks.WithLedger(context.Background())
	md, err := call(ctx, b.dial(t, c.addr, true, fastRetries...))
	if status.Code(err) != codes.NotFound || len(md.Get(ownership.GRPCClaimKey)) != 0 || c.Requests.Load() != 1 {
		t.Fatalf("err %v, trailer %v, %d calls", err, md, c.Requests.Load())
	}
	if outs := ledger.Outcomes(nil); len(outs) != 1 || outs[0].Failed {
		t.Fatalf("outcomes %+v", outs)
	}
}

// TestPlainGRPCRetryPolicyStops: a client with only a gRPC service-config
// retry policy (gRFC A6) and no hooks retries a claimed error, and stops at
// an unclaimed one thanks to grpc-retry-pushback-ms: -1.
func TestPlainGRPCRetryPolicyStops(t *testing.T) {
	const serviceConfig = `{"methodConfig":[{"name":[{"service":"chain.Chain"}],"retryPolicy":{
		"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.001s","backoffMultiplier":1,
		"retryableStatusCodes":["INTERNAL"]}}]}`
	for _, tc := range []struct {
		name      string
		unclaim   bool
		wantCalls int32
	}{
		{"claimed: retried", false, 3},
		{"unclaimed: not retried", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newService(t, "C")
			c.work = func(ctx context.Context) error {
				if tc.unclaim {
					hooks.LedgerFrom(ctx).Record(hooks.Outcome{PeerService: "d", Failed: true, Decision: ownership.DecisionExhausted})
				}
				return status.Error(codes.Internal, "failed")
			}
			c.start(t, true)
			conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultServiceConfig(serviceConfig))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := call(context.Background(), conn); status.Code(err) != codes.Internal {
				t.Fatalf("err %v", err)
			}
			if got := c.Requests.Load(); got != tc.wantCalls {
				t.Fatalf("%d calls, want %d", got, tc.wantCalls)
			}
		})
	}
}

// watch opens the streaming method and reads it to the end.
func watch(ctx context.Context, conn *grpc.ClientConn) ([]string, error) {
	s, err := conn.NewStream(ctx, watchDesc, watchMethod)
	if err != nil {
		return nil, err
	}
	if err := s.SendMsg(wrapperspb.String("watch")); err != nil {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	var got []string
	for {
		m := new(wrapperspb.StringValue)
		if err := s.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			return got, err
		}
		got = append(got, m.GetValue())
	}
}

// TestStreams: a stream is retried only before any message arrived.
func TestStreams(t *testing.T) {
	fail := status.Error(codes.Unavailable, "down")
	for _, tc := range []struct {
		name      string
		watch     func(attempt int, send func(string) error) error
		wantCalls int32
		wantMsgs  string
		wantErr   codes.Code
		want      ownership.RetryDecision
	}{
		{"fails before any message: retried, then exhausted",
			func(int, func(string) error) error { return fail }, 2, "", codes.Unavailable, ownership.DecisionExhausted},
		{"fails once, then succeeds",
			func(attempt int, send func(string) error) error {
				if attempt == 1 {
					return fail
				}
				_ = send("a")
				_ = send("b")
				return nil
			}, 2, "a,b", codes.OK, ownership.DecisionNone},
		{"fails after a message: not retried",
			func(_ int, send func(string) error) error {
				_ = send("a")
				return fail
			}, 1, "a", codes.Unavailable, ownership.DecisionNoPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newService(t, "C")
			c.watch = tc.watch
			c.start(t, true)
			conn := newService(t, "B").dial(t, c.addr, true, fastRetries...)
			ctx, ledger := hooks.WithLedger(context.Background())
			msgs, err := watch(ctx, conn)
			if status.Code(err) != tc.wantErr || strings.Join(msgs, ",") != tc.wantMsgs {
				t.Fatalf("got %q, %v; want %q, %v", msgs, err, tc.wantMsgs, tc.wantErr)
			}
			if got := c.Requests.Load(); got != tc.wantCalls {
				t.Errorf("%d streams, want %d", got, tc.wantCalls)
			}
			outs := ledger.Outcomes(nil)
			if len(outs) != 1 || outs[0].Decision != tc.want || outs[0].Failed != (tc.wantErr != codes.OK) {
				t.Errorf("outcomes %+v, want decision %v", outs, tc.want)
			}
			if tc.wantErr != codes.OK && outs[0].Received != ownership.ClaimClaimed {
				t.Errorf("stream trailer claim %v, want claimed", outs[0].Received)
			}
		})
	}
}

// TestStreamServerSetsTrailer: a streaming handler's failure is claimed
// and, with a failed dependency, unclaimed with pushback.
func TestStreamServerSetsTrailer(t *testing.T) {
	c := newService(t, "C")
	c.watch = func(int, func(string) error) error { return status.Error(codes.Internal, "boom") }
	c.start(t, true)
	conn := newService(t, "plain").dial(t, c.addr, false)
	s, err := conn.NewStream(context.Background(), watchDesc, watchMethod)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.SendMsg(wrapperspb.String("watch"))
	_ = s.CloseSend()
	if err := s.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.Internal {
		t.Fatalf("err %v", err)
	}
	if got := s.Trailer().Get(ownership.GRPCClaimKey); len(got) != 1 || got[0] != "claimed" {
		t.Fatalf("trailer %v", s.Trailer())
	}
}

func TestPeerServiceFromTarget(t *testing.T) {
	// The peer defaults to the target's address, as otelgrpc records it
	// on the client span (server.address:server.port): visible in the
	// ledger.
	c := newService(t, "C")
	c.work = func(context.Context) error { return nil }
	c.start(t, false)
	b := newService(t, "B")
	conn := b.dial(t, "passthrough:///"+c.addr, true)
	out, _ := ledgerCall(t, conn)
	if out.PeerService != c.addr || out.PeerOperation != "chain.Chain/Work" {
		t.Fatalf("outcome %+v, want peer %s", out, c.addr)
	}
	host := chaintest.SpanAttrs(b.Spans, trace.SpanKindClient, "server.address", 1)
	port := chaintest.SpanAttrs(b.Spans, trace.SpanKindClient, "server.port", 1)
	if len(host) != 1 || len(port) != 1 || net.JoinHostPort(host[0], port[0]) != out.PeerService {
		t.Fatalf("the client span says %v:%v, the hooks %s", host, port, out.PeerService)
	}
	conn = newService(t, "B").dial(t, c.addr, true, hooksgrpc.WithPeerService("c"))
	if out, _ = ledgerCall(t, conn); out.PeerService != "c" {
		t.Fatalf("outcome %+v", out)
	}
}
