// SPDX-License-Identifier: Apache-2.0

package hooks

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/errorownership/errorownership/ownership"
)

// DefaultBudgetWindow is how long a deposit counts (Finagle's TTL).
const DefaultBudgetWindow = 10 * time.Second

// budgetSlices is how many slices the window is cut into: deposits expire a
// slice at a time, so the window slides in steps of window/budgetSlices.
const budgetSlices = 10

// Limits are a Budget's parameters: Ratio, the retries each request earns
// (0.1 allows one retry per ten requests made in the window), and
// MinRetriesPerSecond, the floor of retries per second of window allowed on
// top. They are the retry budget the ownership hints announce.
type Limits = ownership.RetryBudget

// DefaultLimits returns the default budget, ownership.DefaultRetryBudget.
func DefaultLimits() Limits { return ownership.DefaultRetryBudget() }

// A Budget bounds retries to a share of requests over a sliding window, in
// the manner of Finagle's RetryBudget (a token bucket whose deposits expire)
// and gRPC's retry throttling: each request deposits (Deposit), each retry
// withdraws (TryWithdraw), and a retry is allowed only while, counting the
// deposits and withdrawals of the last window,
//
//	retries ≤ Ratio × requests + MinRetriesPerSecond × window
//
// still holds with it. So under 100 % failure a client adds at most Ratio
// more load, plus a constant floor, and after an outage ends the budget
// refills as the old withdrawals expire.
//
// The window is cut into ten slices; a deposit or withdrawal counts from the
// moment it is made until its slice is ten slices old, i.e. for between 0.9
// and 1.0 window. The floor is a reserve of MinRetriesPerSecond × window retries per
// window (100 for the defaults), always available, renewed as withdrawals
// expire; it is per Budget, i.e. per peer and per client process.
//
// A Budget is lock-free: counters are packed with their slice number in one
// atomic word each. TryWithdraw takes its token first and then checks the
// balance, giving it back if overdrawn, so concurrent withdrawals can be
// refused near the limit but never overdraw it. A nil *Budget allows every
// retry.
type Budget struct {
	ratio  atomic.Uint64 // float64 bits
	floor  atomic.Uint64 // float64 bits
	slice  time.Duration
	window float64 // seconds
	start  time.Time
	now    func() time.Time

	slots [budgetSlices]budgetSlot
}

// budgetSlot holds one slice's counts, each as slice number << 32 | count.
type budgetSlot struct {
	deposits    atomic.Uint64
	withdrawals atomic.Uint64
}

// BudgetOption configures NewBudget.
type BudgetOption func(*Budget)

// BudgetWindow sets how long a deposit counts; the default is
// DefaultBudgetWindow. Windows under 10 ms are raised to 10 ms.
func BudgetWindow(d time.Duration) BudgetOption {
	return func(b *Budget) { b.slice = max(d, 10*time.Millisecond) / budgetSlices }
}

// BudgetClock makes the Budget read time from now, for deterministic tests.
func BudgetClock(now func() time.Time) BudgetOption {
	return func(b *Budget) { b.now = now }
}

// NewBudget returns a Budget with limits l.
func NewBudget(l Limits, opts ...BudgetOption) *Budget {
	b := &Budget{slice: DefaultBudgetWindow / budgetSlices}
	for _, o := range opts {
		o(b)
	}
	b.window = (b.slice * budgetSlices).Seconds()
	if b.now == nil {
		b.start = time.Now()
	} else {
		b.start = b.now()
	}
	b.SetLimits(l)
	return b
}

// SetLimits changes the Budget's limits; counts already made stay. Negative
// or NaN values are taken as 0.
func (b *Budget) SetLimits(l Limits) {
	b.ratio.Store(math.Float64bits(nonNegative(l.Ratio)))
	b.floor.Store(math.Float64bits(nonNegative(l.MinRetriesPerSecond)))
}

// Limits returns the Budget's current limits.
func (b *Budget) Limits() Limits {
	return Limits{
		Ratio:               math.Float64frombits(b.ratio.Load()),
		MinRetriesPerSecond: math.Float64frombits(b.floor.Load()),
	}
}

// Window returns how long a deposit counts.
func (b *Budget) Window() time.Duration { return b.slice * budgetSlices }

// Deposit records one request (a logical call's first attempt, not a retry).
func (b *Budget) Deposit() {
	if b == nil {
		return
	}
	e := b.epoch()
	bump(&b.slots[e%budgetSlices].deposits, e)
}

// TryWithdraw takes one retry from the Budget and reports whether it was
// allowed.
func (b *Budget) TryWithdraw() bool {
	if b == nil {
		return true
	}
	e := b.epoch()
	w := &b.slots[e%budgetSlices].withdrawals
	bump(w, e)
	if b.balance(e) >= 0 {
		return true
	}
	unbump(w, e)
	return false
}

// Available returns how many retries the Budget would allow now.
func (b *Budget) Available() int {
	if b == nil {
		return math.MaxInt
	}
	return int(math.Floor(b.balance(b.epoch())))
}

// balance is what is left in the window ending with slice e: what requests
// earned plus the reserve, less what retries took. The small slack absorbs
// float rounding, so that 0.1 × 30 requests do earn 3 retries.
func (b *Budget) balance(e uint32) float64 {
	var deposits, withdrawals uint64
	for i := range b.slots {
		s := &b.slots[i]
		deposits += count(s.deposits.Load(), e)
		withdrawals += count(s.withdrawals.Load(), e)
	}
	ratio := math.Float64frombits(b.ratio.Load())
	floor := math.Float64frombits(b.floor.Load())
	return ratio*float64(deposits) + floor*b.window - float64(withdrawals) + 1e-9
}

// epoch is the number of the slice now falls in. 32 bits of slices last 13
// years at the smallest window.
func (b *Budget) epoch() uint32 {
	var d time.Duration
	if b.now == nil {
		d = time.Since(b.start)
	} else {
		d = b.now().Sub(b.start)
	}
	if d < 0 {
		return 0
	}
	return uint32(d / b.slice)
}

// count returns the count in word v if its slice is within the window that
// ends with slice e.
func count(v uint64, e uint32) uint64 {
	if e-uint32(v>>32) >= budgetSlices {
		return 0
	}
	return v & math.MaxUint32
}

// bump adds one to the count in a for slice e, starting the count afresh if
// the word still holds an expired slice.
func bump(a *atomic.Uint64, e uint32) {
	for {
		old := a.Load()
		var next uint64
		switch {
		case uint32(old>>32) != e:
			next = uint64(e)<<32 | 1
		case uint32(old) == math.MaxUint32:
			return // saturated: only an absurd rate gets here
		default:
			next = old + 1
		}
		if a.CompareAndSwap(old, next) {
			return
		}
	}
}

// unbump takes back one from the count in a, if it still belongs to slice e
// (if it does not, the count expired and there is nothing to take back).
func unbump(a *atomic.Uint64, e uint32) {
	for {
		old := a.Load()
		if uint32(old>>32) != e || uint32(old) == 0 {
			return
		}
		if a.CompareAndSwap(old, old-1) {
			return
		}
	}
}

func nonNegative(f float64) float64 {
	if !(f > 0) { // also NaN
		return 0
	}
	return f
}
