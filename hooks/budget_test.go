// SPDX-License-Identifier: Apache-2.0

package hooks

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errorownership/errorownership/ownership"
)

// fakeClock is a manual clock for Budget tests.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestBudgetReserveOnly(t *testing.T) {
	clk := &fakeClock{}
	b := NewBudget(Limits{Ratio: 0, MinRetriesPerSecond: 2}, BudgetWindow(5*time.Second), BudgetClock(clk.now))
	allowed := 0
	for range 100 {
		if b.TryWithdraw() {
			allowed++
		}
	}
	if allowed != 10 { // 2/s × 5 s
		t.Fatalf("reserve allowed %d retries, want 10", allowed)
	}
	// The withdrawals expire with their slice, and the reserve renews.
	clk.advance(5 * time.Second)
	if !b.TryWithdraw() {
		t.Fatal("reserve did not renew after a window")
	}
}

func TestBudgetRatio(t *testing.T) {
	clk := &fakeClock{}
	b := NewBudget(Limits{Ratio: 0.1}, BudgetClock(clk.now))
	for range 30 {
		b.Deposit()
	}
	allowed := 0
	for range 10 {
		if b.TryWithdraw() {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("30 requests at 10 %% earned %d retries, want 3", allowed)
	}
	if got := b.Available(); got != 0 {
		t.Fatalf("Available = %d, want 0", got)
	}
	// Deposits expire too: a window later the earned retries are gone.
	clk.advance(DefaultBudgetWindow)
	b.Deposit()
	if b.TryWithdraw() {
		t.Fatal("expired deposits still paid for a retry")
	}
}

// TestBudgetUnderFullFailure runs a client against a callee that always
// fails, deterministically: requests arrive at a steady rate, every one
// fails, every failure asks for a retry. At every moment the retries of the
// last window must stay within ratio × requests + floor × window, and over
// the whole run within ratio × requests + floor × (duration + window).
func TestBudgetUnderFullFailure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits Limits
		rps    int
	}{
		{"defaults, busy client", DefaultLimits(), 1000},
		{"defaults, quiet client", DefaultLimits(), 5},
		{"no floor", Limits{Ratio: 0.2}, 200},
		{"floor only", Limits{MinRetriesPerSecond: 3}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{}
			const window = 10 * time.Second
			b := NewBudget(tc.limits, BudgetWindow(window), BudgetClock(clk.now))
			step := time.Second / time.Duration(tc.rps)
			const duration = 60 * time.Second
			slice := window / budgetSlices

			// Per-slice counts kept by the test itself, to check the
			// sliding bound independently of the Budget's bookkeeping.
			nSlices := int(duration/slice) + 1
			reqs := make([]int, nSlices)
			retries := make([]int, nSlices)
			var totalReqs, totalRetries int
			for at := time.Duration(0); at < duration; at += step {
				clk.ns.Store(int64(at))
				s := int(at / slice)
				b.Deposit()
				reqs[s]++
				totalReqs++
				if Retry(claimed, true, true, b) == ownership.DecisionRetried {
					retries[s]++
					totalRetries++
				}
				// The window ending with this slice.
				var wReqs, wRetries int
				for i := max(0, s-budgetSlices+1); i <= s; i++ {
					wReqs += reqs[i]
					wRetries += retries[i]
				}
				bound := tc.limits.Ratio*float64(wReqs) + tc.limits.MinRetriesPerSecond*window.Seconds()
				if float64(wRetries) > bound+1e-9 {
					t.Fatalf("at %v: %d retries in the window over %d requests, bound %.1f", at, wRetries, wReqs, bound)
				}
			}
			total := tc.limits.Ratio*float64(totalReqs) + tc.limits.MinRetriesPerSecond*(duration+window).Seconds()
			if float64(totalRetries) > total {
				t.Fatalf("%d retries for %d requests, bound %.1f", totalRetries, totalReqs, total)
			}
			// And the budget is used, not just respected: a storm of
			// requests earns close to its ratio.
			if tc.rps >= 100 && float64(totalRetries) < tc.limits.Ratio*float64(totalReqs)*0.9 {
				t.Fatalf("%d retries for %d requests: budget underused", totalRetries, totalReqs)
			}
			t.Logf("%d requests, %d retries (%.1f %%)", totalReqs, totalRetries, 100*float64(totalRetries)/float64(totalReqs))
		})
	}
}

// TestBudgetConcurrentNeverOverdraws withdraws from many goroutines at once
// at a frozen instant: exactly the balance may be granted, never more.
func TestBudgetConcurrentNeverOverdraws(t *testing.T) {
	clk := &fakeClock{}
	b := NewBudget(Limits{Ratio: 0.5, MinRetriesPerSecond: 1}, BudgetWindow(10*time.Second), BudgetClock(clk.now))
	for range 100 {
		b.Deposit()
	}
	want := 0.5*100 + 1*10
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 100 {
				if b.TryWithdraw() {
					granted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if g := granted.Load(); float64(g) > want {
		t.Fatalf("granted %d retries, balance was %v", g, want)
	}
	// Contention may refuse a few near the limit; what is left is still there.
	if g := granted.Load(); float64(g)+float64(b.Available()) != want {
		t.Fatalf("granted %d + available %d != %v", g, b.Available(), want)
	}
}

func TestBudgetSetLimits(t *testing.T) {
	b := NewBudget(DefaultLimits())
	b.SetLimits(Limits{Ratio: math.NaN(), MinRetriesPerSecond: -1})
	if l := b.Limits(); l != (Limits{}) {
		t.Fatalf("limits = %+v, want zero", l)
	}
	if b.TryWithdraw() {
		t.Fatal("a zero budget allowed a retry")
	}
	var nilBudget *Budget
	nilBudget.Deposit()
	if !nilBudget.TryWithdraw() {
		t.Fatal("a nil budget refused a retry")
	}
}

func BenchmarkBudgetDeposit(b *testing.B) {
	bu := NewBudget(DefaultLimits())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bu.Deposit()
		}
	})
}
