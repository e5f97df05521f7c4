// SPDX-License-Identifier: Apache-2.0

package hooksgrpc_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hooksgrpc"
	"github.com/errorownership/errorownership/hooks/internal/soaktest"
	"github.com/errorownership/errorownership/ownership"
)

// rawCallee is a gRPC callee written on net/http's HTTP/2 server (h2c),
// not on grpc-go's, so that it can answer with what grpc-go's server would
// refuse to send: every header and trailer is written as given.
type rawCallee struct {
	addr     string
	requests atomic.Int32
}

func newRawCallee(t *testing.T, respond func(w http.ResponseWriter, stop <-chan struct{})) *rawCallee {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &rawCallee{addr: ln.Addr().String()}
	stop := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c.requests.Add(1)
		respond(w, stop)
	}), ReadHeaderTimeout: 10 * time.Second}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		close(stop)
		_ = srv.Close()
	})
	return c
}

const mib = 1 << 20

// huge is the size of the oversized metadata: 1 MiB, but 64 KiB under the
// race detector, which takes seconds over each megabyte of HPACK (the race
// run is for races; the plain run holds the sizes).
var huge = soaktest.Pick(mib, 64<<10, mib)

// trailersOnly answers with a status and the extra metadata in one
// HEADERS frame, as gRPC servers answer errors.
func trailersOnly(code string, extra http.Header) func(http.ResponseWriter, <-chan struct{}) {
	return func(w http.ResponseWriter, _ <-chan struct{}) {
		h := w.Header()
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", code)
		h.Set("Grpc-Message", "hostile")
		for k, v := range extra {
			h[k] = v
		}
		w.WriteHeader(http.StatusOK)
	}
}

// claim is the error-claim trailer with values vs.
func claim(vs ...string) http.Header { return http.Header{"Error-Claim": vs} }

// withMessage answers a message, then a status and the extra metadata in
// the trailers.
func withMessage(code string, extra http.Header) func(http.ResponseWriter, <-chan struct{}) {
	return func(w http.ResponseWriter, _ <-chan struct{}) {
		msg, _ := proto.Marshal(wrapperspb.String("ok"))
		frame := make([]byte, 5+len(msg))
		binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
		copy(frame[5:], msg)
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(frame)
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", code)
		for k, v := range extra {
			w.Header()[http.TrailerPrefix+k] = v
		}
	}
}

// hostileCallee is a lie or garbage a gRPC callee can answer with; want
// is the claim the hooks must read on a failure.
type hostileCallee struct {
	name    string
	respond func(http.ResponseWriter, <-chan struct{})
	want    ownership.Claim
}

