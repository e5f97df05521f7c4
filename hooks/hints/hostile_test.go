// SPDX-License-Identifier: Apache-2.0

package hints

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
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

// hostile is a hints server that answers as the test says. An answer
// that stalls gives up when its client goes or the test ends.
type hostile struct {
	srv      *httptest.Server
	requests atomic.Int32
	inm      atomic.Value // the last If-None-Match
	stop     chan struct{}
	mu       sync.Mutex
	answer   http.HandlerFunc
}

func newHostile(t *testing.T) *hostile {
	h := &hostile{stop: make(chan struct{}), answer: good}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		h.inm.Store(r.Header.Get("If-None-Match"))
		h.mu.Lock()
		f := h.answer
		h.mu.Unlock()
		f(w, r.WithContext(context.WithValue(r.Context(), stopKey{}, h.stop)))
	}))
	t.Cleanup(func() {
		close(h.stop)
		h.srv.CloseClientConnections()
		h.srv.Close()
	})
	return h
}

func (h *hostile) set(f http.HandlerFunc) {
	h.mu.Lock()
	h.answer = f
	h.mu.Unlock()
}

type stopKey struct{}

// stall waits d, or until the client goes or the test ends.
func stall(r *http.Request, d time.Duration) {
	select {
	case <-r.Context().Done():
	case <-r.Context().Value(stopKey{}).(chan struct{}):
	case <-time.After(d):
	}
}

func good(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, sample) }

func body(s string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, s) }
}

// hintsWith is a document for checkout with the given fields.
func hintsWith(fields string) http.HandlerFunc {
	return body(`{"version":1,"service":"checkout",` + fields + `,"edges":[]}`)
}

// streamed answers 200 with n bytes of s over and over, with or without
// a Content-Length.
func streamed(s string, n int, declared bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if declared {
			w.Header().Set("Content-Length", fmt.Sprint(n))
		}
		chunk := []byte(strings.Repeat(s, 32<<10/len(s)))
		for sent := 0; sent < n; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
}

// hostileAnswers are what a hints server that is slow or broken can
// answer. Each must leave the last good hints in place.
var hostileAnswers = []struct {
	name   string
	answer http.HandlerFunc
}{
	{"500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) }},
	{"503 with Retry-After: 0", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "0")
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}},
	{"404", http.NotFound},
	{"304 to a request without If-None-Match", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotModified) }},
	{"not JSON", body("<html>oops</html>")},
	{"empty", body("")},
	{"null", body("null")},
	{"a JSON string", body(`"hints"`)},
	{"truncated", body(sample[:len(sample)/2])},
	{"100,000 brackets deep", body(strings.Repeat("[", 100000))},
	{"invalid UTF-8", body("{\"version\":1,\"service\":\"\xff\xfe\",\"edges\":[]}")},
	{"wrong version", body(`{"version":2,"service":"checkout","edges":[]}`)},
	{"no version", body(`{"service":"checkout","edges":[]}`)},
	{"a huge version", body(`{"version":1e999,"service":"checkout","edges":[]}`)},
	{"another service", body(`{"version":1,"service":"payments","edges":[]}`)},
	{"a negative ttl", hintsWith(`"ttl_seconds":-30`)},
	{"a ttl over int64", hintsWith(`"ttl_seconds":99999999999999999999`)},
	{"a fractional ttl", hintsWith(`"ttl_seconds":0.5`)},
	{"a ratio over 1", hintsWith(`"retry_budget":{"ratio":5,"min_retries_per_second":10}`)},
	{"a negative ratio", hintsWith(`"retry_budget":{"ratio":-0.1,"min_retries_per_second":10}`)},
	{"a ratio of 1e308", hintsWith(`"retry_budget":{"ratio":1e308,"min_retries_per_second":10}`)},
	{"a negative floor", hintsWith(`"retry_budget":{"ratio":0.1,"min_retries_per_second":-1}`)},
	{"a floor of 1e308", hintsWith(`"retry_budget":{"ratio":0.1,"min_retries_per_second":1e308}`)},
	{"a floor of a million retries a second", hintsWith(`"retry_budget":{"ratio":0.1,"min_retries_per_second":1e6}`)},
	{"a budget of strings", hintsWith(`"retry_budget":{"ratio":"all","min_retries_per_second":"many"}`)},
	{"edges as an object", body(`{"version":1,"service":"checkout","edges":{"a":1}}`)},
	{"a 2 MiB document", streamed(" ", 2<<20, true)},
	{"64 MiB, undeclared", streamed("[", 64<<20, false)},
	{"64 MiB, declared", streamed("{", 64<<20, true)},
	{"a dropped connection", func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}},
	{"a redirect loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, r.URL.String(), http.StatusFound) }},
	{"headers after 10 s", func(w http.ResponseWriter, r *http.Request) {
		stall(r, 10*time.Second)
		good(w, r)
	}},
	{"a body that trickles", func(w http.ResponseWriter, r *http.Request) {
		for i := range len(sample) {
			if _, err := io.WriteString(w, sample[i:i+1]); err != nil {
				return
			}
			http.NewResponseController(w).Flush()
			stall(r, 50*time.Millisecond)
			if r.Context().Err() != nil {
				return
			}
		}
	}},
	{"a body that never ends", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.WriteString(w, sample[:10]); err != nil {
			return
		}
		http.NewResponseController(w).Flush()
		stall(r, 10*time.Second)
	}},
}

