// SPDX-License-Identifier: Apache-2.0

package retrying

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/errorownership/errorownership/hooks"
)

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	for n, ceil := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 30: time.Second} {
		for range 100 {
			if d := b.Delay(n); d < ceil/2 || d > ceil {
				t.Fatalf("Delay(%d) = %v, want in [%v, %v]", n, d, ceil/2, ceil)
			}
		}
	}
	if d := (Backoff{}).Delay(1); d != 0 {
		t.Fatalf("zero backoff delays %v", d)
	}
}

func TestFitsAndSleep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if Fits(ctx, time.Second) || !Fits(ctx, time.Millisecond) || !Fits(context.Background(), time.Hour) {
		t.Fatal("Fits misjudges the deadline")
	}
	start := time.Now()
	if err := Sleep(ctx, time.Minute); err == nil || time.Since(start) > time.Second {
		t.Fatal("Sleep outlived its context")
	}
}

func TestBudgetsPerPeer(t *testing.T) {
	var bs Budgets
	a, b := bs.For("a"), bs.For("b")
	if a == b || bs.For("a") != a {
		t.Fatal("budgets are not per peer")
	}
	for i := range maxPeers + 10 {
		bs.For(fmt.Sprint("peer", i))
	}
	if x, y := bs.For("new1"), bs.For("new2"); x != y {
		t.Fatal("past maxPeers, new peers should share the overflow budget")
	}
	shared := hooks.NewBudget(hooks.Limits{})
	if (&Budgets{Shared: shared}).For("a") != shared {
		t.Fatal("Shared ignored")
	}
}
