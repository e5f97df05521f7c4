// SPDX-License-Identifier: Apache-2.0

package hookshttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hookshttp"
	"github.com/errorownership/errorownership/hooks/internal/soaktest"
	"github.com/errorownership/errorownership/ownership"
)

// staticHints is a HintSource that knows no edges and gives fixed limits.
type staticHints struct{ limits hooks.Limits }

func (staticHints) Mode(string, string, string) ownership.Mode { return ownership.ModeUnknown }
func (s staticHints) BudgetLimits() hooks.Limits               { return s.limits }

// isRetry reports whether the request is a retry: it carries Retry-Attempt.
func isRetry(r *http.Request) bool { return r.Header.Get(ownership.HTTPRetryAttemptHeader) != "" }

// TestSoakRetryBudget runs callers against a callee that fails every
// request, claiming it, for a while in real time over real HTTP, through
// the transport's own per-peer budget (limits from the hints): the
// retries stay within ratio × calls + floor × (duration + window), and
// the budget is used, not merely respected. Short form 3 s; make soak,
// 3 minutes.
func TestSoakRetryBudget(t *testing.T) {
	duration := soaktest.Pick(3*time.Second, 3*time.Second, 3*time.Minute)
	workers := soaktest.Pick(32, 16, 64)
	limits := hooks.Limits{Ratio: 0.1, MinRetriesPerSecond: 1}

	var counter soaktest.Attempts
	callee := httptest.NewServer(hookshttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		counter.Count(isRetry(r))
		http.Error(w, "down", http.StatusInternalServerError)
	})))
	defer callee.Close()
	base := &http.Transport{MaxIdleConnsPerHost: workers}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: hookshttp.Transport(base,
		hookshttp.WithHints(staticHints{limits}), hookshttp.WithBackoff(time.Millisecond, 4*time.Millisecond))}

	// The callee's counts every window, for the report.
	start := time.Now()
	var snapshots []soaktest.Retries
	done := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Go(func() {
		tick := time.NewTicker(hooks.DefaultBudgetWindow)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				snapshots = append(snapshots, counter.Snapshot())
			}
		}
	})
	var wg sync.WaitGroup
	var failures atomic.Int64
	for range workers {
		wg.Go(func() {
			for time.Since(start) < duration {
				res, err := client.Get(callee.URL + "/work")
				if err != nil {
					failures.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusInternalServerError {
					failures.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := failures.Load(); n > 0 {
		t.Errorf("%d calls failed otherwise than with the callee's 500", n)
	}
	got := counter.Snapshot()
	got.Check(t, "HTTP, 100 % failures, per-peer budget", limits, elapsed, hooks.DefaultBudgetWindow)
	if float64(got.Retries) < 0.5*limits.Ratio*float64(got.Calls) {
		t.Errorf("%d retries for %d calls: the budget was not used", got.Retries, got.Calls)
	}
	close(done)
	sampled.Wait()
	if len(snapshots) > 0 {
		var b strings.Builder
		var prev soaktest.Retries
		for _, s := range snapshots {
			fmt.Fprintf(&b, " %.3f", float64(s.Retries-prev.Retries)/float64(max(1, s.Calls-prev.Calls)))
			prev = s
		}
		t.Logf("retry ratio window by window (%v each):%s", hooks.DefaultBudgetWindow, b.String())
	}
}

// failingRT is an in-process callee that fails every attempt, claiming
// it, and notes each attempt at the simulated time.
type failingRT struct {
	now    func() time.Duration
	slice  time.Duration
	calls  []int // by slice
	retrys []int
}

func (f *failingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	s := int(f.now() / f.slice)
	for len(f.calls) <= s {
		f.calls = append(f.calls, 0)
		f.retrys = append(f.retrys, 0)
	}
	if r.Header.Get(ownership.HTTPRetryAttemptHeader) != "" {
		f.retrys[s]++
	} else {
		f.calls[s]++
	}
	return &http.Response{StatusCode: http.StatusInternalServerError, Header: http.Header{ownership.HTTPClaimHeader: {"claimed"}},
		Body: http.NoBody, Request: r}, nil
}

// TestSoakRetryBudgetClock is the budget under 100 % failures through the
// transport over simulated time (hooks.BudgetClock): 10 minutes in the
// short form, 6 hours under make soak, at a rate that swings between
// bursts, a steady load and lulls, each call allowed two retries. Not only
// over the whole run but in every window that ends with a retry, the
// retries stay within ratio × calls + floor × window, exactly as the
// budget promises. (A window that ends in a lull after a burst may hold
// more: its retries were earned by calls of the burst, in the window that
// was current when they were made.)
func TestSoakRetryBudgetClock(t *testing.T) {
	simulated := soaktest.Pick(10*time.Minute, 10*time.Minute, 6*time.Hour)
	// The race detector runs a tenth of the calls: the rates are divided.
	div := soaktest.Pick(1, 10, 1)
	const window = 10 * time.Second
	slice := window / 10
	for _, limits := range []hooks.Limits{hooks.DefaultLimits(), {Ratio: 0.2, MinRetriesPerSecond: 0.5}, {Ratio: 0.05}} {
		t.Run(fmt.Sprintf("ratio %v floor %v", limits.Ratio, limits.MinRetriesPerSecond), func(t *testing.T) {
			var at time.Duration
			epoch := time.Unix(1_800_000_000, 0)
			budget := hooks.NewBudget(limits, hooks.BudgetWindow(window), hooks.BudgetClock(func() time.Time { return epoch.Add(at) }))
			callee := &failingRT{now: func() time.Duration { return at }, slice: slice}
			rt := hookshttp.Transport(callee, hookshttp.WithBudget(budget), hookshttp.WithMaxAttempts(3), hookshttp.WithBackoff(0, 0))
			req, _ := http.NewRequest(http.MethodGet, "http://callee/work", nil)
			// Calls per second: a cycle of a burst, a steady load and a lull.
			rate := func(at time.Duration) int {
				switch phase := at % (5 * time.Minute); {
				case phase < time.Minute:
					return 2000 / div
				case phase < 4*time.Minute:
					return 200 / div
				}
				return 2
			}
			for at < simulated {
				res, err := rt.RoundTrip(req)
				if err != nil || res.StatusCode != http.StatusInternalServerError {
					t.Fatalf("status %v, error %v", res, err)
				}
				at += time.Second / time.Duration(rate(at))
			}
			var total soaktest.Retries
			var worst float64
			for s := range callee.calls {
				var calls, retries int
				for i := max(0, s-9); i <= s; i++ {
					calls += callee.calls[i]
					retries += callee.retrys[i]
				}
				bound := limits.Ratio*float64(calls) + limits.MinRetriesPerSecond*window.Seconds()
				if callee.retrys[s] > 0 {
					if float64(retries) > bound+1e-9 {
						t.Fatalf("window ending at %v: %d retries for %d calls, bound %.1f", time.Duration(s+1)*slice, retries, calls, bound)
					}
					worst = max(worst, float64(retries)/float64(calls))
				}
				total.Calls += int64(callee.calls[s])
				total.Retries += int64(callee.retrys[s])
			}
			total.Check(t, fmt.Sprintf("simulated %v", simulated), limits, simulated, window)
			t.Logf("worst window ending with a retry: retry ratio %.4f (the floor dominates in lulls)", worst)
		})
	}
}

// soakCallee is C of the concurrency soak: by the request's id it always
// fails (id % 10 == 0), fails the first attempt only (id % 10 == 1), or
// answers "c<id>".
func soakCallee(counter *soaktest.Attempts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		retry := counter.Count(isRetry(r))
		id, err := strconv.Atoi(r.URL.Query().Get("id"))
		if err != nil {
			http.Error(w, "no id", http.StatusBadRequest)
			return
		}
		switch {
		case id%10 == 0:
			http.Error(w, "C fails", http.StatusInternalServerError)
		case id%10 == 1 && !retry:
			http.Error(w, "C flakes", http.StatusServiceUnavailable)
		default:
			_, _ = io.WriteString(w, "c"+strconv.Itoa(id))
		}
	})
}

// soakMiddle is B: it calls C with the same id and relays the answer.
func soakMiddle(client *http.Client, c string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, c+"/work?id="+id, nil) //nolint:gosec // G704: c is the soak's own loopback callee
		res, err := client.Do(req)                                                               //nolint:gosec // G704: the request goes to the soak's own loopback callee
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			http.Error(w, "C failed", http.StatusBadGateway)
			return
		}
		_, _ = io.WriteString(w, "b"+string(body))
	})
}