// testFetchTimeout stands in for the client's fetch timeout: long enough
// that a question which waited on a fetch that runs into it (answered
// after testFetchTimeout/2) cannot pass for a loaded machine's pause.
const testFetchTimeout = time.Second

// TestHostileHintsServer turns a hints server bad after one good answer,
// in every way it can, and checks that the client keeps the last good
// hints, backs off (1 s, then 2 s), reads at most a bounded body, gives
// up a fetch after its timeout even with an http.Client that has none,
// and that the hooks' questions (Mode, BudgetLimits) are answered at once
// while a fetch hangs.
func TestHostileHintsServer(t *testing.T) {
	for _, tc := range hostileAnswers {
		t.Run(tc.name, func(t *testing.T) {
			srv := newHostile(t)
			// An http.Client without a timeout: the client's own bound
			// must hold.
			c := New(srv.srv.URL, "checkout", WithHTTPClient(&http.Client{}))
			c.timeout = testFetchTimeout
			if _, err := c.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			srv.set(tc.answer)

			// Ask the hooks' questions while the fetch runs.
			stop := make(chan struct{})
			var slowest atomic.Int64
			var asked sync.WaitGroup
			asked.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					_ = c.Mode("POST /checkout", "recommendations", "")
					_ = c.BudgetLimits()
					if d := int64(time.Since(start)); d > slowest.Load() {
						slowest.Store(d)
					}
					runtime.Gosched()
				}
			})

			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			next, err := c.Refresh(context.Background())
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			close(stop)
			asked.Wait()

			if err == nil {
				t.Fatal("accepted")
			}
			t.Logf("refused in %v: %v", took.Round(time.Millisecond), trim(err.Error()))
			if next != time.Second {
				t.Errorf("next fetch after %v, want 1s", next)
			}
			if took > testFetchTimeout+time.Second {
				t.Errorf("the fetch took %v, timeout %v", took, testFetchTimeout)
			}
			if d := time.Duration(slowest.Load()); d > testFetchTimeout/2 {
				t.Errorf("a question to the hints waited %v during the fetch", d)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
				t.Errorf("the fetch allocated %d MiB", alloc>>20)
			}
			if got := c.Mode("POST /checkout", "recommendations", ""); got != ownership.ModeFailOpen {
				t.Errorf("last good hints lost: %v", got)
			}
			if l := c.BudgetLimits(); l != (hooks.Limits{Ratio: 0.2, MinRetriesPerSecond: 5}) {
				t.Errorf("last good budget lost: %+v", l)
			}
			if next, _ := c.Refresh(context.Background()); next != 2*time.Second {
				t.Errorf("second fetch after %v, want 2s", next)
			}
		})
	}
}

func trim(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}

// TestHostileHintsBackoff: consecutive failures back off 1 s, 2 s, 4 s …
// up to a minute, and a good answer ends the backoff; Run against a
// server that always fails does not spin.
func TestHostileHintsBackoff(t *testing.T) {
	srv := newHostile(t)
	srv.set(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusInternalServerError) })
	c := New(srv.srv.URL, "checkout")
	var got []time.Duration
	for range 9 {
		next, err := c.Refresh(context.Background())
		if err == nil {
			t.Fatal("accepted a 500")
		}
		got = append(got, next)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("backoff %v, want %v seconds", got, want)
		}
	}
	srv.set(good)
	if next, err := c.Refresh(context.Background()); err != nil || next != 30*time.Second {
		t.Fatalf("after recovery: next %v, err %v; want the ttl, 30s", next, err)
	}

	srv.set(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusInternalServerError) })
	before := srv.requests.Load()
	ctx, cancel := context.WithCancel(context.Background())
	Start(ctx, srv.srv.URL, "checkout")
	time.Sleep(1500 * time.Millisecond)
	cancel()
	// At 0 s and 1 s; the next is due at 3 s.
	if n := srv.requests.Load() - before; n > 2 {
		t.Errorf("%d fetches in 1.5 s from a failing server, want at most 2", n)
	}
}

