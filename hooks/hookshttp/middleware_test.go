// SPDX-License-Identifier: Apache-2.0

package hookshttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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
		{"success: no claim", nil, func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "ok")
		}, ""},
		{"own failure", nil, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}, "claimed"},
		{"handler's own claim wins", nil, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("error-claim", "unclaimed")
			w.WriteHeader(http.StatusInternalServerError)
		}, "unclaimed"},
		{"4xx is the caller's fault", nil, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusNotFound)
		}, ""},
		{"4xx counted when configured", []hookshttp.Option{hookshttp.WithFault(func(s int) bool { return s >= 400 })}, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
		}, "claimed"},
		{"1xx then failure", nil, func(w http.ResponseWriter, _ *http.Request) {
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
		{"http.Error", nil, func(w http.ResponseWriter, _ *http.Request) {
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
	h := hookshttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if _, ok := w.(http.Flusher); !ok {
			t.Error("writer is not a Flusher")
		}
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline through Unwrap: %v", err)
		}
		if _, err := io.WriteString(w, "part 1\n"); err != nil {
			t.Errorf("WriteString: %v", err)
		}
		if err := rc.Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		if _, err := io.Copy(w, strings.NewReader("part 2\n")); err != nil {
			t.Errorf("io.Copy: %v", err)
		}
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
	if res.StatusCode != http.StatusOK || string(body) != "part 1\npart 2\n" || res.Header.Get(ownership.HTTPClaimHeader) != "" {
		t.Fatalf("status %d, body %q, claim %q", res.StatusCode, body, res.Header.Get(ownership.HTTPClaimHeader))
	}
}

// askedOperations is a HintSource that records the inbound operations
// the middleware asks about.
type askedOperations struct {
	mu  sync.Mutex
	ops []string
}

func (a *askedOperations) Mode(operation, _, _ string) ownership.Mode {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ops = append(a.ops, operation)
	return ownership.ModeUnknown
}

func (a *askedOperations) BudgetLimits() hooks.Limits { return hooks.DefaultLimits() }

// TestMiddlewareKeepsTheRoute: otelhttp names the server span after the
// ServeMux route whichever side of it the middleware is, and the middleware
// asks the hints about its own operation: the route when the mux is inside
// it, else the concrete request, which the hints match to the route.
func TestMiddlewareKeepsTheRoute(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wrap   func(mux http.Handler, tp trace.TracerProvider, hs hooks.HintSource) http.Handler
		wantOp string
	}{
		{"middleware inside otelhttp, as the README wires it", func(mux http.Handler, tp trace.TracerProvider, hs hooks.HintSource) http.Handler {
			return otelhttp.NewHandler(hookshttp.Middleware(mux, hookshttp.WithHints(hs)), "items", otelhttp.WithTracerProvider(tp))
		}, "GET /items/{id}"},
		{"middleware outside otelhttp", func(mux http.Handler, tp trace.TracerProvider, hs hooks.HintSource) http.Handler {
			return hookshttp.Middleware(otelhttp.NewHandler(mux, "items", otelhttp.WithTracerProvider(tp)), hookshttp.WithHints(hs))
		}, "GET /items/42"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			t.Cleanup(func() {
				if err := tp.Shutdown(context.Background()); err != nil {
					t.Error(err)
				}
			})
			mux := http.NewServeMux()
			mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
				hooks.LedgerFrom(r.Context()).Record(hooks.Outcome{PeerService: "10.0.0.9:80", Failed: true})
				w.WriteHeader(http.StatusBadGateway)
			})
			asked := &askedOperations{}
			srv := httptest.NewServer(tc.wrap(mux, tp, asked))
			defer srv.Close()
			res, err := http.Get(srv.URL + "/items/42")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			ended := spans.Ended()
			if len(ended) != 1 || ended[0].Name() != "GET /items/{id}" {
				t.Fatalf("server spans %v, want one named after the route", spanNames(ended))
			}
			if len(asked.ops) != 1 || asked.ops[0] != tc.wantOp {
				t.Fatalf("the middleware asked about %q, want %q", asked.ops, tc.wantOp)
			}
		})
	}
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func TestPeerAddress(t *testing.T) {
	for url, want := range map[string]string{
		"http://10.0.0.7:8080/x":  "10.0.0.7:8080",
		"http://catalog/x":        "catalog",
		"http://catalog:80/x":     "catalog",
		"https://catalog:443/x":   "catalog",
		"https://catalog:80/x":    "catalog:80",
		"http://[::1]:9000/x":     "[::1]:9000",
		"http://[::1]/x":          "::1",
		"http://Catalog.Svc:81/x": "Catalog.Svc:81",
	} {
		r := httptest.NewRequest(http.MethodGet, url, nil)
		if got := hookshttp.PeerAddress(r); got != want {
			t.Errorf("PeerAddress(%s) = %q, want %q", url, got, want)
		}
	}
}

func TestOperation(t *testing.T) {
	for pattern, want := range map[string]string{
		"":                       "POST /checkout",
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
		"edges":[{"operation":"GET /work","peer_service":"recommendations","peer_operation":"GET /recommendations",
		          "peer_addresses":["%s"],"mode":"%s","confidence":0.95,"samples":175}]}`
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
			recs := newService(t, "recommendations")
			recs.start(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "no recommendations today", http.StatusInternalServerError)
			}))
			recsAddr := strings.TrimPrefix(recs.srv.URL, "http://")

			// The hints name recommendations by its service.name and list
			// the address B reached it at: B's hooks need no names.
			collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != ownership.HintsPath || r.URL.Query().Get("service") != "b" {
					http.NotFound(w, r)
					return
				}
				fmt.Fprintf(w, hintsBody, recsAddr, tc.mode)
			}))
			defer collector.Close()
			if tc.mode == "" {
				collector.Close()
			}
			h := hints.New(collector.URL, "b")
			_, _ = h.Refresh(context.Background())

			b := newService(t, "B")
			bClient := &http.Client{Transport: hookshttp.Transport(b.transport(), append(fastRetries, hookshttp.WithHints(h))...)}
			mux := http.NewServeMux()
			mux.HandleFunc("GET /work", func(w http.ResponseWriter, r *http.Request) {
				req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, recs.srv.URL+"/recommendations", nil)
				if res, err := bClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
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
			_, fromB := a.Seen()
			if len(fromB) == 0 || fromB[0] != tc.wantClaim {
				t.Errorf("A read %q from B, want %q first", fromB, tc.wantClaim)
			}
			if got := []int{int(a.Requests.Load()), int(b.Requests.Load()), int(recs.Requests.Load())}; got[0] != tc.wantA || got[1] != tc.wantB || got[2] != tc.want {
				t.Errorf("A, B, recommendations served %v, want [%d %d %d]", got, tc.wantA, tc.wantB, tc.want)
			}
			// recommendations has no hooks: its failures come without a claim.
			wantReason := map[string]string{"claimed": "coincidental", "unclaimed": "missing_downstream_claim"}[tc.wantClaim]
			if got := b.SpanAttrs(t, trace.SpanKindServer, ownership.AttrClaimReason, 1); len(got) == 0 || got[0] != wantReason {
				t.Errorf("B's error_ownership.claim.reason %q, want %q", got, wantReason)
			}
		})
	}
}
