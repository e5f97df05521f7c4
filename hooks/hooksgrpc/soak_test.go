// SPDX-License-Identifier: Apache-2.0

package hooksgrpc_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hooksgrpc"
	"github.com/errorownership/errorownership/hooks/internal/soaktest"
	"github.com/errorownership/errorownership/ownership"
)

// The soak's service: one unary method that carries a string each way.
const soakMethod = "/soak.Soak/Work"

type soakServer struct {
	work func(ctx context.Context, in string) (string, error)
}

var soakDesc = grpc.ServiceDesc{
	ServiceName: "soak.Soak",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Work",
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				out, err := srv.(*soakServer).work(ctx, req.(*wrapperspb.StringValue).GetValue())
				if err != nil {
					return nil, err
				}
				return wrapperspb.String(out), nil
			}
			if icpt == nil {
				return h(ctx, in)
			}
			return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: soakMethod}, h)
		},
	}},
}

// serveSoak serves work on 127.0.0.1 with the hooks' server interceptor.
func serveSoak(t *testing.T, work func(ctx context.Context, in string) (string, error), opts ...hooksgrpc.Option) (addr string, stop func()) {
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(hooksgrpc.UnaryServerInterceptor(opts...)))
	srv.RegisterService(&soakDesc, &soakServer{work: work})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	return lis.Addr().String(), srv.Stop
}

func soakCall(ctx context.Context, conn *grpc.ClientConn, in string) (string, metadata.MD, error) {
	var md metadata.MD
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, soakMethod, wrapperspb.String(in), out, grpc.Trailer(&md))
	return out.GetValue(), md, err
}

// staticHints is a HintSource that knows no edges and gives fixed limits.
type staticHints struct{ limits hooks.Limits }

func (staticHints) Mode(string, string, string) ownership.Mode { return ownership.ModeUnknown }
func (s staticHints) BudgetLimits() hooks.Limits               { return s.limits }

// isRetry reports whether the call is a retry: it carries
// grpc-previous-rpc-attempts.
func isRetry(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(ownership.GRPCPreviousAttemptsKey)) > 0
}

