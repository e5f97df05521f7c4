// SPDX-License-Identifier: Apache-2.0

package hookshttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hookshttp"
	"github.com/errorownership/errorownership/ownership"
)

// failing is a callee that always fails, claiming (or not) as told, and
// remembers what it received.
type failing struct {
	srv      *httptest.Server
	requests atomic.Int32
	mu       sync.Mutex
	bodies   []string
	attempts []string
}

func newFailing(t *testing.T, claim []string) *failing {
	f := &failing{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, string(b))
		f.attempts = append(f.attempts, r.Header.Get(ownership.HTTPRetryAttemptHeader))
		f.mu.Unlock()
		if claim != nil {
			w.Header()[ownership.HTTPClaimHeader] = claim
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// call makes one request through rt inside a server request's Ledger and
// returns the call's recorded outcome.
func call(t *testing.T, rt http.RoundTripper, req *http.Request) (*http.Response, hooks.Outcome, error) {
	t.Helper()
	ctx, ledger := hooks.WithLedger(req.Context())
	res, err := rt.RoundTrip(req.WithContext(ctx))
	if res != nil {
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	outs := ledger.Outcomes(nil)
	if len(outs) != 1 {
		t.Fatalf("ledger has %d outcomes, want 1", len(outs))
	}
	return res, outs[0], err
}

func TestTransportMethods(t *testing.T) {
	f := newFailing(t, []string{"claimed"})
	rt := hookshttp.Transport(http.DefaultTransport, fastRetries...)
	for _, tc := range []struct {
		name     string
		req      func() *http.Request
		wantReqs int32
		want     ownership.RetryDecision
	}{
		{"GET is retried", func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, f.srv.URL, nil)
			return r
		}, 2, ownership.DecisionExhausted},
		{"POST is not", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, f.srv.URL, strings.NewReader("order"))
			return r
		}, 1, ownership.DecisionNoPolicy},
		{"PATCH is not", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPatch, f.srv.URL, strings.NewReader("x"))
			return r
		}, 1, ownership.DecisionNoPolicy},
		{"POST with an Idempotency-Key is", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, f.srv.URL, strings.NewReader("order"))
			r.Header.Set("Idempotency-Key", "k1")
			return r
		}, 2, ownership.DecisionExhausted},
		{"PUT without GetBody is not: the body cannot be replayed", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPut, f.srv.URL, io.NopCloser(strings.NewReader("x")))
			return r
		}, 1, ownership.DecisionNoPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.requests.Load()
			res, out, err := call(t, rt, tc.req())
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("status %d", res.StatusCode)
			}
			if got := f.requests.Load() - before; got != tc.wantReqs {
				t.Errorf("%d requests, want %d", got, tc.wantReqs)
			}
			if !out.Failed || out.Decision != tc.want || out.Received != ownership.ClaimClaimed {
				t.Errorf("outcome %+v, want failed, claimed, %v", out, tc.want)
			}
		})
	}
}

func TestTransportReplaysBody(t *testing.T) {
	f := newFailing(t, nil)
	rt := hookshttp.Transport(http.DefaultTransport, append(fastRetries,
		hookshttp.WithMaxAttempts(3),
		hookshttp.WithRetryPolicy(func(*http.Request) bool { return true }))...)
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL, strings.NewReader(`{"order":42}`))
	req.Header.Set("X-Caller", "test")
	_, out, err := call(t, rt, req)
	if err != nil {
		t.Fatal(err)
	}
	if out.Decision != ownership.DecisionExhausted || f.requests.Load() != 3 {
		t.Fatalf("decision %v after %d requests", out.Decision, f.requests.Load())
	}
	for i, b := range f.bodies {
		if b != `{"order":42}` {
			t.Errorf("attempt %d body %q", i, b)
		}
	}
	if want := []string{"", "1", "2"}; strings.Join(f.attempts, ",") != strings.Join(want, ",") {
		t.Errorf("Retry-Attempt %q, want %q", f.attempts, want)
	}
	if req.Header.Get(ownership.HTTPRetryAttemptHeader) != "" {
		t.Error("the caller's request was modified")
	}
}

