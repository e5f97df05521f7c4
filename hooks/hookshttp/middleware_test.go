package hookshttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/hooks/hookshttp"
	"github.com/errorownership/errorownership/ownership"
)

func TestMiddlewareClaims(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []hookshttp.Option
		handler http.HandlerFunc
		want    string
	}{
		{"success: no claim", nil, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok")
		}, ""},
		{"own failure", nil, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}, "claimed"},
		{"handler's own claim wins", nil, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("error-claim", "unclaimed")
			w.WriteHeader(http.StatusInternalServerError)
		}, "unclaimed"},
		{"4xx is the caller's fault", nil, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
		}, ""},
		{"4xx counted when configured", []hookshttp.Option{hookshttp.WithFault(func(s int) bool { return s >= 400 })}, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
		}, "claimed"},
		{"1xx then failure", nil, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusServiceUnavailable)
		}, "claimed"},
		{"failure after a call failed", nil, func(w http.ResponseWriter, r *http.Request) {
			l := hooks.LedgerFrom(r.Context())
			l.Record(hooks.Outcome{PeerService: "c", Failed: true, Received: ownership.ClaimClaimed, Decision: ownership.DecisionExhausted})
			w.WriteHeader(http.StatusBadGateway)
		}, "unclaimed"},
		{"a call in flight when the handler answers", nil, func(w http.ResponseWriter, r *http.Request) {
			hooks.LedgerFrom(r.Context()).Begin("slow")
			w.WriteHeader(http.StatusServiceUnavailable)
		}, "unclaimed"},
		{"http.Error", nil, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}, "claimed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(hookshttp.Middleware(tc.handler, tc.opts...))
			defer srv.Close()
			res, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if got := res.Header.Get(ownership.HTTPClaimHeader); got != tc.want {
				t.Errorf("Error-Claim %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMiddlewareWriterInterfaces checks that handlers keep what net/http's
// writer offers: Flusher, ResponseController (through Unwrap), io.Copy.
func TestMiddlewareWriterInterfaces(t *testing.T) {
	h := hookshttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Flusher); !ok {
			t.Error("writer is not a Flusher")
		}
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline through Unwrap: %v", err)
		}
		io.WriteString(w, "part 1\n")
		if err := rc.Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		io.Copy(w, strings.NewReader("part 2\n"))
		// A late failure status cannot change the 200 already sent.
		w.WriteHeader(http.StatusInternalServerError)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "part 1\npart 2\n" || res.Header.Get(ownership.HTTPClaimHeader) != "" {
		t.Fatalf("status %d, body %q, claim %q", res.StatusCode, body, res.Header.Get(ownership.HTTPClaimHeader))
	}
}

func TestOperation(t *testing.T) {
	for pattern, want := range map[string]string{
		"":                       "POST",
		"/checkout":              "POST /checkout",
		"POST /checkout":         "POST /checkout",
		"POST example.com/items": "POST /items",
		"shop.example/{id}":      "POST /{id}",
	} {
		r := httptest.NewRequest(http.MethodPost, "/checkout", nil)
		r.Pattern = pattern
		if got := hookshttp.Operation(r); got != want {
			t.Errorf("Operation(pattern %q) = %q, want %q", pattern, got, want)
		}
	}
}

// TestCoincidental: B calls recommendations, a dependency the hints (served
// by a collector stand-in) say B tolerates, and it fails; B then fails for
// its own reason. B must claim its error, so A retries B. With hints that
// call the edge fail-close, or no hints at all, B unclaims instead.
func TestCoincidental(t *testing.T) {
	const hintsBody = `{"version":1,"service":"b","ttl_seconds":30,
		"retry_budget":{"ratio":0.1,"min_retries_per_second":10},
		"edges":[{"operation":"GET /work","peer_service":"recommendations","peer_operation":"GET /recommendations","mode":"%s","confidence":0.95,"samples":175}]}`
	for _, tc := range []struct {
		name               string
		mode               string // "" for an unreachable collector
		wantClaim          string
		wantA, wantB, want int
	}{
		{"fail-open edge: coincidental, claimed", "fail_open", "claimed", 1, 2, 4},
		{"fail-close edge: propagated, unclaimed", "fail_close", "unclaimed", 1, 1, 2},
		{"collector unreachable: safe defaults, unclaimed", "", "unclaimed", 1, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != hints.Path || r.URL.Query().Get("service") != "b" {
					http.NotFound(w, r)
					return
				}
				fmt.Fprintf(w, hintsBody, tc.mode)
			}))
			defer collector.Close()
			if tc.mode == "" {
				collector.Close()
			}
			h := hints.New(collector.URL, "b")
			_, _ = h.Refresh(context.Background())

			recs := newService(t, "recommendations")
			recs.start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "no recommendations today", http.StatusInternalServerError)
			}))

			b := newService(t, "B")
			bClient := &http.Client{Transport: hookshttp.Transport(b.transport(), append(fastRetries,
				hookshttp.WithHints(h),
				hookshttp.WithPeerService(func(*http.Request) string { return "recommendations" }),
				hookshttp.WithPeerOperation(func(r *http.Request) string { return r.Method + " " + r.URL.Path }))...)}
			mux := http.NewServeMux()
			mux.HandleFunc("GET /work", func(w http.ResponseWriter, r *http.Request) {
				req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, recs.srv.URL+"/recommendations", nil)
				if res, err := bClient.Do(req); err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
				// B carries on without recommendations, then fails on its own.
				http.Error(w, "B's own bug", http.StatusInternalServerError)
			})
			b.start(t, hookshttp.Middleware(mux, hookshttp.WithHints(h)))

			a := newService(t, "A")
			aClient := &http.Client{Transport: hookshttp.Transport(a.transport(), fastRetries...)}
			a.start(t, hookshttp.Middleware(middle(aClient, b.srv.URL, false)))

			res, err := http.Get(a.srv.URL + "/work")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			_, fromB := a.seen()
			if len(fromB) == 0 || fromB[0] != tc.wantClaim {
				t.Errorf("A read %q from B, want %q first", fromB, tc.wantClaim)
			}
			if got := []int{int(a.requests.Load()), int(b.requests.Load()), int(recs.requests.Load())}; got[0] != tc.wantA || got[1] != tc.wantB || got[2] != tc.want {
				t.Errorf("A, B, recommendations served %v, want [%d %d %d]", got, tc.wantA, tc.wantB, tc.want)
			}
			// recommendations has no hooks: its failures come without a claim.
			wantReason := map[string]string{"claimed": "coincidental", "unclaimed": "missing_downstream_claim"}[tc.wantClaim]
			if got := b.spanAttrs(t, trace.SpanKindServer, ownership.AttrClaimReason, 1); len(got) == 0 || got[0] != wantReason {
				t.Errorf("B's error.claim.reason %q, want %q", got, wantReason)
			}
		})
	}
}
