// SPDX-License-Identifier: Apache-2.0

package hints

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/ownership"
)

const sample = `{"version":1,"service":"checkout","generated_at":"2026-11-29T16:00:00Z","ttl_seconds":30,
 "retry_budget":{"ratio":0.2,"min_retries_per_second":5},
 "edges":[
  {"operation":"POST /checkout","peer_service":"recommendations","peer_operation":"GET /recommendations","mode":"fail_open","confidence":0.95,"samples":175},
  {"operation":"POST /checkout","peer_service":"recommendations","peer_operation":"GET /recommendations/{id}","mode":"fail_open","confidence":0.9,"samples":80},
  {"operation":"POST /checkout","peer_service":"payments","peer_operation":"POST /charge","mode":"fail_close","confidence":0.99,"samples":300},
  {"operation":"POST /checkout","peer_service":"ads","peer_operation":"GET /ads","mode":"fail_open","confidence":0.9,"samples":50},
  {"operation":"POST /checkout","peer_service":"ads","peer_operation":"GET /ads/slow","mode":"unknown","confidence":0.4,"samples":8},
  {"operation":"GET /cart","peer_service":"recommendations","peer_operation":"GET /recommendations","mode":"fail_close","confidence":0.9,"samples":60},
  {"operation":"GET /cart","peer_service":"audit","peer_operation":"POST /log","mode":"fail_open","confidence":0.9,"samples":60}
 ]}`

// collector is a hints endpoint whose answer the test controls.
type collector struct {
	srv      *httptest.Server
	mu       sync.Mutex
	body     string
	etag     string
	header   http.Header
	status   int
	requests atomic.Int32
	lastINM  atomic.Value
}