// hostileCallees returns them all, built afresh on each call as in the
// HTTP test.
func hostileCallees() []hostileCallee {
	return []hostileCallee{
		{"claims everything", trailersOnly("13", claim("claimed")), ownership.ClaimClaimed},
		{"unclaims everything", trailersOnly("13", claim("unclaimed")), ownership.ClaimUnclaimed},
		{"an invalid value", trailersOnly("13", claim("yes-please")), ownership.ClaimMissing},
		{"invalid UTF-8", trailersOnly("13", claim("\xff\xfe\xfd")), ownership.ClaimMissing},
		{"claimed, then invalid UTF-8", trailersOnly("13", claim("claimed\xc3\x28")), ownership.ClaimMissing},
		{"a 1 MiB claim", trailersOnly("13", claim(strings.Repeat("claimed", huge/7))), ownership.ClaimMissing},
		{"a 1 MiB trailer beside the claim", trailersOnly("13", http.Header{"X-Junk": {strings.Repeat("j", huge)}, "Error-Claim": {"claimed"}}), ownership.ClaimClaimed},
		{"1000 repeated claims", trailersOnly("13", claim(strings.Split(strings.Repeat("claimed,", 1000), ",")[:1000]...)), ownership.ClaimMissing},
		{"claimed and unclaimed", trailersOnly("13", claim("claimed", "unclaimed")), ownership.ClaimMissing},
		{"a comma list", trailersOnly("13", claim("claimed,unclaimed")), ownership.ClaimMissing},
		{"an odd letter case", trailersOnly("13", http.Header{"eRRoR-cLaIm": {"CLAIMED"}}), ownership.ClaimClaimed},
		{"a binary claim", trailersOnly("13", http.Header{"Error-Claim-Bin": {"Y2xhaW1lZA"}}), ownership.ClaimMissing},
		{"garbage pushback", trailersOnly("13", http.Header{"Error-Claim": {"claimed"}, "Grpc-Retry-Pushback-Ms": {"-99999999999999999999"}}), ownership.ClaimClaimed},
		// grpc-go fails a call with a malformed status as Unknown, without
		// its trailers: no claim.
		{"a garbage status", trailersOnly("banana", claim("claimed")), ownership.ClaimMissing},
		{"an out-of-range status", trailersOnly("4294967295", claim("claimed")), ownership.ClaimMissing},
		{"a 1 MiB status message", trailersOnly("13", http.Header{"Error-Claim": {"claimed"}, "Grpc-Message": {strings.Repeat("%ff", huge/3)}}), ownership.ClaimClaimed},
		{"10,000 junk trailers", func() func(http.ResponseWriter, <-chan struct{}) {
			h := claim("claimed")
			for i := range 10000 {
				h[fmt.Sprintf("X-Junk-%d", i)] = []string{"j"}
			}
			return trailersOnly("14", h)
		}(), ownership.ClaimClaimed},
		{"a claim in the headers, not the trailers", func(w http.ResponseWriter, _ <-chan struct{}) {
			w.Header().Set("Error-Claim", "claimed")
			withMessage("13", nil)(w, nil)
		}, ownership.ClaimMissing},
		{"a message, then a failure", withMessage("14", claim("claimed")), ownership.ClaimClaimed},
		{"a claim on a success", withMessage("0", claim("unclaimed")), ownership.ClaimMissing},
		{"a claim on a caller's fault", trailersOnly("5", claim("claimed")), ownership.ClaimMissing},
		{"not gRPC at all", func(w http.ResponseWriter, _ <-chan struct{}) {
			w.Header().Set("Error-Claim", "claimed")
			http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
		}, ownership.ClaimMissing},
		{hanging, func(w http.ResponseWriter, stop <-chan struct{}) {
			w.Header().Set("Content-Type", "application/grpc")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-stop:
			case <-time.After(10 * time.Second):
			}
		}, ownership.ClaimMissing},
	}
}

