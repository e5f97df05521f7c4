// SPDX-License-Identifier: Apache-2.0

package hints

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/internal/conformance"
	"github.com/errorownership/errorownership/ownership"
)

// The conformance vectors of routes.json and hints.json.

func TestConformanceRoutes(t *testing.T) {
	var v struct {
		Cases []struct {
			Framework, Pattern string
			Matches, Misses    []string
		}
	}
	if err := conformance.Load("routes.json", &v); err != nil {
		t.Fatal(err)
	}
	for _, tc := range v.Cases {
		t.Run(tc.Framework, func(t *testing.T) {
			for _, op := range tc.Matches {
				if !matchOperation(tc.Pattern, op) {
					t.Errorf("%q does not match %q", tc.Pattern, op)
				}
			}
			for _, op := range tc.Misses {
				if matchOperation(tc.Pattern, op) {
					t.Errorf("%q matches %q", tc.Pattern, op)
				}
			}
		})
	}
}

type hintQuery struct {
	Name, Operation, Peer string
	PeerOperation         string `json:"peer_operation"`
	Want                  string
}

type hintVectors struct {
	Documents map[string]json.RawMessage
	Modes     []struct {
		Document string
		Budget   hooks.Limits
		Queries  []hintQuery
	}
	Garbage struct {
		Cases []struct {
			Name   string
			Status int
			Body   string
		}
	}
	Accepted struct {
		Cases []struct {
			Name   string
			Body   string
			Query  hintQuery
			Budget hooks.Limits
		}
	}
	PollAfter struct {
		Cases []struct {
			Name         string
			CacheControl string `json:"cache_control"`
			TTLSeconds   int64  `json:"ttl_seconds"`
			WantSeconds  int    `json:"want_seconds"`
		}
	} `json:"poll_after"`
	Backoff struct {
		AfterFailuresSeconds []int `json:"after_failures_seconds"`
	}
	ETag struct {
		MaxETagBytes int `json:"max_etag_bytes"`
	}
	Stale struct {
		MaxStaleSeconds int          `json:"max_stale_seconds"`
		DefaultBudget   hooks.Limits `json:"default_budget"`
	}
}

// vectorServer serves one service's hints as a test sets them.
type vectorServer struct {
	srv *httptest.Server

	mu      sync.Mutex
	status  int
	body    string
	header  http.Header
	lastINM string
}

func newVectorServer(t *testing.T) *vectorServer {
	s := &vectorServer{status: http.StatusOK}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.URL.Path != ownership.HintsPath || r.URL.Query().Get("service") != "checkout" {
			http.NotFound(w, r)
			return
		}
		s.lastINM = r.Header.Get("If-None-Match")
		for k, v := range s.header {
			w.Header()[k] = v
		}
		w.WriteHeader(s.status)
		_, _ = w.Write([]byte(s.body))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *vectorServer) serve(status int, body string, header http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body, s.header = status, body, header
}

func loadHintVectors(t *testing.T) *hintVectors {
	t.Helper()
	v := new(hintVectors)
	if err := conformance.Load("hints.json", v); err != nil {
		t.Fatal(err)
	}
	return v
}

func ask(t *testing.T, c *Client, q hintQuery) {
	t.Helper()
	if got := c.Mode(q.Operation, q.Peer, q.PeerOperation).String(); got != q.Want {
		t.Errorf("%s: Mode(%q, %q, %q) = %s, want %s", q.Name, q.Operation, q.Peer, q.PeerOperation, got, q.Want)
	}
}

func TestConformanceHintModes(t *testing.T) {
	v := loadHintVectors(t)
	for _, m := range v.Modes {
		t.Run(m.Document, func(t *testing.T) {
			s := newVectorServer(t)
			s.serve(http.StatusOK, string(v.Documents[m.Document]), nil)
			c := New(s.srv.URL, "checkout")
			if _, err := c.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
			for _, q := range m.Queries {
				ask(t, c, q)
			}
			if got := c.BudgetLimits(); got != m.Budget {
				t.Errorf("budget %+v, want %+v", got, m.Budget)
			}
		})
	}
}

func TestConformanceHintGarbage(t *testing.T) {
	v := loadHintVectors(t)
	for _, tc := range v.Garbage.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			s := newVectorServer(t)
			s.serve(http.StatusOK, string(v.Documents["sample"]), nil)
			c := New(s.srv.URL, "checkout")
			if _, err := c.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
			s.serve(tc.Status, tc.Body, nil)
			next, err := c.Refresh(t.Context())
			if err == nil {
				t.Error("accepted")
			}
			if next != time.Second {
				t.Errorf("next fetch after %v, want 1s", next)
			}
			ask(t, c, hintQuery{Name: "the last good hints", Operation: "POST /checkout", Peer: "recommendations", Want: "fail_open"})
		})
	}
}