func newCollector(t *testing.T) *collector {
	c := &collector{body: sample, etag: `"v1"`, status: http.StatusOK}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.requests.Add(1)
		c.lastINM.Store(r.Header.Get("If-None-Match"))
		if r.URL.Path != ownership.HintsPath || r.URL.Query().Get("service") != "checkout" {
			http.NotFound(w, r)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for k, v := range c.header {
			w.Header()[k] = v
		}
		if c.etag != "" {
			w.Header().Set("ETag", c.etag)
			if r.Header.Get("If-None-Match") == c.etag {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		w.WriteHeader(c.status)
		fmt.Fprint(w, c.body)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) set(f func(c *collector)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
}

func TestSampleDecodes(t *testing.T) {
	var h ownership.Hints
	if err := json.Unmarshal([]byte(sample), &h); err != nil {
		t.Fatal(err)
	}
	e := h.Edges[0]
	if h.Version != 1 || h.Service != "checkout" || h.TTLSeconds != 30 || h.GeneratedAt.IsZero() ||
		e.Mode != ownership.ModeFailOpen || e.Samples != 175 || e.Confidence != 0.95 || e.PeerOperation != "GET /recommendations" {
		t.Fatalf("decoded %+v", h)
	}
	out, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"operation":"POST /checkout","peer_service":"recommendations","peer_operation":"GET /recommendations","mode":"fail_open","confidence":0.95,"samples":175}`; string(out) != want {
		t.Fatalf("encoded %s\nwant    %s", out, want)
	}
}

func TestRevalidation(t *testing.T) {
	col := newCollector(t)
	c := New(col.srv.URL, "checkout")
	next, err := c.Refresh(context.Background())
	if err != nil || next != 30*time.Second {
		t.Fatalf("first refresh: next %v, err %v; want the body's ttl 30s", next, err)
	}
	col.set(func(c *collector) { c.header = http.Header{"Cache-Control": {"public, max-age=7"}} })
	next, err = c.Refresh(context.Background())
	if err != nil || next != 7*time.Second {
		t.Fatalf("second refresh: next %v, err %v; want max-age 7s", next, err)
	}
	if got := col.lastINM.Load(); got != `"v1"` {
		t.Fatalf("If-None-Match %q", got)
	}
	if _, ok := c.Hints(); !ok {
		t.Fatal("304 lost the hints")
	}
	// A new version replaces the hints.
	col.set(func(c *collector) {
		c.etag = `"v2"`
		c.header = nil
		c.body = `{"version":1,"service":"checkout","ttl_seconds":0,"edges":[]}`
	})
	next, err = c.Refresh(context.Background())
	if err != nil || next != DefaultTTL {
		t.Fatalf("third refresh: next %v, err %v", next, err)
	}
	if got := c.Mode("POST /checkout", "recommendations", ""); got != ownership.ModeUnknown {
		t.Fatalf("old edges survived: %v", got)
	}
	if l := c.BudgetLimits(); l != hooks.DefaultLimits() {
		t.Fatalf("absent budget gave %+v", l)
	}
}

func TestSafeDefaults(t *testing.T) {
	// Never reached: defaults.
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	c := New(srv.URL, "checkout")
	var next time.Duration
	for range 3 {
		var err error
		if next, err = c.Refresh(context.Background()); err == nil {
			t.Fatal("no error from a closed collector")
		}
	}
	if next != 4*time.Second {
		t.Errorf("third retry after %v, want 4s backoff", next)
	}
	if got := c.Mode("POST /checkout", "recommendations", "GET /recommendations"); got != ownership.ModeUnknown {
		t.Errorf("mode without hints %v", got)
	}
	if l := c.BudgetLimits(); l != hooks.DefaultLimits() {
		t.Errorf("limits without hints %+v", l)
	}

	// Reached once, then silent past the max staleness: defaults again.
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	col := newCollector(t)
	c = New(col.srv.URL, "checkout", WithClock(clock), WithMaxStale(time.Minute))
	if _, err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	col.srv.Close()
	mu.Lock()
	now = now.Add(59 * time.Second)
	mu.Unlock()
	if got := c.Mode("POST /checkout", "recommendations", ""); got != ownership.ModeFailOpen {
		t.Errorf("hints dropped before they went stale: %v", got)
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	if got := c.Mode("POST /checkout", "recommendations", ""); got != ownership.ModeUnknown {
		t.Errorf("stale hints still used: %v", got)
	}
	if l := c.BudgetLimits(); l != hooks.DefaultLimits() {
		t.Errorf("stale limits %+v", l)
	}
}

func TestStartPolls(t *testing.T) {
	col := newCollector(t)
	col.set(func(c *collector) { c.header = http.Header{"Cache-Control": {"max-age=1"}} })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := Start(ctx, col.srv.URL+"/", "checkout")
	deadline := time.Now().Add(5 * time.Second)
	for col.requests.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if col.requests.Load() < 2 {
		t.Fatalf("%d polls in 5 s with max-age=1", col.requests.Load())
	}
	if got := c.Mode("POST /checkout", "recommendations", ""); got != ownership.ModeFailOpen {
		t.Fatalf("mode %v", got)
	}
	cancel()
}

// TestCredentials: WithHeader sends the credentials an authenticator
// expects with every request, and no error shows a password the URL holds.
func TestCredentials(t *testing.T) {
	const token, password = "s3cret-token", "pa55word"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, sample)
	}))
	defer srv.Close()
	withPassword := strings.Replace(srv.URL, "://", "://collector:"+password+"@", 1)
	for _, tc := range []struct {
		name, baseURL string
		opts          []Option
		wantErr       string // "" for none
	}{
		{"the right token", srv.URL, []Option{WithHeader("Authorization", "Bearer "+token)}, ""},
		{"no token", srv.URL, nil, "401 Unauthorized"},
		{"the wrong token", srv.URL, []Option{WithHeader("Authorization", "Bearer nope")}, "401 Unauthorized"},
		{"a password in the URL", withPassword, nil, "collector:xxxxx@"},
		{"a password in a URL that cannot be parsed", withPassword + ":bad port", nil, "(a URL that cannot be parsed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.baseURL, "checkout", tc.opts...)
			_, err := c.Refresh(context.Background())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Refresh: %v", err)
			case tc.wantErr == "":
				if _, ok := c.Hints(); !ok {
					t.Fatal("no hints after a good answer")
				}
			case err == nil || !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("Refresh: %v, want an error saying %q", err, tc.wantErr)
			case strings.Contains(err.Error(), password):
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// matchPathSplit is matchPath as first written, splitting both strings:
// the reference the allocation-free matchPath must agree with.
func matchPathSplit(pattern, path string) bool {
	ps, qs := strings.Split(pattern, "/"), strings.Split(path, "/")
	for i, seg := range ps {
		switch {
		case i == len(ps)-1 && seg == "":
			return len(qs) > i
		case seg == "{$}":
			return i == len(qs)-1 && qs[i] == ""
		case i >= len(qs):
			return false
		case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "...}"):
			return true
		case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}"):
			if qs[i] == "" {
				return false
			}
		case seg != qs[i]:
			return false
		}
	}
	return len(qs) == len(ps)
}

// TestMatchPathAgrees compares matchPath with the reference on every
// pattern and path of up to three segments drawn from the kinds there
// are.
func TestMatchPathAgrees(t *testing.T) {
	join := func(parts []string, n int, each func(string)) {
		var rec func(prefix string, k int)
		rec = func(prefix string, k int) {
			each(prefix)
			if k == n {
				return
			}
			for _, p := range parts {
				if prefix == "" && k == 0 {
					rec(p, k+1)
				} else {
					rec(prefix+"/"+p, k+1)
				}
			}
		}
		rec("", 0)
	}
	var patterns, paths []string
	join([]string{"", "a", "b", "{x}", "{x...}", "{$}", "{", "}"}, 3, func(s string) { patterns = append(patterns, s) })
	join([]string{"", "a", "b", "{x}"}, 4, func(s string) { paths = append(paths, s) })
	for _, p := range patterns {
		for _, q := range paths {
			if got, want := matchPath(p, q), matchPathSplit(p, q); got != want {
				t.Errorf("matchPath(%q, %q) = %v, reference %v", p, q, got, want)
			}
		}
	}
	t.Logf("%d patterns × %d paths", len(patterns), len(paths))
}

func FuzzMatchPath(f *testing.F) {
	for _, s := range [][2]string{{"items/{id}", "items/42"}, {"static/", "static/a/b"}, {"{$}", ""}, {"files/{p...}", "files/a"}, {"", "x"}, {"a//b", "a//b"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		if got, want := matchPath(pattern, path), matchPathSplit(pattern, path); got != want {
			t.Fatalf("matchPath(%q, %q) = %v, reference %v", pattern, path, got, want)
		}
	})
}

// BenchmarkMode asks the sample hints what the middleware asks on a
// failed call: an inbound route, a peer, a concrete peer operation.
func BenchmarkMode(b *testing.B) {
	var h ownership.Hints
	if err := json.Unmarshal([]byte(sample), &h); err != nil {
		b.Fatal(err)
	}
	ix := newIndex(h.Edges)
	b.ReportAllocs()
	for b.Loop() {
		_ = ix.mode("POST /checkout", "recommendations", "GET /recommendations/42")
	}
}
