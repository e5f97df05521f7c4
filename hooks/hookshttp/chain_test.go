// SPDX-License-Identifier: Apache-2.0

package hookshttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hookshttp"
	"github.com/errorownership/errorownership/hooks/internal/chaintest"
	"github.com/errorownership/errorownership/ownership"
)

// service is one server of a test chain: what it saw (Retry-Attempt on
// each request it served, Error-Claim on each response from its callee)
// and its spans.
type service struct {
	*chaintest.Recorder
	srv *httptest.Server
}

func newService(t *testing.T, name string) *service {
	return &service{Recorder: chaintest.NewRecorder(t, name)}
}

// start serves h on 127.0.0.1 behind otelhttp, counting requests first.
func (s *service) start(t *testing.T, h http.Handler) {
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Served(r.Header.Get(ownership.HTTPRetryAttemptHeader))
		h.ServeHTTP(w, r)
	})
	s.srv = httptest.NewServer(otelhttp.NewHandler(counted, s.Name,
		otelhttp.WithTracerProvider(s.TP), otelhttp.WithPropagators(propagation.TraceContext{})))
	t.Cleanup(s.srv.Close)
}

// transport is the service's outbound stack below the hooks: a client span
// per attempt, then a recorder of the callee's claims, then the network.
func (s *service) transport() http.RoundTripper {
	return otelhttp.NewTransport(recorder{s, &http.Transport{}},
		otelhttp.WithTracerProvider(s.TP), otelhttp.WithPropagators(propagation.TraceContext{}))
}

type recorder struct {
	s    *service
	base http.RoundTripper
}

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := r.base.RoundTrip(req)
	if err == nil {
		r.s.Observed(res.Header.Get(ownership.HTTPClaimHeader))
	}
	return res, err
}

// middle is the handler of A and B: call the next service, fail if it did.
func middle(client *http.Client, next string, broken bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if broken {
			ctx = context.Background()
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, next+"/work", nil)
		res, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		if err != nil || res.StatusCode >= 500 {
			http.Error(w, "downstream failed", http.StatusBadGateway)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
}

func leaf(does chaintest.Leaf) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch does {
		case chaintest.LeafOK:
			_, _ = io.WriteString(w, "ok")
		case chaintest.LeafFail:
			http.Error(w, "C failed", http.StatusInternalServerError)
		case chaintest.LeafUnclaim:
			w.Header().Set(ownership.HTTPClaimHeader, "unclaimed")
			http.Error(w, "C's dependency failed", http.StatusInternalServerError)
		case chaintest.LeafHang:
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			http.Error(w, "C gave up", http.StatusGatewayTimeout)
		}
	})
}

// bTimeout is how long B waits in the timeout case: long enough for its
// call to reach C even under the race detector.
const bTimeout = 300 * time.Millisecond

// fastRetries are the client options of every hop: two attempts, quick.
var fastRetries = []hookshttp.Option{hookshttp.WithMaxAttempts(2), hookshttp.WithBackoff(time.Millisecond, 2*time.Millisecond)}

// TestChain walks the decision matrix and the refinements through three
// real HTTP services A → B → C.
func TestChain(t *testing.T) {
	for _, tc := range chaintest.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			a, b, c := newService(t, "A"), newService(t, "B"), newService(t, "C")

			ch := leaf(tc.C)
			if tc.CHooks {
				ch = hookshttp.Middleware(ch)
			}
			c.start(t, ch)

			bClient := &http.Client{Transport: b.transport()}
			if tc.B.Hooks {
				opts := slices.Clone(fastRetries)
				if tc.B.NoPolicy {
					opts = append(opts, hookshttp.WithRetryPolicy(func(*http.Request) bool { return false }))
				}
				if tc.B.EmptyBudget {
					opts = append(opts, hookshttp.WithBudget(hooks.NewBudget(hooks.Limits{})))
				}
				bClient.Transport = hookshttp.Transport(bClient.Transport, opts...)
			}
			bh := middle(bClient, c.srv.URL, tc.B.Broken)
			if tc.B.Timeout {
				bh = http.TimeoutHandler(bh, bTimeout, "B timed out")
			}
			if tc.B.Hooks {
				bh = hookshttp.Middleware(bh)
			}
			b.start(t, bh)

			aClient := &http.Client{Transport: hookshttp.Transport(a.transport(), fastRetries...)}
			a.start(t, hookshttp.Middleware(middle(aClient, b.srv.URL, false)))

			res, err := http.Get(a.srv.URL + "/work")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()

			if got := res.Header.Get(ownership.HTTPClaimHeader); got != tc.WantRoot {
				t.Errorf("root read claim %q from A, want %q", got, tc.WantRoot)
			}
			chaintest.Check(t, tc, "Retry-Attempt", a.Observation(), b.Observation(), c.Observation())
		})
	}
}
