// SPDX-License-Identifier: Apache-2.0

package hooksgrpc_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hooksgrpc"
	"github.com/errorownership/errorownership/hooks/internal/chaintest"
	"github.com/errorownership/errorownership/ownership"
)

// fastRetries are the client options of every hop: two attempts, quick.
var fastRetries = []hooksgrpc.Option{hooksgrpc.WithMaxAttempts(2), hooksgrpc.WithBackoff(time.Millisecond, 2*time.Millisecond)}

// bTimeout is how long B waits in the timeout case.
const bTimeout = 300 * time.Millisecond

func leaf(does chaintest.Leaf) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		switch does {
		case chaintest.LeafFail:
			return status.Error(codes.Internal, "C failed")
		case chaintest.LeafUnclaim:
			_ = grpc.SetTrailer(ctx, metadata.Pairs(ownership.GRPCClaimKey, "unclaimed"))
			return status.Error(codes.Internal, "C's dependency failed")
		case chaintest.LeafHang:
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
			return status.Error(codes.DeadlineExceeded, "C gave up")
		}
		return nil
	}
}

// middle is the work of A and B: call the next service, fail if it did.
func middle(conn *grpc.ClientConn, m chaintest.Middle) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		callCtx := ctx
		if m.Broken {
			callCtx = context.Background()
		}
		done := make(chan error, 1)
		go func() {
			_, err := call(callCtx, conn)
			done <- err
		}()
		var wait <-chan time.Time
		if m.Timeout {
			wait = time.After(bTimeout)
		}
		select {
		case err := <-done:
			if err != nil {
				return status.Error(codes.Internal, "downstream failed")
			}
			return nil
		case <-wait:
			return status.Error(codes.DeadlineExceeded, "B timed out")
		}
	}
}

// TestChain walks the decision matrix and the refinements through three
// real gRPC services A → B → C.
func TestChain(t *testing.T) {
	for _, tc := range chaintest.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			a, b, c := newService(t, "A"), newService(t, "B"), newService(t, "C")
			c.work = leaf(tc.C)
			c.start(t, tc.CHooks)

			opts := slices.Clone(fastRetries)
			if tc.B.NoPolicy {
				opts = append(opts, hooksgrpc.WithRetryPolicy(func(string) bool { return false }))
			}
			if tc.B.EmptyBudget {
				opts = append(opts, hooksgrpc.WithBudget(hooks.NewBudget(hooks.Limits{})))
			}
			b.work = middle(b.dial(t, c.addr, tc.B.Hooks, opts...), tc.B)
			b.start(t, tc.B.Hooks)

			a.work = middle(a.dial(t, b.addr, true, fastRetries...), chaintest.Middle{})
			a.start(t, true)

			root := newService(t, "root")
			md, err := call(context.Background(), root.dial(t, a.addr, false))
			if (err == nil) != (tc.WantRoot == "") {
				t.Fatalf("root call: %v", err)
			}
			if got := first(md.Get(ownership.GRPCClaimKey)); got != tc.WantRoot {
				t.Errorf("root read claim %q from A, want %q", got, tc.WantRoot)
			}
			wantPushback := map[string]string{"unclaimed": "-1"}[tc.WantRoot]
			if got := first(md.Get(ownership.GRPCPushbackKey)); got != wantPushback {
				t.Errorf("root read pushback %q, want %q", got, wantPushback)
			}
			chaintest.Check(t, tc, "grpc-previous-rpc-attempts", a.Observation(), b.Observation(), c.Observation())
		})
	}
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