// TestTransportMalformedClaims checks that anything but a clean claimed or
// unclaimed reads as missing: retried, and the caller's claim then says
// the downstream sent none.
func TestTransportMalformedClaims(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   ownership.Claim
	}{
		{"claimed", []string{"claimed"}, ownership.ClaimClaimed},
		{"upper case", []string{"UNCLAIMED"}, ownership.ClaimUnclaimed},
		{"absent", nil, ownership.ClaimMissing},
		{"empty", []string{""}, ownership.ClaimMissing},
		{"unknown", []string{"maybe"}, ownership.ClaimMissing},
		{"the literal missing", []string{"missing"}, ownership.ClaimMissing},
		{"with parameters", []string{"claimed; by=c"}, ownership.ClaimMissing},
		{"two values", []string{"claimed", "claimed"}, ownership.ClaimMissing},
		{"oversized", []string{strings.Repeat("claimed", 20)}, ownership.ClaimMissing},
		{"misspelt", []string{"claim"}, ownership.ClaimMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFailing(t, tc.values)
			rt := hookshttp.Transport(http.DefaultTransport, fastRetries...)
			req, _ := http.NewRequest(http.MethodGet, f.srv.URL, nil)
			_, out, err := call(t, rt, req)
			if err != nil {
				t.Fatal(err)
			}
			if out.Received != tc.want {
				t.Errorf("received %v, want %v", out.Received, tc.want)
			}
			wantReqs := int32(2)
			if tc.want == ownership.ClaimUnclaimed {
				wantReqs = 1
			}
			if got := f.requests.Load(); got != wantReqs {
				t.Errorf("%d requests, want %d", got, wantReqs)
			}
			claim, reason := hooks.Claim([]hooks.Outcome{out}, nil, false)
			if tc.want == ownership.ClaimMissing && (claim != ownership.ClaimUnclaimed || reason != ownership.ReasonMissingDownstreamClaim) {
				t.Errorf("caller would send %v/%v, want unclaimed/missing_downstream_claim", claim, reason)
			}
		})
	}
}

// TestTransportDeadline checks that a retry whose backoff would outlast the
// deadline is not made, and nothing sleeps past it.
func TestTransportDeadline(t *testing.T) {
	f := newFailing(t, []string{"claimed"})
	rt := hookshttp.Transport(http.DefaultTransport, hookshttp.WithBackoff(time.Second, time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL, nil)
	start := time.Now()
	res, out, err := call(t, rt, req)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 150*time.Millisecond {
		t.Errorf("took %v: slept toward a retry that could not fit", el)
	}
	if res.StatusCode != http.StatusServiceUnavailable || out.Decision != ownership.DecisionExhausted || f.requests.Load() != 1 {
		t.Errorf("status %d, decision %v, %d requests; want 503, exhausted, 1", res.StatusCode, out.Decision, f.requests.Load())
	}
}

// TestTransportCancelDuringBackoff checks that a caller who gives up
// during the backoff gets its context's error at once.
func TestTransportCancelDuringBackoff(t *testing.T) {
	f := newFailing(t, nil)
	rt := hookshttp.Transport(http.DefaultTransport, hookshttp.WithBackoff(10*time.Second, 10*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL, nil)
	start := time.Now()
	_, out, err := call(t, rt, req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("kept sleeping after the cancel")
	}
	if !out.InFlight || !out.Failed {
		t.Errorf("outcome %+v, want failed and in flight", out)
	}
}

// TestTransportNetworkError retries a call that got no answer: its claim
// is missing.
func TestTransportNetworkError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	rt := hookshttp.Transport(http.DefaultTransport, fastRetries...)
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	_, out, err := call(t, rt, req)
	if err == nil {
		t.Fatal("no error from a closed server")
	}
	if out.Received != ownership.ClaimMissing || out.Decision != ownership.DecisionExhausted {
		t.Errorf("outcome %+v, want missing, exhausted", out)
	}
}

// TestTransportBudget runs 200 calls against a callee that always fails,
// with a frozen clock: retries stay within ratio × requests + floor ×
// window, and the rest are suppressed_budget.
func TestTransportBudget(t *testing.T) {
	f := newFailing(t, []string{"claimed"})
	frozen := time.Unix(1_800_000_000, 0)
	budget := hooks.NewBudget(hooks.Limits{Ratio: 0.1, MinRetriesPerSecond: 1},
		hooks.BudgetWindow(10*time.Second), hooks.BudgetClock(func() time.Time { return frozen }))
	rt := hookshttp.Transport(http.DefaultTransport, append(fastRetries, hookshttp.WithBudget(budget))...)
	decisions := map[ownership.RetryDecision]int{}
	const calls = 200
	for range calls {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL, nil)
		_, out, err := call(t, rt, req)
		if err != nil {
			t.Fatal(err)
		}
		// exhausted means a retry was made and failed too.
		decisions[out.Decision]++
	}
	retries := int(f.requests.Load()) - calls
	bound := 0.1*calls + 1*10
	if float64(retries) > bound {
		t.Fatalf("%d retries for %d calls, bound %v", retries, calls, bound)
	}
	if retries != 30 || decisions[ownership.DecisionExhausted] != 30 || decisions[ownership.DecisionSuppressedBudget] != calls-30 {
		t.Fatalf("%d retries, decisions %v; want 30 retried, 170 suppressed_budget", retries, decisions)
	}
}