// dialPlain connects to addr without the hooks.
func dialPlain(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// hostileDeadline is every call's deadline, hangingDeadline that of the
// calls to the callee that never answers, which cost it with the hooks or
// without. The race detector makes a 1 MiB trailer take a while.
var hostileDeadline = soaktest.Pick(time.Second, 5*time.Second, time.Second)

const hangingDeadline = 300 * time.Millisecond

// hanging names the callee that answers nothing until the deadline.
const hanging = "no answer until the deadline"

// timedCall makes one call inside a Ledger and returns how long it took,
// the recorded outcome and its error.
func timedCall(conn *grpc.ClientConn, deadline time.Duration) (time.Duration, hooks.Outcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	ctx, ledger := hooks.WithLedger(ctx)
	start := time.Now()
	_, err := call(ctx, conn)
	took := time.Since(start)
	var o hooks.Outcome
	if outs := ledger.Outcomes(nil); len(outs) == 1 {
		o = outs[0]
	}
	return took, o, err
}

// TestHostileCallee answers a caller with every lie and kind of garbage
// a gRPC callee can send in its status and trailers, and checks that the
// hooks only ever ignore or neutralise it: the caller gets the status a
// caller without the hooks gets, as fast but for one quick retry, reads
// a clean claim, nothing panics, and the caller's own error-claim is one
// clean value whatever its callee sent.
func TestHostileCallee(t *testing.T) {
	slack := soaktest.Pick(time.Second, 5*time.Second, time.Second) // see the HTTP test of the same name
	for _, tc := range hostileCallees() {
		t.Run(tc.name, func(t *testing.T) {
			callee := newRawCallee(t, tc.respond)
			// grpc-go reads up to 16 MiB of headers by default; said here
			// so that the test does not depend on it.
			maxHeaders := grpc.WithMaxHeaderListSize(16 * mib)
			bare := dialPlain(t, callee.addr, maxHeaders)
			hooked := dialPlain(t, callee.addr, maxHeaders,
				grpc.WithUnaryInterceptor(hooksgrpc.UnaryClientInterceptor(fastRetries...)))

			deadline := hostileDeadline
			if tc.name == hanging {
				deadline = hangingDeadline
			}
			tookWithout, _, errWithout := timedCall(bare, deadline)
			before := callee.requests.Load()
			tookWith, o, errWith := timedCall(hooked, deadline)
			attempts := callee.requests.Load() - before
			if status.Code(errWith) != status.Code(errWithout) {
				t.Fatalf("with the hooks: %.200v; without: %.200v", errWith, errWithout)
			}
			if tookWith > time.Duration(attempts)*tookWithout+slack {
				t.Errorf("the call took %v with the hooks, %v without", tookWith, tookWithout)
			}
			if o.Failed && o.Received != tc.want {
				t.Errorf("read claim %v, want %v", o.Received, tc.want)
			}
			wantAttempts := int32(2)
			switch {
			case !o.Failed, o.InFlight, o.Received == ownership.ClaimUnclaimed:
				wantAttempts = 1
			}
			if attempts != wantAttempts {
				t.Errorf("%d attempts (outcome %+v), want %d", attempts, o, wantAttempts)
			}
			t.Logf("%v; outcome %+v", status.Code(errWith), o)

			// A caller service with the server interceptor, relaying the
			// failure: its own claim is exactly one clean value.
			b := newService(t, "B")
			b.work = func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, deadline)
				defer cancel()
				_, err := call(ctx, hooked)
				if err != nil {
					return status.Error(codes.Internal, "callee failed")
				}
				return nil
			}
			b.start(t, true)
			ctx, cancel := context.WithTimeout(context.Background(), deadline+5*time.Second)
			defer cancel()
			md, err := call(ctx, dialPlain(t, b.addr))
			claims := md.Get(ownership.GRPCClaimKey)
			switch {
			case err == nil && len(claims) != 0:
				t.Errorf("the caller succeeded with error-claim %q", claims)
			case err != nil && (len(claims) != 1 || ownership.ParseClaim(claims[0]) == ownership.ClaimMissing):
				t.Errorf("the caller failed (%.200v) with error-claim %.200q, want one clean claim", err, claims)
			}
		})
	}
}

// hugeTrailer is an invoker that fails every call with a trailer holding
// a fresh 1 MiB of garbage, in error-claim and beside it, as grpc-go would
// have read it off the wire.
func hugeTrailer(repeated bool) grpc.UnaryInvoker {
	return func(_ context.Context, _ string, _, _ any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
		junk := strings.Repeat("\xff", mib)
		md := metadata.MD{"x-junk": {junk}, ownership.GRPCClaimKey: {junk}}
		if repeated {
			md[ownership.GRPCClaimKey] = strings.Split(strings.Repeat("claimed,", 1000), ",")
		}
		for _, o := range opts {
			if t, ok := o.(grpc.TrailerCallOption); ok {
				*t.TrailerAddr = md
			}
		}
		return status.Error(codes.Internal, "hostile")
	}
}

