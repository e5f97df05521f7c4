// SPDX-License-Identifier: Apache-2.0

// Package retrying holds what the HTTP and gRPC client hooks share: per-peer
// budgets, jittered backoff, and sleeping within a deadline.
package retrying

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errorownership/errorownership/hooks"
)

// Defaults shared by the client hooks.
const (
	// DefaultMaxAttempts is the first attempt and two retries.
	DefaultMaxAttempts = 3
	// DefaultInitialBackoff is the ceiling of the first retry's delay.
	DefaultInitialBackoff = 50 * time.Millisecond
	// DefaultMaxBackoff caps the delay of later retries.
	DefaultMaxBackoff = time.Second
)

// maxPeers bounds the budget table: past it, new peers share one budget, so
// a client that talks to unboundedly many hosts cannot grow it forever.
const maxPeers = 256

// Budgets hands out one hooks.Budget per peer service, as gRPC throttles
// per channel and Finagle budgets per client: one failing dependency must
// not use up the retries of another. The zero value is ready to use.
type Budgets struct {
	// Shared, if set, is used for every peer instead.
	Shared *hooks.Budget
	// Hints, if set, supplies the limits of the per-peer budgets.
	Hints hooks.HintSource

	peers    atomic.Pointer[map[string]*hooks.Budget]
	mu       sync.Mutex
	overflow *hooks.Budget
}

// For returns the budget for peer. The common case is one atomic load and
// a map read: the table is copied on write, which happens once per peer.
func (bs *Budgets) For(peer string) *hooks.Budget {
	if bs.Shared != nil {
		return bs.Shared
	}
	if m := bs.peers.Load(); m != nil {
		if b, ok := (*m)[peer]; ok {
			return b
		}
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	old := bs.peers.Load()
	if old != nil {
		if b, ok := (*old)[peer]; ok {
			return b
		}
		if len(*old) >= maxPeers {
			if bs.overflow == nil {
				bs.overflow = hooks.NewBudget(bs.limits())
			}
			return bs.overflow
		}
	}
	m := make(map[string]*hooks.Budget, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	b := hooks.NewBudget(bs.limits())
	m[peer] = b
	bs.peers.Store(&m)
	return b
}

// Refresh brings b's limits up to date with the hints. The client hooks call
// it on the failure path only, just before a retry decision, so a hints
// change costs the success path nothing. A shared budget keeps the limits
// its owner gave it.
func (bs *Budgets) Refresh(b *hooks.Budget) {
	if bs.Hints != nil && b != bs.Shared {
		if l := bs.Hints.BudgetLimits(); l != b.Limits() {
			b.SetLimits(l)
		}
	}
}

func (bs *Budgets) limits() hooks.Limits {
	if bs.Hints != nil {
		return bs.Hints.BudgetLimits()
	}
	return hooks.DefaultLimits()
}

func lenOf(m *map[string]*hooks.Budget) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// Settings are the retry settings the HTTP and gRPC hooks share; each
// package's config embeds them and its options set them.
type Settings struct {
	// Hints gives edge modes and budget limits; nil means safe defaults.
	Hints hooks.HintSource
	// Budget, when set, is shared by every peer instead of one per peer.
	Budget *hooks.Budget
	// MaxAttempts per call, the first included.
	MaxAttempts int
	Backoff     Backoff
}

// DefaultSettings returns the defaults: DefaultMaxAttempts and the default
// backoff.
func DefaultSettings() Settings {
	return Settings{
		MaxAttempts: DefaultMaxAttempts,
		Backoff:     Backoff{Initial: DefaultInitialBackoff, Max: DefaultMaxBackoff},
	}
}

// NewBudgets returns the per-peer budgets these settings call for.
func (s *Settings) NewBudgets() Budgets { return Budgets{Shared: s.Budget, Hints: s.Hints} }

// Backoff is jittered exponential backoff: retry n (1 for the first) waits
// a uniformly random time in [d/2, d] where d = min(Max, Initial × 2^(n−1)).
// Half the delay is jitter, so retries of many clients spread out, and the
// other half keeps a retry from following its failure at once.
type Backoff struct {
	Initial, Max time.Duration
}

// Delay returns the wait before retry n.
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + rand.N(d-half+1) //nolint:gosec // G404: jitter spreads retries out; it needs no unpredictability
}

// Fits reports whether waiting d still leaves time before ctx's deadline:
// a retry that cannot start before the caller gives up is not made.
func Fits(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > d
}

// Sleep waits d or until ctx ends, and returns ctx's error in that case.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
