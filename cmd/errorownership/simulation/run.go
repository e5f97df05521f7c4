// SPDX-License-Identifier: Apache-2.0

package simulation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/hooks/hookshttp"
)

// Policy is how the simulated services retry.
type Policy string

// The three retry policies.
const (
	// RetryEveryHop: every caller retries a failed call once, without a
	// budget; no service has the hooks, so no error carries a claim.
	RetryEveryHop Policy = "retry_every_hop"
	// BudgetPolicy: every caller retries a failed call once within a 10 %
	// retry budget; no hooks.
	BudgetPolicy Policy = "budget"
	// Ownership: hookshttp.Middleware on every server, hookshttp.Transport
	// with a 10 % budget on every client.
	Ownership Policy = "ownership"
)

// TraceIDHeader is the response header through which a simulated service
// tells the simulator the trace ID of the request, so the ground truth can be
// matched with what the collector saw.
const TraceIDHeader = "Sim-Trace-Id"

// RunConfig is one run of a topology under one policy.
type RunConfig struct {
	Topology *Topology
	Policy   Policy
	// Route is the path every service serves in this run ("/checkout");
	// operations are "GET <Route>", so runs with distinct routes never mix
	// in the store.
	Route string
	// Hints makes the ownership hooks poll HintsURL.
	Hints    bool
	HintsURL string
	// OTLPEndpoint receives every service's spans (OTLP/HTTP protobuf).
	OTLPEndpoint string
	Requests     int
	Concurrency  int
	// Rate, if positive, spreads the root requests at this many a second
	// over the run, so that traffic flows for a while, as it does while
	// collectors are replaced; 0 sends them as fast as Concurrency allows.
	Rate float64
	// BudgetRatio and BudgetMin are the clients' retry budget limits.
	BudgetRatio, BudgetMin float64
	// MaxAttempts bounds a call's attempts, the first included, under
	// every policy but NoRetries; 0 means 2 (one retry).
	MaxAttempts int
	Seed        uint64
	// Addrs are the addresses the services listen on, by name, such as an
	// earlier run's RunResult.Addrs, so that services keep their addresses
	// from run to run as real ones do; a service not listed gets a free
	// loopback port.
	Addrs map[string]string
}

// TraceTruth is the ground truth of one root request.
type TraceTruth struct {
	// OwnFaults counts, per service, the requests that failed on their own
	// (injected faults).
	OwnFaults map[string]int
	// FailedCalls counts, per "caller>callee", logical calls whose last
	// attempt failed.
	FailedCalls map[string]int
	// Status and Claim are the root service's answer.
	Status int
	Claim  string
}

// Coincidental reports whether the trace holds a coincidental error of
// service (docs/design.md §4.2): it failed on its own while a call it
// tolerates failed and none it needs did. Meant for a service that served
// one request of the trace, such as the root.
func (t *TraceTruth) Coincidental(top *Topology, service string) bool {
	s := top.Service(service)
	if s == nil || t.OwnFaults[service] == 0 {
		return false
	}
	tolerated := false
	for _, e := range s.Edges {
		if t.FailedCalls[service+">"+e.Callee] == 0 {
			continue
		}
		if !e.FailOpen {
			return false
		}
		tolerated = true
	}
	return tolerated
}

// RunResult is what one run saw.
type RunResult struct {
	Config     RunConfig
	Start, End time.Time
	// Served counts the requests each service's server handled, retries
	// included.
	Served map[string]int64
	// Truth is keyed by trace ID (lower-case hex).
	Truth map[string]*TraceTruth
	// RootFailed counts root requests answered with a server fault;
	// Errors transport errors at the simulator.
	RootFailed, Errors int
	// Addrs are the addresses the services listened on, by name.
	Addrs map[string]string
}

type truthBook struct {
	mu sync.Mutex
	m  map[string]*TraceTruth
}

func (b *truthBook) get(id string) *TraceTruth {
	t := b.m[id]
	if t == nil {
		t = &TraceTruth{OwnFaults: map[string]int{}, FailedCalls: map[string]int{}}
		b.m[id] = t
	}
	return t
}

func (b *truthBook) own(id, svc string) {
	b.mu.Lock()
	b.get(id).OwnFaults[svc]++
	b.mu.Unlock()
}

