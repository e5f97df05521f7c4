// SPDX-License-Identifier: Apache-2.0

// Package soaktest is what the hooks' reliability tests share: whether the
// long forms run (make soak sets ERROROWNERSHIP_SOAK=1), the live heap, a
// check that it does not grow over rounds of work, the retry budget's bound
// and a report of the retry ratio against it, and a wait for goroutines to
// wind down.
//
// Each reliability test is named TestSoak… and runs a short form in CI and
// its long form (minutes) under make soak.
package soaktest

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errorownership/errorownership/hooks"
)

// Long reports whether the long forms run: ERROROWNERSHIP_SOAK is set, as
// make soak does.
func Long() bool { return os.Getenv("ERROROWNERSHIP_SOAK") != "" }

// Pick returns long under make soak, short otherwise; under the race
// detector (which slows everything tenfold and caps live goroutines at
// 8128) it returns race in the short form.
func Pick[T any](short, race, long T) T {
	switch {
	case Long():
		return long
	case Race:
		return race
	}
	return short
}

var liveHeap = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}

// LiveHeap returns the bytes of heap live after a full collection.
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC() // the second sweeps what finalizers of the first freed
	metrics.Read(liveHeap)
	return liveHeap[0].Value.Uint64()
}

// Heap records the live heap after each round of a test's work.
type Heap struct {
	samples []uint64
}

// Sample records the live heap now and returns it.
func (h *Heap) Sample() uint64 {
	v := LiveHeap()
	h.samples = append(h.samples, v)
	return v
}

// Check fails t if the live heap grew by more than bound from the first
// sample (taken after a warm-up round, so that pools, budgets and caches
// exist) to the median of the last three, or if it rose round after round
// over the last five or more samples by more than a quarter of bound in
// all: a steady leak below the bound. It logs the figures.
func (h *Heap) Check(t testing.TB, bound uint64) {
	t.Helper()
	n := len(h.samples)
	if n < 2 {
		t.Fatalf("heap: %d samples, want 2 or more", n)
	}
	first := h.samples[0]
	tail := slices.Clone(h.samples[max(1, n-3):])
	slices.Sort(tail)
	last := tail[len(tail)/2]
	var kb []string
	for _, s := range h.samples {
		kb = append(kb, fmt.Sprint(s>>10))
	}
	t.Logf("live heap by round (KiB): %s; first %d KiB, last (median of 3) %d KiB, growth %+d KiB (bound %d KiB)",
		strings.Join(kb, " "), first>>10, last>>10, (int64(last)-int64(first))>>10, bound>>10)
	if last > first+bound {
		t.Errorf("live heap grew from %d KiB to %d KiB over %d rounds, bound %d KiB", first>>10, last>>10, n, bound>>10)
	}
	if n >= 5 {
		from := max(0, n-6)
		rising := true
		for i := from + 1; i < n; i++ {
			rising = rising && h.samples[i] > h.samples[i-1]
		}
		if rise := int64(h.samples[n-1]) - int64(h.samples[from]); rising && rise > int64(bound/4) {
			t.Errorf("live heap rose in each of the last %d rounds, by %d KiB in all: a leak", n-1-from, rise>>10)
		}
	}
}

// Retries counts a client's logical calls (each a first attempt, a
// deposit in its budget) and the retries it made.
type Retries struct {
	Calls, Retries int64
}

// Bound is the most retries a Budget with limits l may grant to calls
// made over d: what the calls earn plus the floor over d and one window
// (a deposit counts for up to one window, and the reserve is whole at the
// start).
func Bound(l hooks.Limits, calls int64, d, window time.Duration) float64 {
	return l.Ratio*float64(calls) + l.MinRetriesPerSecond*(d+window).Seconds()
}

// Check logs the observed retry ratio against the configured budget and
// fails t if the retries exceed Bound.
func (r Retries) Check(t testing.TB, what string, l hooks.Limits, d, window time.Duration) {
	t.Helper()
	bound := Bound(l, r.Calls, d, window)
	ratio := 0.0
	if r.Calls > 0 {
		ratio = float64(r.Retries) / float64(r.Calls)
	}
	t.Logf("%s: %d calls, %d retries in %v: retry ratio %.4f; budget ratio %.4f + floor %.4g/s × (%v + window %v) = at most %.0f retries (%.4f)",
		what, r.Calls, r.Retries, d.Round(time.Millisecond), ratio, l.Ratio, l.MinRetriesPerSecond, d.Round(time.Millisecond), window, bound, bound/max(1, float64(r.Calls)))
	if float64(r.Retries) > bound {
		t.Errorf("%s: %d retries for %d calls over %v, over the budget's bound %.0f", what, r.Retries, r.Calls, d, bound)
	}
}

// Goroutines returns the number of goroutines now.
func Goroutines() int { return runtime.NumGoroutine() }

// Matching returns the number of goroutines whose stack mentions substr
// (a function, such as "net/http.(*persistConn).readLoop"), and their
// stacks.
func Matching(substr string) (int, string) {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var n int
	var b strings.Builder
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, substr) {
			n++
			b.WriteString(g)
			b.WriteString("\n\n")
		}
	}
	return n, b.String()
}

// WaitMatching waits up to timeout for the goroutines whose stack
// mentions substr to be at most n, and fails t with their stacks if they
// are not.
func WaitMatching(t testing.TB, substr string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, stacks := Matching(substr)
		if got <= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines in %s after %v, want at most %d:\n%s", got, substr, timeout, n, stacks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitGoroutines waits up to timeout for the goroutine count to fall to
// at most n, and fails t with the goroutines' stacks if it does not.
func WaitGoroutines(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := runtime.NumGoroutine()
		if got <= n {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines after %v, want at most %d:\n%s", got, timeout, n, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CheckAllocs calls hooked and bare, the same work with the hooks and
// without, n times each, and fails t when the hooks allocate more than
// 16 KiB a call beyond bare or the live heap grows by more than 4 MiB: what
// a peer sends must not cost the service memory. call names one call in
// the messages ("call", "request"), answers what the answers carry.
func CheckAllocs(t testing.TB, n uint64, hooked, bare func(), call, answers string) {
	t.Helper()
	perCall := func(f func()) uint64 {
		f()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			f()
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / n
	}
	heap0 := LiveHeap()
	withHooks, withoutHooks := perCall(hooked), perCall(bare)
	heap1 := LiveHeap()
	added := int64(withHooks) - int64(withoutHooks)
	t.Logf("bytes allocated per %s: %d with the hooks, %d without (+%d); live heap %d → %d KiB",
		call, withHooks, withoutHooks, added, heap0>>10, heap1>>10)
	if added > 16<<10 {
		t.Errorf("the hooks allocate %d bytes per %s whose answers carry %s", added, call, answers)
	}
	if heap1 > heap0+4<<20 {
		t.Errorf("live heap grew from %d to %d KiB over %d %ss with %s", heap0>>10, heap1>>10, 2*n, call, answers)
	}
}

// Attempts counts, at a callee, the calls (first attempts) and the retries
// it served. Safe for concurrent use.
type Attempts struct{ calls, retries atomic.Int64 }

// Count counts one attempt, a retry or a first one, and returns retry.
func (a *Attempts) Count(retry bool) bool {
	if retry {
		a.retries.Add(1)
	} else {
		a.calls.Add(1)
	}
	return retry
}

// Snapshot returns the counts so far.
func (a *Attempts) Snapshot() Retries {
	return Retries{Calls: a.calls.Load(), Retries: a.retries.Load()}
}