// soakTally is what the root client saw, by kind of request.
type soakTally struct {
	ok, failOK, flakyOK, flakyFailed, wrong atomic.Int64
	firstWrong                              atomic.Value
}

func (s *soakTally) wrongf(format string, args ...any) {
	if s.wrong.Add(1) == 1 {
		s.firstWrong.Store(fmt.Sprintf(format, args...))
	}
}

// TestSoakConcurrentHTTP sends rounds of thousands of concurrent requests
// from a plain client through B (the middleware and the transport) to C
// (the middleware), real servers on 127.0.0.1, where C always fails a
// tenth of the requests, fails the first attempt of another tenth, and
// answers the rest. Every answer must be what C's behaviour calls for:
// the rest answered, the failures failed with one clean claim (unclaimed:
// B propagated C's failure), the flaky ones answered unless the budget
// held their retry back; none failed because of the hooks. The retries
// stay within B's budget, the live heap stays flat from round to round,
// and nothing is left running at the end. Short form 5 rounds of 2000
// requests, 1000 at a time; make soak, 3 minutes of rounds of 20,000,
// 4000 at a time. After each round the clients close their idle
// connections and the test waits for every connection's goroutines to
// end, so that the heap it samples holds what the hooks keep, not how
// many connections the round happened to open.
func TestSoakConcurrentHTTP(t *testing.T) {
	rounds := soaktest.Pick(5, 4, 1<<30)
	perRound := soaktest.Pick(2000, 600, 20000)
	concurrency := soaktest.Pick(1000, 300, 4000)
	long := soaktest.Pick(time.Duration(0), 0, 3*time.Minute)
	limits := hooks.DefaultLimits()

	var counter soaktest.Attempts
	c := httptest.NewServer(hookshttp.Middleware(soakCallee(&counter)))
	bBase := &http.Transport{MaxIdleConnsPerHost: concurrency}
	bClient := &http.Client{Transport: hookshttp.Transport(bBase, hookshttp.WithHints(staticHints{limits}),
		hookshttp.WithBackoff(time.Millisecond, 4*time.Millisecond))}
	b := httptest.NewServer(hookshttp.Middleware(soakMiddle(bClient, c.URL), hookshttp.WithHints(staticHints{limits})))
	root := &http.Transport{MaxIdleConnsPerHost: concurrency}
	rootClient := &http.Client{Transport: root, Timeout: time.Minute}
	goroutines := soaktest.Goroutines() // the servers' included

	var tally soakTally
	var heap soaktest.Heap
	var next atomic.Int64
	round := func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, concurrency)
		for range perRound {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				id := next.Add(1)
				res, err := rootClient.Get(b.URL + "/checkout?id=" + strconv.FormatInt(id, 10))
				if err != nil {
					tally.wrongf("request %d: %v", id, err)
					return
				}
				body, err := io.ReadAll(res.Body)
				res.Body.Close()
				claims := res.Header.Values(ownership.HTTPClaimHeader)
				okBody := err == nil && res.StatusCode == http.StatusOK && string(body) == "bc"+strconv.FormatInt(id, 10) && len(claims) == 0
				failed := res.StatusCode == http.StatusBadGateway && len(claims) == 1 && claims[0] == "unclaimed"
				switch {
				case id%10 == 0 && failed:
					tally.failOK.Add(1)
				case id%10 == 1 && okBody:
					tally.flakyOK.Add(1)
				case id%10 == 1 && failed:
					tally.flakyFailed.Add(1)
				case id%10 > 1 && okBody:
					tally.ok.Add(1)
				default:
					tally.wrongf("request %d: %d %q, Error-Claim %q", id, res.StatusCode, body, claims)
				}
			})
		}
		wg.Wait()
	}

	settle := func() {
		root.CloseIdleConnections()
		bBase.CloseIdleConnections()
		soaktest.WaitGoroutines(t, goroutines+16, 10*time.Second)
		heap.Sample()
	}
	start := time.Now()
	round() // warm up: pools, budgets
	settle()
	n := 1
	for ; n < rounds && (long == 0 || time.Since(start) < long); n++ {
		round()
		settle()
	}
	elapsed := time.Since(start)
	total := int64(n * perRound)
	t.Logf("%d requests in %d rounds of %d, %d at a time, in %v (%.0f/s): %d answered, %d failing failed, %d flaky answered, %d flaky failed (budget), %d wrong",
		total, n, perRound, concurrency, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(),
		tally.ok.Load(), tally.failOK.Load(), tally.flakyOK.Load(), tally.flakyFailed.Load(), tally.wrong.Load())
	if w := tally.wrong.Load(); w > 0 {
		t.Errorf("%d requests answered otherwise than C's behaviour calls for; first: %v", w, tally.firstWrong.Load())
	}
	counter.Snapshot().Check(t, "HTTP B → C, 20 % failures", limits, elapsed, hooks.DefaultBudgetWindow)
	heap.Check(t, soaktest.Pick[uint64](4<<20, 4<<20, 8<<20))

	b.Close()
	c.Close()
	soaktest.WaitGoroutines(t, goroutines, 10*time.Second)
}
