// SPDX-License-Identifier: Apache-2.0

package hookshttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/errorownership/errorownership/hooks/hookshttp"
)

// The overhead targets per request, middleware and transport together.
const (
	maxAddedAllocs = 2
	maxAddedNanos  = 1000
)

// okHandler is the service under measurement: it answers at once.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, "ok")
})

// setup is one way of wiring a client to a server.
type setup struct {
	name   string
	client *http.Client
	url    string
	do     func() // one request, for the in-process setups
}

// get makes one loopback request and reads the answer.
func (s *setup) get(b testing.TB) {
	res, err := s.client.Get(s.url)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Fatalf("%s: status %d", s.name, res.StatusCode)
	}
}

// measure runs n requests of s and returns the wall time, the process CPU
// time and the allocations they took, the server's included (it runs in
// this process).
func measure(b testing.TB, s *setup, n int) (wall, cpu time.Duration, mallocs uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs = ms.Mallocs
	cpu0, _ := processCPU()
	start := time.Now()
	for range n {
		if s.do != nil {
			s.do()
		} else {
			s.get(b)
		}
	}
	wall = time.Since(start)
	cpu1, _ := processCPU()
	runtime.ReadMemStats(&ms)
	return wall, cpu1 - cpu0, ms.Mallocs - mallocs
}

// figures are per-request costs of one setup.
type figures struct{ wallNs, cpuNs, allocs float64 }

// interleave runs b.N requests on each setup, in alternating rounds of
// small batches so that drift (CPU frequency, GC, a noisy neighbour) falls
// on all alike, rotating the order. Wall time is the median over rounds, robust to a burst of
// noise in one round; CPU time (process user+system, which other processes
// on a shared machine do not inflate) and allocations are means.
func interleave(b *testing.B, setups []*setup, batch int) []figures {
	for _, s := range setups { // warm up: connections, pools
		for range 50 {
			if s.do != nil {
				s.do()
			} else {
				s.get(b)
			}
		}
	}
	walls := make([][]float64, len(setups))
	cpus := make([]time.Duration, len(setups))
	mallocs := make([]uint64, len(setups))
	b.ResetTimer()
	for round, done := 0, 0; done < b.N; round++ {
		n := min(batch, b.N-done)
		// Rotate the order each round, so no setup always runs right
		// after the same other one (and its garbage).
		for k := range setups {
			i := (round + k) % len(setups)
			w, c, m := measure(b, setups[i], n)
			walls[i] = append(walls[i], float64(w.Nanoseconds())/float64(n))
			cpus[i] += c
			mallocs[i] += m
		}
		done += n
	}
	b.StopTimer()
	out := make([]figures, len(setups))
	for i := range setups {
		out[i] = figures{
			wallNs: median(walls[i]),
			cpuNs:  float64(cpus[i].Nanoseconds()) / float64(b.N),
			allocs: float64(mallocs[i]) / float64(b.N),
		}
	}
	return out
}