// TestHostileHintsServerDown: a hints server that was never reachable, or
// is gone for longer than the max staleness, gives the safe defaults.
func TestHostileHintsServerDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := New(url, "checkout")
	if _, err := c.Refresh(context.Background()); err == nil {
		t.Fatal("no error from a closed port")
	}
	if m, l := c.Mode("POST /checkout", "recommendations", ""), c.BudgetLimits(); m != ownership.ModeUnknown || l != hooks.DefaultLimits() {
		t.Fatalf("without hints: mode %v, limits %+v; want unknown, the defaults", m, l)
	}
}

// TestHostileHintsETag: an ETag of 1 MiB is neither kept nor sent back.
func TestHostileHintsETag(t *testing.T) {
	srv := newHostile(t)
	huge := `"` + strings.Repeat("e", 1<<20) + `"`
	srv.set(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", huge)
		good(w, r)
	})
	c := New(srv.srv.URL, "checkout")
	for range 2 {
		if _, err := c.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.etag) > maxETag {
		t.Errorf("kept an ETag of %d bytes", len(c.etag))
	}
	if inm := srv.inm.Load().(string); inm != "" {
		t.Errorf("sent back If-None-Match of %d bytes", len(inm))
	}
}

// TestHostileHintsTTL: absurd TTLs and max-ages poll within [1 s, 10 min],
// never faster because a huge value overflowed.
func TestHostileHintsTTL(t *testing.T) {
	for _, tc := range []struct {
		cacheControl string
		ttl          int
		want         time.Duration
	}{
		{"", math.MaxInt64, maxPoll},
		{"", math.MaxInt64 / 1000, maxPoll},
		{"", 9223372037, maxPoll}, // the first whole second over time.Duration's range
		{"", 1 << 40, maxPoll},
		{"", 0, DefaultTTL},
		{"max-age=9223372036854775807", 30, maxPoll},
		{"max-age=9223372037", 30, maxPoll},
		{"max-age=99999999999999999999", 30, 30 * time.Second},
		{"max-age=-5", 30, 30 * time.Second},
		{"max-age=0", 30, minPoll},
		{"max-age=" + strings.Repeat("9", 100000), 30, 30 * time.Second},
	} {
		h := &ownership.Hints{TTLSeconds: tc.ttl}
		hdr := http.Header{}
		if tc.cacheControl != "" {
			hdr.Set("Cache-Control", tc.cacheControl)
		}
		if got := pollAfter(hdr, h); got != tc.want {
			t.Errorf("Cache-Control %.40q, ttl_seconds %d: next poll after %v, want %v", tc.cacheControl, tc.ttl, got, tc.want)
		}
	}
}