func (b *truthBook) failedCall(id, caller, callee string) {
	b.mu.Lock()
	b.get(id).FailedCalls[caller+">"+callee]++
	b.mu.Unlock()
}

type edgeClient struct {
	Edge
	url    string
	client *http.Client
}

type simService struct {
	Service
	route   string
	edges   []edgeClient
	served  atomic.Int64
	book    *truthBook
	start   time.Time
	rngMu   sync.Mutex
	rng     *rand.Rand
	tp      *sdktrace.TracerProvider
	srv     *http.Server
	ln      net.Listener
	closers []func()
}

func (s *simService) fault() bool {
	rate := s.Fault.RateAt(time.Since(s.start))
	if rate <= 0 {
		return false
	}
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64() < rate
}

func (s *simService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.served.Add(1)
	tid := trace.SpanContextFromContext(r.Context()).TraceID().String()
	w.Header().Set(TraceIDHeader, tid)
	for _, e := range s.edges {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, e.url, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		res, err := e.client.Do(req)
		failed := err != nil || res.StatusCode >= 500
		if res != nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		if failed {
			s.book.failedCall(tid, s.Name, e.Callee)
			if !e.FailOpen {
				w.WriteHeader(http.StatusBadGateway) // propagated
				return
			}
		}
	}
	if s.fault() {
		s.book.own(tid, s.Name)
		w.WriteHeader(http.StatusInternalServerError) // its own error
		return
	}
	if s.Latency > 0 {
		time.Sleep(s.Latency)
	}
	w.WriteHeader(http.StatusOK)
}

// plainRetry is an ordinary client without the hooks: it retries every
// server fault up to attempts, within budget if there is one.
type plainRetry struct {
	next     http.RoundTripper
	attempts int
	budget   *hooks.Budget
}

func (p *plainRetry) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.budget != nil {
		p.budget.Deposit()
	}
	for attempt := 0; ; attempt++ {
		req := r
		if attempt > 0 {
			req = r.Clone(r.Context())
			req.Header.Set("Retry-Attempt", strconv.Itoa(attempt))
		}
		res, err := p.next.RoundTrip(req)
		if res != nil && res.Request != nil && attempt > 0 {
			trace.SpanFromContext(res.Request.Context()).SetAttributes(attribute.Int("http.request.resend_count", attempt))
		}
		failed := err != nil || res.StatusCode >= 500
		if !failed || attempt+1 >= p.attempts || (p.budget != nil && !p.budget.TryWithdraw()) {
			return res, err
		}
		if res != nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
}

