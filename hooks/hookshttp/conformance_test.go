// SPDX-License-Identifier: Apache-2.0

package hookshttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hookshttp"
	"github.com/errorownership/errorownership/hooks/internal/chaintest"
	"github.com/errorownership/errorownership/hooks/internal/conformance"
	"github.com/errorownership/errorownership/ownership"
)

// The conformance vectors of claim_values.json, client.json and
// server.json, run as a service runs the hooks: otelhttp inside, the
// hooks around it, real servers on 127.0.0.1.

func TestConformanceClaimValues(t *testing.T) {
	var v struct {
		Cases []struct {
			Name   string
			Values []string
			Want   string
		}
	}
	if err := conformance.Load("claim_values.json", &v); err != nil {
		t.Fatal(err)
	}
	for _, tc := range v.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			h := http.Header{}
			if tc.Values != nil {
				h[ownership.HTTPClaimHeader] = tc.Values
			}
			if got := hookshttp.ClaimOf(h).String(); got != tc.Want {
				t.Errorf("ClaimOf(%.40q) = %s, want %s", tc.Values, got, tc.Want)
			}
		})
	}
}

type scripted struct {
	Status int
	Claim  *string
}

// callee answers each attempt with the next scripted response, and
// remembers the Retry-Attempt header and body of each.
type callee struct {
	srv       *httptest.Server
	mu        sync.Mutex
	responses []scripted
	attempts  []*string
	bodies    []string
}

func newCallee(t *testing.T, responses []scripted) *callee {
	c := &callee{responses: responses}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		defer c.mu.Unlock()
		var attempt *string
		if v, ok := r.Header[ownership.HTTPRetryAttemptHeader]; ok {
			attempt = &v[0]
		}
		c.attempts = append(c.attempts, attempt)
		c.bodies = append(c.bodies, string(b))
		n := len(c.attempts) - 1
		if n >= len(c.responses) {
			http.Error(w, "more attempts than the case scripts", http.StatusTeapot)
			return
		}
		if cl := c.responses[n].Claim; cl != nil {
			w.Header()[ownership.HTTPClaimHeader] = []string{*cl}
		}
		w.WriteHeader(c.responses[n].Status)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

type clientCase struct {
	Name        string
	Method      string
	Body        string
	Headers     map[string]string
	MaxAttempts int `json:"max_attempts"`
	Budget      *hooks.Limits
	Responses   []scripted
	Want        struct {
		Requests []*string
		Bodies   []string
		Status   int
		Spans    []map[string]any
	}
}

func TestConformanceClient(t *testing.T) {
	var v struct{ Cases []clientCase }
	if err := conformance.Load("client.json", &v); err != nil {
		t.Fatal(err)
	}
	for _, tc := range v.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			c := newCallee(t, tc.Responses)
			tp := chaintest.NewTracing(t)
			opts := []hookshttp.Option{hookshttp.WithBackoff(time.Millisecond, time.Millisecond)}
			if tc.MaxAttempts > 0 {
				opts = append(opts, hookshttp.WithMaxAttempts(tc.MaxAttempts))
			}
			if tc.Budget != nil {
				opts = append(opts, hookshttp.WithBudget(hooks.NewBudget(*tc.Budget)))
			}
			client := &http.Client{Transport: hookshttp.Transport(otelhttp.NewTransport(http.DefaultTransport, otelhttp.WithTracerProvider(tp)), opts...)}
			var body io.Reader
			if tc.Body != "" {
				body = strings.NewReader(tc.Body)
			}
			req, err := http.NewRequestWithContext(t.Context(), tc.Method, c.srv.URL+"/items/1", body)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.Headers {
				req.Header.Set(k, v)
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != tc.Want.Status {
				t.Errorf("status %d, want %d", res.StatusCode, tc.Want.Status)
			}
			c.mu.Lock()
			got := fmt.Sprint(deref(c.attempts))
			bodies := c.bodies
			c.mu.Unlock()
			if want := fmt.Sprint(deref(tc.Want.Requests)); got != want {
				t.Errorf("Retry-Attempt per attempt %s, want %s", got, want)
			}
			if tc.Want.Bodies != nil && fmt.Sprint(bodies) != fmt.Sprint(tc.Want.Bodies) {
				t.Errorf("bodies %q, want %q", bodies, tc.Want.Bodies)
			}
			attempts := tp.HookAttributes(t, trace.SpanKindClient, len(tc.Want.Spans))
			if got, want := fmt.Sprint(attempts), fmt.Sprint(tc.Want.Spans); got != want {
				t.Errorf("client spans' attributes\n got %s\nwant %s", got, want)
			}
		})
	}
}

func deref(ps []*string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = "<absent>"
		if p != nil {
			out[i] = *p
		}
	}
	return out
}

// modeTable is a hint source that knows the modes of edges by callee
// address.
type modeTable map[string]ownership.Mode

func (m modeTable) Mode(_, peer, _ string) ownership.Mode { return m[peer] }
func (modeTable) BudgetLimits() hooks.Limits              { return hooks.DefaultLimits() }

func TestConformanceServer(t *testing.T) {
	var v struct {
		Cases []struct {
			Name  string
			Calls []struct {
				Method    string
				Responses []scripted
				Mode      string
			}
			SetClaim []string `json:"set_claim"`
			Status   int
			Want     struct {
				Header *string
				Span   map[string]any
			}
		}
	}
	if err := conformance.Load("server.json", &v); err != nil {
		t.Fatal(err)
	}
	for _, tc := range v.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			tp := chaintest.NewTracing(t)
			modes := modeTable{}
			var callees []*callee
			for _, c := range tc.Calls {
				ce := newCallee(t, c.Responses)
				callees = append(callees, ce)
				modes[strings.TrimPrefix(ce.srv.URL, "http://")] = ownership.ParseMode(c.Mode)
			}
			client := &http.Client{Transport: hookshttp.Transport(otelhttp.NewTransport(http.DefaultTransport, otelhttp.WithTracerProvider(tp)),
				hookshttp.WithHints(modes), hookshttp.WithBackoff(time.Millisecond, time.Millisecond))}
			handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for i, c := range tc.Calls {
					req, _ := http.NewRequestWithContext(r.Context(), c.Method, callees[i].srv.URL+"/dep", nil)
					if res, err := client.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, res.Body)
						res.Body.Close()
					}
				}
				if tc.SetClaim != nil {
					w.Header()[ownership.HTTPClaimHeader] = tc.SetClaim
				}
				w.WriteHeader(tc.Status)
			})
			srv := httptest.NewServer(otelhttp.NewHandler(hookshttp.Middleware(handler, hookshttp.WithHints(modes)), "service",
				otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{})))
			defer srv.Close()
			res, err := http.Get(srv.URL + "/checkout")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			got := "<absent>"
			if v, ok := res.Header[ownership.HTTPClaimHeader]; ok {
				got = strings.Join(v, ",")
			}
			want := "<absent>"
			if tc.Want.Header != nil {
				want = *tc.Want.Header
			}
			if got != want {
				t.Errorf("Error-Claim %s, want %s", got, want)
			}
			server := tp.HookAttributes(t, trace.SpanKindServer, 1)
			if len(server) != 1 || fmt.Sprint(server[0]) != fmt.Sprint(tc.Want.Span) {
				t.Errorf("server span's attributes %v, want %v", server, tc.Want.Span)
			}
		})
	}
}
