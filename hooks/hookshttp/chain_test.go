package hookshttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hookshttp"
	"github.com/errorownership/errorownership/hooks/internal/chaintest"
	"github.com/errorownership/errorownership/ownership"
)

// service is one server of a test chain: what it saw, what it read from
// its callee, and its spans.
type service struct {
	name     string
	srv      *httptest.Server
	requests atomic.Int32
	spans    *tracetest.SpanRecorder
	tp       *sdktrace.TracerProvider

	mu       sync.Mutex
	attempts []string // Retry-Attempt on each request it served
	observed []string // Error-Claim on each response from its callee
}

func newService(t *testing.T, name string) *service {
	s := &service{name: name, spans: tracetest.NewSpanRecorder()}
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(s.spans))
	t.Cleanup(func() { _ = s.tp.Shutdown(context.Background()) })
	return s
}

// start serves h on 127.0.0.1 behind otelhttp, counting requests first.
func (s *service) start(t *testing.T, h http.Handler) {
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		s.attempts = append(s.attempts, r.Header.Get(ownership.HTTPRetryAttemptHeader))
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
	s.srv = httptest.NewServer(otelhttp.NewHandler(counted, s.name,
		otelhttp.WithTracerProvider(s.tp), otelhttp.WithPropagators(propagation.TraceContext{})))
	t.Cleanup(s.srv.Close)
}

// seen returns copies of what the service recorded.
func (s *service) seen() (attempts, observed []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.attempts), slices.Clone(s.observed)
}

// transport is the service's outbound stack below the hooks: a client span
// per attempt, then a recorder of the callee's claims, then the network.
func (s *service) transport() http.RoundTripper {
	return otelhttp.NewTransport(recorder{s, &http.Transport{}},
		otelhttp.WithTracerProvider(s.tp), otelhttp.WithPropagators(propagation.TraceContext{}))
}

type recorder struct {
	s    *service
	base http.RoundTripper
}

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := r.base.RoundTrip(req)
	if err == nil {
		r.s.mu.Lock()
		r.s.observed = append(r.s.observed, res.Header.Get(ownership.HTTPClaimHeader))
		r.s.mu.Unlock()
	}
	return res, err
}

// spanAttrs returns attribute key of the service's ended spans of kind, in
// the order they ended, waiting briefly for n of them: a server span ends
// just after its response is written.
func (s *service) spanAttrs(t *testing.T, kind trace.SpanKind, key string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		var out []string
		for _, sp := range s.spans.Ended() {
			if sp.SpanKind() != kind {
				continue
			}
			v := ""
			for _, kv := range sp.Attributes() {
				if kv.Key == attribute.Key(key) {
					v = kv.Value.Emit()
				}
			}
			out = append(out, v)
		}
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(5 * time.Millisecond)
	}
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

			var ch http.Handler = leaf(tc.C)
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
			for _, s := range []struct {
				svc  *service
				want int
			}{{a, tc.WantA}, {b, tc.WantB}, {c, tc.WantC}} {
				if got := int(s.svc.requests.Load()); got != s.want {
					t.Errorf("%s served %d requests, want %d", s.svc.name, got, s.want)
				}
			}
			_, fromC := b.seen()
			_, fromB := a.seen()
			cAttempts, _ := c.seen()
			if !slices.Equal(fromC, tc.WantFromC) {
				t.Errorf("B read claims %q from C, want %q", fromC, tc.WantFromC)
			}
			if !slices.Equal(fromB, tc.WantFromB) {
				t.Errorf("A read claims %q from B, want %q", fromB, tc.WantFromB)
			}
			if !slices.Equal(cAttempts, tc.WantRetryAttempts) {
				t.Errorf("C saw Retry-Attempt %q, want %q", cAttempts, tc.WantRetryAttempts)
			}
			if tc.WantBClaim != "" {
				claims := b.spanAttrs(t, trace.SpanKindServer, ownership.AttrClaim, tc.WantB)
				reasons := b.spanAttrs(t, trace.SpanKindServer, ownership.AttrClaimReason, tc.WantB)
				for i := range claims {
					if claims[i] != tc.WantBClaim || reasons[i] != tc.WantBReason {
						t.Errorf("B's server span %d: error.claim %q, reason %q; want %q, %q", i, claims[i], reasons[i], tc.WantBClaim, tc.WantBReason)
					}
				}
			}
			if tc.WantBDecisions != nil {
				got := b.spanAttrs(t, trace.SpanKindClient, ownership.AttrRetryDecision, len(tc.WantBDecisions))
				if !slices.Equal(got, tc.WantBDecisions) {
					t.Errorf("B's attempt spans: retry.decision %q, want %q", got, tc.WantBDecisions)
				}
			}
			if got := a.spanAttrs(t, trace.SpanKindClient, ownership.AttrRetryDecision, len(tc.WantADecisions)); !slices.Equal(got, tc.WantADecisions) {
				t.Errorf("A's attempt spans: retry.decision %q, want %q", got, tc.WantADecisions)
			}
		})
	}
}