// Run starts the topology's services, sends cfg.Requests root requests,
// flushes every span to the collector and stops everything.
func Run(ctx context.Context, cfg RunConfig) (*RunResult, error) {
	top := cfg.Topology
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	attempts := cfg.MaxAttempts
	if attempts <= 0 {
		attempts = 2
	}
	book := &truthBook{m: map[string]*TraceTruth{}}
	start := time.Now()
	services := map[string]*simService{}
	var all []*simService
	// The hint clients poll on connections of their own, closed once they
	// stopped: a poll cut short can leave a connection dialled but never
	// used, which the collector's hints server, shutting down, waits five
	// seconds for (http.Server counts it active until then).
	hctx, stopHints := context.WithCancel(context.Background())
	var polling sync.WaitGroup
	hintsHTTP := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer func() {
		stopHints()
		polling.Wait()
		hintsHTTP.CloseIdleConnections()
	}()
	defer func() {
		for _, s := range all {
			if s.srv != nil {
				_ = s.srv.Close()
			} else if s.ln != nil {
				_ = s.ln.Close()
			}
			for _, c := range s.closers {
				c()
			}
		}
	}()
	for i, sv := range top.Services {
		addr := cfg.Addrs[sv.Name]
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		s := &simService{Service: sv, route: cfg.Route, book: book, start: start, ln: ln,
			rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1))} //nolint:gosec // G404: a seeded simulation, reproducible on purpose
		services[sv.Name] = s
		all = append(all, s)
	}
	url := func(name string) string { return "http://" + services[name].ln.Addr().String() + cfg.Route }
	op := "GET " + cfg.Route
	prop := propagation.TraceContext{}
	for _, s := range all {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.OTLPEndpoint))
		if err != nil {
			return nil, err
		}
		s.tp = sdktrace.NewTracerProvider(
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", s.Name))),
			sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(200*time.Millisecond),
				sdktrace.WithMaxQueueSize(1<<16), sdktrace.WithMaxExportBatchSize(2048)),
		)
		var hintSrc *hints.Client
		if cfg.Policy == Ownership && cfg.Hints {
			hintSrc = hints.New(cfg.HintsURL, s.Name, hints.WithHTTPClient(hintsHTTP))
			if _, err := hintSrc.Refresh(ctx); err != nil {
				return nil, fmt.Errorf("hints for %s: %w", s.Name, err)
			}
			polling.Go(func() { hintSrc.Run(hctx) })
		}
		for _, e := range s.Edges {
			base := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
			s.closers = append(s.closers, base.CloseIdleConnections)
			otelT := otelhttp.NewTransport(base, otelhttp.WithTracerProvider(s.tp), otelhttp.WithPropagators(prop))
			limits := hooks.Limits{Ratio: cfg.BudgetRatio, MinRetriesPerSecond: cfg.BudgetMin}
			var rt http.RoundTripper
			switch cfg.Policy {
			case NoRetries:
				rt = otelT
			case RetryEveryHop:
				rt = &plainRetry{next: otelT, attempts: attempts}
			case BudgetPolicy:
				rt = &plainRetry{next: otelT, attempts: attempts, budget: hooks.NewBudget(limits)}
			case Ownership:
				opts := []hookshttp.Option{
					hookshttp.WithBudget(hooks.NewBudget(limits)),
					hookshttp.WithMaxAttempts(attempts),
					hookshttp.WithBackoff(time.Millisecond, 2*time.Millisecond),
				}
				if hintSrc != nil {
					opts = append(opts, hookshttp.WithHints(hintSrc))
				}
				rt = hookshttp.Transport(otelT, opts...)
			default:
				return nil, fmt.Errorf("unknown policy %q", cfg.Policy)
			}
			s.edges = append(s.edges, edgeClient{Edge: e, url: url(e.Callee),
				client: &http.Client{Transport: rt, Timeout: 30 * time.Second}})
		}
		mux := http.NewServeMux()
		mux.Handle(op, s)
		var h http.Handler = mux
		if cfg.Policy == Ownership {
			var mopts []hookshttp.Option
			if hintSrc != nil {
				mopts = append(mopts, hookshttp.WithHints(hintSrc))
			}
			h = hookshttp.Middleware(h, mopts...)
		}
		h = otelhttp.NewHandler(h, s.Name, otelhttp.WithTracerProvider(s.tp), otelhttp.WithPropagators(prop))
		s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func(s *simService) { _ = s.srv.Serve(s.ln) }(s)
	}

	res := &RunResult{Config: cfg, Start: start, Served: map[string]int64{}, Addrs: map[string]string{}}
	for _, s := range all {
		res.Addrs[s.Name] = s.ln.Addr().String()
	}
	rootURL := url(top.Root)
	driver := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 60 * time.Second}
	defer driver.CloseIdleConnections()
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	sendFrom := time.Now()
	for range cfg.Concurrency {
		wg.Go(func() {
			for n := next.Add(1); n <= int64(cfg.Requests) && ctx.Err() == nil; n = next.Add(1) {
				if cfg.Rate > 0 {
					due := sendFrom.Add(time.Duration(float64(n-1) / cfg.Rate * float64(time.Second)))
					select {
					case <-time.After(time.Until(due)):
					case <-ctx.Done():
						return
					}
				}
				r, err := driver.Get(rootURL)
				if err != nil {
					mu.Lock()
					res.Errors++
					mu.Unlock()
					continue
				}
				_, _ = io.Copy(io.Discard, r.Body)
				r.Body.Close()
				tid := r.Header.Get(TraceIDHeader)
				book.mu.Lock()
				t := book.get(tid)
				t.Status, t.Claim = r.StatusCode, r.Header.Get("Error-Claim")
				book.mu.Unlock()
				if r.StatusCode >= 500 {
					mu.Lock()
					res.RootFailed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	res.End = time.Now()
	var errs []error
	for _, s := range all {
		res.Served[s.Name] = s.served.Load()
		errs = append(errs, s.tp.Shutdown(ctx)) // exports every span
	}
	res.Truth = book.m
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return res, errors.Join(errs...)
}