func median(v []float64) float64 {
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// report reports each setup's figures and what setup i adds to setup j.
func report(b *testing.B, setups []*setup, f []figures) {
	_, haveCPU := processCPU()
	for i, s := range setups {
		b.ReportMetric(f[i].wallNs, s.name+"-ns/req")
		if haveCPU {
			b.ReportMetric(f[i].cpuNs, s.name+"-cpu-ns/req")
		}
		b.ReportMetric(f[i].allocs, s.name+"-allocs/req")
	}
}

func added(b *testing.B, name string, with, without figures) {
	b.ReportMetric(with.wallNs-without.wallNs, name+"-ns/req")
	if _, ok := processCPU(); ok {
		b.ReportMetric(with.cpuNs-without.cpuNs, name+"-cpu-ns/req")
	}
	b.ReportMetric(with.allocs-without.allocs, name+"-allocs/req")
}

// newTracerProvider is a real SDK provider that samples everything and
// exports to nowhere, so otelhttp does all its work.
func newTracerProvider(b testing.TB) *sdktrace.TracerProvider {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

func loopback(b testing.TB, name string, h http.Handler, rt http.RoundTripper) *setup {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return &setup{name: name, client: &http.Client{Transport: rt}, url: srv.URL + "/"}
}

func newBase() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 4
	return t
}

// BenchmarkHTTPOverhead measures, per request on the success path over
// real loopback HTTP, a bare handler and client, the same with our
// middleware and transport, with otelhttp alone (SDK tracer, always
// sampled, no-op exporter), and with otelhttp and ours, interleaved in one
// run. It reports each, what ours adds to bare and to otelhttp, and ours as
// a share of otelhttp's own overhead.
func BenchmarkHTTPOverhead(b *testing.B) {
	tp := newTracerProvider(b)
	otelOpts := []otelhttp.Option{otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{})}
	setups := []*setup{
		loopback(b, "bare", okHandler, newBase()),
		loopback(b, "ours", hookshttp.Middleware(okHandler), hookshttp.Transport(newBase())),
		loopback(b, "otel", otelhttp.NewHandler(okHandler, "GET /", otelOpts...), otelhttp.NewTransport(newBase(), otelOpts...)),
		loopback(b, "otel+ours", otelhttp.NewHandler(hookshttp.Middleware(okHandler), "GET /", otelOpts...),
			hookshttp.Transport(otelhttp.NewTransport(newBase(), otelOpts...))),
	}
	f := interleave(b, setups, 50)
	const bare, ours, otel, both = 0, 1, 2, 3
	report(b, setups, f)
	added(b, "ours-added", f[ours], f[bare])
	added(b, "otel-added", f[otel], f[bare])
	added(b, "ours-on-otel", f[both], f[otel])
	b.ReportMetric(100*(f[both].wallNs-f[otel].wallNs)/(f[otel].wallNs-f[bare].wallNs), "ours/otel-ns-%")
	if _, ok := processCPU(); ok {
		b.ReportMetric(100*(f[both].cpuNs-f[otel].cpuNs)/(f[otel].cpuNs-f[bare].cpuNs), "ours/otel-cpu-%")
	}
	b.ReportMetric(100*(f[both].allocs-f[otel].allocs)/(f[otel].allocs-f[bare].allocs), "ours/otel-allocs-%")
	b.ReportMetric(f[ours].wallNs, "ns/op") // one request of the "ours" setup, not all four
}

// inProcess wires h and a client whose RoundTripper answers directly: a
// request is one inbound ServeHTTP into a recorder that makes one outbound
// call, with no network to hide our cost in.
func inProcess(name string, mw func(http.Handler) http.Handler, tr func(http.RoundTripper) http.RoundTripper) *setup {
	client := &http.Client{Transport: tr(direct{})}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://recommendations/recs", nil)
		res, err := client.Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			panic("direct call failed")
		}
		res.Body.Close()
		w.WriteHeader(http.StatusOK)
	}))
	in := httptest.NewRequest(http.MethodGet, "/checkout", nil)
	return &setup{name: name, do: func() { h.ServeHTTP(httptest.NewRecorder(), in) }}
}

// direct is a RoundTripper that answers every request with 200 at once.
type direct struct{}

func (direct) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
}

func bareMiddleware(h http.Handler) http.Handler           { return h }
func bareTransport(rt http.RoundTripper) http.RoundTripper { return rt }
func oursMiddleware(h http.Handler) http.Handler           { return hookshttp.Middleware(h) }
func oursTransport(rt http.RoundTripper) http.RoundTripper { return hookshttp.Transport(rt) }
func inProcessSetups() (bare, ours *setup) {
	return inProcess("bare", bareMiddleware, bareTransport), inProcess("ours", oursMiddleware, oursTransport)
}

// BenchmarkHTTPOverheadInProcess isolates our cost from loopback noise: the
// middleware (one inbound request) and the transport (one outbound call)
// against the same without them, interleaved.
func BenchmarkHTTPOverheadInProcess(b *testing.B) {
	bare, ours := inProcessSetups()
	setups := []*setup{bare, ours}
	f := interleave(b, setups, 500)
	report(b, setups, f)
	added(b, "ours-added", f[1], f[0])
	b.ReportMetric(f[1].wallNs, "ns/op")
}

// TestOverheadAllocations holds the allocation target: our middleware and
// transport add at most maxAddedAllocs allocations per request.
func TestOverheadAllocations(t *testing.T) {
	bare, ours := inProcessSetups()
	a := testing.AllocsPerRun(1000, bare.do)
	o := testing.AllocsPerRun(1000, ours.do)
	t.Logf("in process: bare %.0f allocs/req, ours %.0f (+%.0f)", a, o, o-a)
	if o-a > maxAddedAllocs {
		t.Errorf("middleware and transport add %.0f allocations per request, target %d", o-a, maxAddedAllocs)
	}
}