func TestConformanceHintAccepted(t *testing.T) {
	v := loadHintVectors(t)
	for _, tc := range v.Accepted.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			s := newVectorServer(t)
			s.serve(http.StatusOK, tc.Body, nil)
			c := New(s.srv.URL, "checkout")
			if _, err := c.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
			ask(t, c, tc.Query)
			if got := c.BudgetLimits(); got != tc.Budget {
				t.Errorf("budget %+v, want %+v", got, tc.Budget)
			}
		})
	}
}

func TestConformanceHintPollAfter(t *testing.T) {
	v := loadHintVectors(t)
	var doc map[string]any
	if err := json.Unmarshal(v.Documents["sample"], &doc); err != nil {
		t.Fatal(err)
	}
	for _, tc := range v.PollAfter.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			doc["ttl_seconds"] = tc.TTLSeconds
			body, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			var header http.Header
			if tc.CacheControl != "" {
				header = http.Header{"Cache-Control": {tc.CacheControl}}
			}
			s := newVectorServer(t)
			s.serve(http.StatusOK, string(body), header)
			next, err := New(s.srv.URL, "checkout").Refresh(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if want := time.Duration(tc.WantSeconds) * time.Second; next != want {
				t.Errorf("next fetch after %v, want %v", next, want)
			}
		})
	}
}

func TestConformanceHintBackoff(t *testing.T) {
	v := loadHintVectors(t)
	s := newVectorServer(t)
	c := New(s.srv.URL, "checkout")
	round := func() {
		s.serve(http.StatusServiceUnavailable, "down", nil)
		for i, want := range v.Backoff.AfterFailuresSeconds {
			next, err := c.Refresh(t.Context())
			if err == nil || next != time.Duration(want)*time.Second {
				t.Fatalf("failure %d: next fetch after %v (err %v), want %ds", i+1, next, err, want)
			}
		}
	}
	round()
	s.serve(http.StatusOK, string(v.Documents["sample"]), nil)
	if _, err := c.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	round() // a good answer started the count again
}

func TestConformanceHintETag(t *testing.T) {
	v := loadHintVectors(t)
	sample := string(v.Documents["sample"])
	for _, tc := range []struct {
		name string
		etag string
		kept bool
	}{
		{"an ETag is sent back", `"v1"`, true},
		{"an ETag of the longest length kept", `"` + strings.Repeat("a", v.ETag.MaxETagBytes-2) + `"`, true},
		{"an ETag one byte longer is not", `"` + strings.Repeat("a", v.ETag.MaxETagBytes-1) + `"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newVectorServer(t)
			s.serve(http.StatusOK, sample, http.Header{"Etag": {tc.etag}})
			c := New(s.srv.URL, "checkout")
			if _, err := c.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
			if !tc.kept {
				if _, err := c.Refresh(t.Context()); err != nil || s.lastINM != "" {
					t.Fatalf("If-None-Match %.20q… (err %v), want none", s.lastINM, err)
				}
				return
			}
			s.serve(http.StatusNotModified, "", http.Header{"Cache-Control": {"max-age=9"}})
			next, err := c.Refresh(t.Context())
			if err != nil || s.lastINM != tc.etag || next != 9*time.Second {
				t.Fatalf("304: next %v, err %v, If-None-Match %.20q…", next, err, s.lastINM)
			}
			ask(t, c, hintQuery{Name: "kept by the 304", Operation: "POST /checkout", Peer: "recommendations", Want: "fail_open"})
			s.serve(http.StatusNotModified, "", nil)
			if next, err = c.Refresh(t.Context()); err != nil || next != 30*time.Second {
				t.Fatalf("304 without max-age: next %v, err %v; want the kept document's ttl", next, err)
			}
		})
	}
}

func TestConformanceHintStale(t *testing.T) {
	v := loadHintVectors(t)
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := newVectorServer(t)
	c := New(s.srv.URL, "checkout", WithClock(clock))
	q := hintQuery{Name: "fresh", Operation: "POST /checkout", Peer: "recommendations", Want: "unknown"}
	ask(t, c, hintQuery{Name: "before the first answer", Operation: q.Operation, Peer: q.Peer, Want: "unknown"})
	if got := c.BudgetLimits(); got != v.Stale.DefaultBudget {
		t.Errorf("budget before the first answer %+v", got)
	}
	s.serve(http.StatusOK, string(v.Documents["sample"]), nil)
	if _, err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.serve(http.StatusServiceUnavailable, "down", nil)
	advance(time.Duration(v.Stale.MaxStaleSeconds)*time.Second - time.Second)
	_, _ = c.Refresh(context.Background())
	ask(t, c, hintQuery{Name: "just before max_stale", Operation: q.Operation, Peer: q.Peer, Want: "fail_open"})
	advance(2 * time.Second)
	ask(t, c, hintQuery{Name: "past max_stale", Operation: q.Operation, Peer: q.Peer, Want: "unknown"})
	if got := c.BudgetLimits(); got != v.Stale.DefaultBudget {
		t.Errorf("budget past max_stale %+v", got)
	}
}