// TestHostileHintsNoLeak: a client whose server hangs stops when its
// context ends, fetch and all, and leaves no goroutine behind.
func TestHostileHintsNoLeak(t *testing.T) {
	srv := newHostile(t)
	srv.set(func(_ http.ResponseWriter, r *http.Request) { stall(r, 10*time.Second) })
	ctx, cancel := context.WithCancel(context.Background())
	for range 10 {
		Start(ctx, srv.srv.URL, "checkout")
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.requests.Load() < 10 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n, _ := soaktest.Matching("hooks/hints.(*Client).Run"); n != 10 {
		t.Fatalf("%d clients running, want 10", n)
	}
	cancel()
	soaktest.WaitMatching(t, "hooks/hints.(*Client)", 0, 2*time.Second)
}

// TestHostileHintsDefaultTimeout: without options a fetch is bounded.
func TestHostileHintsDefaultTimeout(t *testing.T) {
	c := New("http://127.0.0.1:1", "checkout")
	if c.timeout <= 0 || c.timeout > 10*time.Second {
		t.Fatalf("fetch timeout %v", c.timeout)
	}
}

// hostileDocument is a valid 1 MiB document built to make Mode work hard:
// every edge is to the same peer, with route templates that match the
// questions asked only at their last segment.
func hostileDocument() string {
	var b strings.Builder
	b.WriteString(`{"version":1,"service":"checkout","ttl_seconds":30,"edges":[`)
	for i := 0; b.Len() < maxBody-300; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"operation":"GET /{a}/{b}/{c}/%d","peer_service":"p","peer_operation":"/{x}/{y}/{z}/%d","peer_addresses":["p:1","p:1"],"mode":"fail_open"}`, i, i)
	}
	b.WriteString("]}")
	return b.String()
}

// TestHostileHintsModeCost: a hints server can send a valid document of
// up to 1 MiB, every edge to one peer; the hooks ask Mode on the failure
// path of a request, so its cost is bounded, and it allocates nothing.
func TestHostileHintsModeCost(t *testing.T) {
	doc := hostileDocument()
	srv := newHostile(t)
	srv.set(body(doc))
	c := New(srv.srv.URL, "checkout")
	if _, err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	h, _ := c.Hints()
	ask := func() { _ = c.Mode("GET /a/b/c/d", "p:1", "GET /x/y/z/w") }
	// The fastest of 10 batches: what Mode costs, not what a loaded
	// machine adds to it.
	n := soaktest.Pick(20, 2, 200)
	ask()
	each := time.Duration(math.MaxInt64)
	for range 10 {
		start := time.Now()
		for range n {
			ask()
		}
		each = min(each, time.Since(start)/time.Duration(n))
	}
	allocs := testing.AllocsPerRun(5, ask)
	t.Logf("%d edges to one peer in %d KiB: Mode takes %v and %.0f allocations", len(h.Edges), len(doc)>>10, each, allocs)
	if allocs > 0 {
		t.Errorf("Mode allocates %.0f times", allocs)
	}
	// 15 ms and 58,000 allocations when Mode split every route template
	// it compared; 1–3 ms since. The allocations are the sure sign; the
	// time limit catches a cost that grows faster than the document.
	if limit := soaktest.Pick(20*time.Millisecond, 200*time.Millisecond, 20*time.Millisecond); each > limit {
		t.Errorf("Mode takes %v over a hostile document, limit %v", each, limit)
	}
}

// TestHostileHintsServiceNeverWaits: a service whose hints server hangs
// serves its requests at once, on the safe defaults, through the HTTP
// middleware and transport: no request waits on a fetch.
func TestHostileHintsServiceNeverWaits(t *testing.T) {
	srv := newHostile(t)
	srv.set(func(_ http.ResponseWriter, r *http.Request) { stall(r, 10*time.Second) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := Start(ctx, srv.srv.URL, "checkout", WithFetchTimeout(time.Hour), WithHTTPClient(&http.Client{}))

	callee := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	defer callee.Close()
	client := &http.Client{Transport: hookshttp.Transport(http.DefaultTransport, hookshttp.WithHints(h), hookshttp.WithBackoff(time.Millisecond, time.Millisecond))}
	service := httptest.NewServer(hookshttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, callee.URL, nil)
		res, err := client.Do(req)
		if err == nil {
			res.Body.Close()
		}
		http.Error(w, "callee failed", http.StatusBadGateway)
	}), hookshttp.WithHints(h)))
	defer service.Close()

	for srv.requests.Load() == 0 {
		time.Sleep(time.Millisecond) // the first fetch is under way, and hangs
	}
	var slowest time.Duration
	for range 50 {
		start := time.Now()
		res, err := http.Get(service.URL + "/checkout")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		slowest = max(slowest, time.Since(start))
		if res.StatusCode != http.StatusBadGateway || res.Header.Get(ownership.HTTPClaimHeader) != "unclaimed" {
			t.Fatalf("answered %d, claim %q", res.StatusCode, res.Header.Get(ownership.HTTPClaimHeader))
		}
	}
	// The fetch never ends: a question that waited on it would not return.
	if m, l := h.Mode("GET /checkout", "recommendations", ""), h.BudgetLimits(); m != ownership.ModeUnknown || l != hooks.DefaultLimits() {
		t.Errorf("while the first fetch hangs: mode %v, limits %+v; want the safe defaults", m, l)
	}
	t.Logf("50 requests while the hints fetch hangs: slowest %v", slowest)
	if slowest > soaktest.Pick(time.Second, 5*time.Second, time.Second) {
		t.Errorf("a request took %v while the hints fetch hung", slowest)
	}
	if _, ok := h.Hints(); ok {
		t.Error("hints from a server that never answered")
	}
}