// TestHostileTrailersAllocateNothing measures what the client and server
// interceptors allocate, and keep, for calls whose answers carry 1 MiB
// trailers.
func TestHostileTrailersAllocateNothing(t *testing.T) {
	for _, repeated := range []bool{false, true} {
		t.Run(fmt.Sprintf("repeated=%v", repeated), func(t *testing.T) {
			invoker := hugeTrailer(repeated)
			client := hooksgrpc.UnaryClientInterceptor(hooksgrpc.WithPeerService("callee"), hooksgrpc.WithMaxAttempts(2), hooksgrpc.WithBackoff(0, 0))
			server := hooksgrpc.UnaryServerInterceptor()
			info := &grpc.UnaryServerInfo{FullMethod: workMethod}
			in, out := wrapperspb.String("work"), new(wrapperspb.StringValue)
			handler := func(ctx context.Context, _ any) (any, error) {
				return nil, client(ctx, workMethod, in, out, nil, invoker)
			}
			serve := func() { _, _ = server(context.Background(), in, info, handler) }
			bare := func() {
				for range 2 {
					_ = invoker(context.Background(), workMethod, in, out, nil)
				}
			}
			soaktest.CheckAllocs(t, soaktest.Pick[uint64](50, 5, 500), serve, bare, "call", "1 MiB trailers")
		})
	}
}

// TestHostileCalleeThroughRelay relays every hostile answer's trailer with
// grpc.SetTrailer from a handler behind the server interceptor, as a
// proxy would: a relayed error-claim that is not one clean value is not
// the handler's claim; the interceptor drops it and sends its own.
func TestHostileCalleeThroughRelay(t *testing.T) {
	for _, tc := range hostileCallees() {
		if tc.name == hanging {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			callee := newRawCallee(t, tc.respond)
			hooked := dialPlain(t, callee.addr, grpc.WithMaxHeaderListSize(16*mib),
				grpc.WithUnaryInterceptor(hooksgrpc.UnaryClientInterceptor(fastRetries...)))
			b := newService(t, "B")
			b.work = func(ctx context.Context) error {
				md, err := call(ctx, hooked)
				_ = grpc.SetTrailer(ctx, md)
				if err != nil {
					return status.Error(codes.Internal, "callee failed")
				}
				return nil
			}
			b.start(t, true)
			ctx, cancel := context.WithTimeout(context.Background(), hostileDeadline+5*time.Second)
			defer cancel()
			md, err := call(ctx, dialPlain(t, b.addr, grpc.WithMaxHeaderListSize(16*mib)))
			claims := md.Get(ownership.GRPCClaimKey)
			if err != nil && (len(claims) != 1 || len(claims[0]) > 64 || ownership.ParseClaim(claims[0]) == ownership.ClaimMissing) {
				first := ""
				if len(claims) > 0 {
					first = claims[0][:min(len(claims[0]), 40)]
				}
				t.Errorf("the relay failed (%v) with %d error-claim values, the first %q, want one clean claim", status.Code(err), len(claims), first)
			}
		})
	}
}

// TestRelayDropsRelayedClaim: a callee that claims everything, behind a
// relay that drops error-claim from the trailer it relays (as the server
// interceptor's documentation asks), leaves the interceptor to decide:
// unclaimed, with pushback, since the relay's call failed.
func TestRelayDropsRelayedClaim(t *testing.T) {
	callee := newRawCallee(t, trailersOnly("13", claim("claimed")))
	hooked := dialPlain(t, callee.addr, grpc.WithUnaryInterceptor(hooksgrpc.UnaryClientInterceptor(fastRetries...)))
	b := newService(t, "B")
	b.work = func(ctx context.Context) error {
		md, err := call(ctx, hooked)
		md = md.Copy()
		md.Delete(ownership.GRPCClaimKey)
		_ = grpc.SetTrailer(ctx, md)
		return err
	}
	b.start(t, true)
	md, err := call(context.Background(), dialPlain(t, b.addr))
	if got := md.Get(ownership.GRPCClaimKey); status.Code(err) != codes.Internal || len(got) != 1 || got[0] != "unclaimed" ||
		len(md.Get(ownership.GRPCPushbackKey)) != 1 {
		t.Fatalf("the relay failed with %v, trailer %v; want INTERNAL, unclaimed with pushback", err, md)
	}
	if n := callee.requests.Load(); n != 2 {
		t.Fatalf("the callee served %d calls, want 2", n)
	}
}