// TestSoakRetryBudget: callers against a gRPC callee that fails every
// call, claiming it, in real time, through the interceptor's per-peer
// budget: the retries stay within ratio × calls + floor × (duration +
// window), and the budget is used. Short form 2 s; make soak, 3 minutes.
func TestSoakRetryBudget(t *testing.T) {
	duration := soaktest.Pick(2*time.Second, 2*time.Second, 3*time.Minute)
	workers := soaktest.Pick(32, 16, 64)
	limits := hooks.Limits{Ratio: 0.1, MinRetriesPerSecond: 1}
	var counter soaktest.Attempts
	addr, stop := serveSoak(t, func(ctx context.Context, _ string) (string, error) {
		counter.Count(isRetry(ctx))
		return "", status.Error(codes.Unavailable, "down")
	})
	defer stop()
	conn := dialPlain(t, addr, grpc.WithUnaryInterceptor(hooksgrpc.UnaryClientInterceptor(
		hooksgrpc.WithHints(staticHints{limits}), hooksgrpc.WithBackoff(time.Millisecond, 4*time.Millisecond))))

	start := time.Now()
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for range workers {
		wg.Go(func() {
			for time.Since(start) < duration {
				if _, _, err := soakCall(context.Background(), conn, "x"); status.Code(err) != codes.Unavailable {
					wrong.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := wrong.Load(); n > 0 {
		t.Errorf("%d calls failed otherwise than with the callee's UNAVAILABLE", n)
	}
	got := counter.Snapshot()
	got.Check(t, "gRPC, 100 % failures, per-peer budget", limits, elapsed, hooks.DefaultBudgetWindow)
	if float64(got.Retries) < 0.5*limits.Ratio*float64(got.Calls) {
		t.Errorf("%d retries for %d calls: the budget was not used", got.Retries, got.Calls)
	}
}

// TestSoakConcurrentGRPC is TestSoakConcurrentHTTP over gRPC: rounds of
// thousands of concurrent calls from a plain client through B (server and
// client interceptors) to C (server interceptor), where C always fails a
// tenth of the calls, fails the first attempt of another tenth, and
// answers the rest. Every answer must be what C's behaviour calls for,
// the retries stay within B's budget, the live heap stays flat, and
// nothing is left running. Short form 5 rounds of 4000 calls, 2000 at a
// time; make soak, 3 minutes of rounds of 20,000, 4000 at a time. The
// heap is compared from the end of the second round.
func TestSoakConcurrentGRPC(t *testing.T) {
	rounds := soaktest.Pick(5, 3, 1<<30)
	perRound := soaktest.Pick(4000, 600, 20000)
	concurrency := soaktest.Pick(2000, 300, 4000)
	long := soaktest.Pick(time.Duration(0), 0, 3*time.Minute)
	limits := hooks.DefaultLimits()

	goroutines := soaktest.Goroutines()
	var counter soaktest.Attempts
	cAddr, stopC := serveSoak(t, func(ctx context.Context, in string) (string, error) {
		retry := counter.Count(isRetry(ctx))
		id, err := strconv.Atoi(in)
		switch {
		case err != nil:
			return "", status.Error(codes.InvalidArgument, "no id")
		case id%10 == 0:
			return "", status.Error(codes.Internal, "C fails")
		case id%10 == 1 && !retry:
			return "", status.Error(codes.Unavailable, "C flakes")
		}
		return "c" + in, nil
	})
	toC := dialPlain(t, cAddr, grpc.WithUnaryInterceptor(hooksgrpc.UnaryClientInterceptor(
		hooksgrpc.WithHints(staticHints{limits}), hooksgrpc.WithBackoff(time.Millisecond, 4*time.Millisecond))))
	bAddr, stopB := serveSoak(t, func(ctx context.Context, in string) (string, error) {
		out, _, err := soakCall(ctx, toC, in)
		if err != nil {
			return "", status.Error(codes.Internal, "C failed")
		}
		return "b" + out, nil
	}, hooksgrpc.WithHints(staticHints{limits}))
	root := dialPlain(t, bAddr)

	var ok, failOK, flakyOK, flakyFailed, wrong atomic.Int64
	var firstWrong atomic.Value
	wrongf := func(format string, args ...any) {
		if wrong.Add(1) == 1 {
			firstWrong.Store(fmt.Sprintf(format, args...))
		}
	}
	var next atomic.Int64
	round := func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, concurrency)
		for range perRound {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				id := next.Add(1)
				in := strconv.FormatInt(id, 10)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				out, md, err := soakCall(ctx, root, in)
				claims := md.Get(ownership.GRPCClaimKey)
				okBody := err == nil && out == "bc"+in && len(claims) == 0
				failed := status.Code(err) == codes.Internal && len(claims) == 1 && claims[0] == "unclaimed"
				switch {
				case id%10 == 0 && failed:
					failOK.Add(1)
				case id%10 == 1 && okBody:
					flakyOK.Add(1)
				case id%10 == 1 && failed:
					flakyFailed.Add(1)
				case id%10 > 1 && okBody:
					ok.Add(1)
				default:
					wrongf("call %d: %q, %v, error-claim %q", id, out, err, claims)
				}
			})
		}
		wg.Wait()
	}

	var heap soaktest.Heap
	start := time.Now()
	round() // warm up: connections, pools, budgets
	round()
	heap.Sample()
	n := 2
	for ; n < rounds && (long == 0 || time.Since(start) < long); n++ {
		round()
		heap.Sample()
	}
	elapsed := time.Since(start)
	total := int64(n * perRound)
	t.Logf("%d calls in %d rounds of %d, %d at a time, in %v (%.0f/s): %d answered, %d failing failed, %d flaky answered, %d flaky failed (budget), %d wrong",
		total, n, perRound, concurrency, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(),
		ok.Load(), failOK.Load(), flakyOK.Load(), flakyFailed.Load(), wrong.Load())
	if w := wrong.Load(); w > 0 {
		t.Errorf("%d calls answered otherwise than C's behaviour calls for; first: %v", w, firstWrong.Load())
	}
	counter.Snapshot().Check(t, "gRPC B → C, 20 % failures", limits, elapsed, hooks.DefaultBudgetWindow)
	heap.Check(t, soaktest.Pick[uint64](4<<20, 4<<20, 8<<20))

	root.Close()
	toC.Close()
	stopB()
	stopC()
	soaktest.WaitGoroutines(t, goroutines+2, 10*time.Second)
}