// TestTransportAttemptSpans checks the attributes each attempt's span gets
// when the hook wraps otelhttp, and that without per-attempt spans the
// caller's own span gets none.
func TestTransportAttemptSpans(t *testing.T) {
	f := newFailing(t, []string{"claimed"})
	s := newService(t, "caller")
	rt := hookshttp.Transport(s.transport(), append(fastRetries, hookshttp.WithMaxAttempts(3))...)
	ctx, span := s.TP.Tracer("test").Start(context.Background(), "caller", trace.WithSpanKind(trace.SpanKindServer))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL, nil)
	_, _, _ = call(t, rt, req)
	span.End()

	attempts := s.SpanAttrs(t, trace.SpanKindClient, ownership.AttrRetryAttempt, 3)
	resends := s.SpanAttrs(t, trace.SpanKindClient, ownership.AttrHTTPResendCount, 3)
	received := s.SpanAttrs(t, trace.SpanKindClient, ownership.AttrClaimReceived, 3)
	decisions := s.SpanAttrs(t, trace.SpanKindClient, ownership.AttrRetryDecision, 3)
	for i, want := range [][]string{{"0", "1", "2"}, {"", "1", "2"}, {"claimed", "claimed", "claimed"}, {"retried", "retried", "exhausted"}} {
		got := [][]string{attempts, resends, received, decisions}[i]
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("attempt spans: got %q, want %q", got, want)
		}
	}
	if got := s.SpanAttrs(t, trace.SpanKindServer, ownership.AttrRetryDecision, 1); len(got) != 1 || got[0] != "" {
		t.Errorf("the caller's span got retry attributes: %q", got)
	}

	// Without otelhttp below the hook there is no attempt span: the
	// caller's span must stay clean.
	s2 := newService(t, "plain")
	rt2 := hookshttp.Transport(http.DefaultTransport, fastRetries...)
	ctx2, span2 := s2.TP.Tracer("test").Start(context.Background(), "caller", trace.WithSpanKind(trace.SpanKindServer))
	req2, _ := http.NewRequestWithContext(ctx2, http.MethodGet, f.srv.URL, nil)
	_, _, _ = call(t, rt2, req2)
	span2.End()
	if got := s2.SpanAttrs(t, trace.SpanKindServer, ownership.AttrRetryDecision, 1); len(got) != 1 || got[0] != "" {
		t.Errorf("the caller's span got retry attributes: %q", got)
	}
}

// TestTransportOutsideRequest: a call made outside any server request
// (no Ledger) is still retried per the matrix.
func TestTransportOutsideRequest(t *testing.T) {
	f := newFailing(t, nil)
	c := &http.Client{Transport: hookshttp.Transport(http.DefaultTransport, fastRetries...)}
	res, err := c.Get(f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if f.requests.Load() != 2 {
		t.Fatalf("%d requests, want 2", f.requests.Load())
	}
}
