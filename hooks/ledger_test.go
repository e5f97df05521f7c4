// SPDX-License-Identifier: Apache-2.0

package hooks

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/errorownership/errorownership/ownership"
)

func TestLedgerContext(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	type key struct{}
	parent = context.WithValue(parent, key{}, "v")
	ctx, l := WithLedger(parent)
	if LedgerFrom(ctx) != l {
		t.Fatal("LedgerFrom does not return the ledger")
	}
	if LedgerFrom(parent) != nil {
		t.Fatal("ledger leaked into the parent")
	}
	if ctx.Value(key{}) != "v" {
		t.Fatal("parent values lost")
	}
	if _, ok := ctx.Deadline(); !ok {
		t.Fatal("parent deadline lost")
	}
	// Cancellation still propagates through the custom context.
	child, childCancel := context.WithCancel(ctx)
	defer childCancel()
	cancel()
	select {
	case <-child.Done():
	case <-time.After(time.Second):
		t.Fatal("cancel did not propagate")
	}
}

func TestLedgerNil(t *testing.T) {
	var l *Ledger
	c := l.Begin("x")
	l.End(c, Outcome{Failed: true})
	l.Record(Outcome{})
	if got := l.Outcomes(nil); len(got) != 0 {
		t.Fatalf("nil ledger outcomes = %v", got)
	}
	if claim, reason := l.Decide(nil, false); claim != ownership.ClaimClaimed || reason != ownership.ReasonOwn {
		t.Fatalf("nil ledger decides %v/%v", claim, reason)
	}
}

// TestLedgerConcurrent records a fan-out from many goroutines, past the
// inline capacity, while snapshots are taken.
func TestLedgerConcurrent(t *testing.T) {
	var l Ledger
	const calls = 50
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			peer := fmt.Sprint("peer", i)
			c := l.Begin(peer)
			_ = l.Outcomes(nil)
			l.End(c, Outcome{PeerService: peer, Failed: i%2 == 0, Received: ownership.ClaimClaimed, Decision: ownership.DecisionExhausted})
		})
	}
	wg.Wait()
	got := l.Outcomes(nil)
	if len(got) != calls {
		t.Fatalf("%d outcomes, want %d", len(got), calls)
	}
	failed := 0
	for _, o := range got {
		if o.InFlight {
			t.Fatalf("ended call reported in flight: %+v", o)
		}
		if o.Failed {
			failed++
		}
	}
	if failed != calls/2 {
		t.Fatalf("%d failed, want %d", failed, calls/2)
	}
}

func TestLedgerInFlight(t *testing.T) {
	var l Ledger
	done := l.Begin("fast")
	l.Begin("slow")
	l.End(done, Outcome{PeerService: "fast"})
	got := l.Outcomes(nil)
	if len(got) != 2 || got[0].InFlight || !got[1].InFlight || got[1].PeerService != "slow" {
		t.Fatalf("outcomes = %+v", got)
	}
	// A request that answers while a call is in flight gave up on it.
	if claim, reason := l.Decide(nil, false); claim != ownership.ClaimUnclaimed || reason != ownership.ReasonPropagated {
		t.Fatalf("Decide = %v/%v, want unclaimed/propagated", claim, reason)
	}
}
