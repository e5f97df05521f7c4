// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/trace/noop"
	"golang.org/x/sys/unix"

	"github.com/errorownership/errorownership/extension/errorownershiphintsextension"
	"github.com/errorownership/errorownership/extension/errorownershipstoreextension"
	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/hooks/hookshttp"
	"github.com/errorownership/errorownership/internal/portlock"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
	"github.com/errorownership/errorownership/store/pgtest"
)

// freeEndpoint is a loopback address for a hints extension, which binds
// the endpoint it is configured with: reserved until the test ends, so that
// no other test process starts a server there meanwhile.
func freeEndpoint(t testing.TB) string {
	t.Helper()
	p, err := portlock.Reserve()
	require.NoError(t, err)
	t.Cleanup(p.Release)
	return p.Addr()
}

// startHintsExtension starts an errorownership_hints extension on a free
// loopback port and returns the host that holds it, as a collector's
// would, and the endpoint's base URL.
func startHintsExtension(t testing.TB, mutate func(*errorownershiphintsextension.Config), exts ...extensionHost) (host extensionHost, base string) {
	t.Helper()
	f := errorownershiphintsextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*errorownershiphintsextension.Config)
	cfg.NetAddr.Endpoint = freeEndpoint(t)
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	ctx := context.Background()
	ext, err := f.Create(ctx, extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	host = extensionHost{component.NewID(f.Type()): ext}
	for _, e := range exts {
		maps.Copy(host, e)
	}
	require.NoError(t, ext.Start(ctx, host))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(ctx)) })
	return host, "http://" + cfg.NetAddr.Endpoint
}

// extensionHost is a collector host with extensions.
type extensionHost map[component.ID]component.Component

func (h extensionHost) GetExtensions() map[component.ID]component.Component { return h }

// serveHints starts a processor whose model an errorownership_hints
// extension serves on a free loopback port, wired as the README wires them.
func serveHints(t testing.TB, mutate func(*Config), opts ...func(*processor.Settings)) (base string, proc processor.Traces, tt *componenttest.Telemetry) {
	t.Helper()
	host, base := startHintsExtension(t, nil)
	tt = componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	cfg := testConfig(func(c *Config) {
		c.DecisionWait = 10 * time.Millisecond
		id := component.MustNewID("errorownership_hints")
		c.HintsExtension = &id
		if mutate != nil {
			mutate(c)
		}
	})
	proc, _ = newTestProcessor(t, tt, cfg, new(consumertest.TracesSink), opts...)
	ctx := context.Background()
	require.NoError(t, proc.Start(ctx, hostFor(t, cfg, host)))
	t.Cleanup(func() { require.NoError(t, proc.Shutdown(ctx)) })
	return base, proc, tt
}

// hintsProcessor starts a processor serving hints, feeds it the
// coincidental scenario and waits until it analysed it all.
func hintsProcessor(t testing.TB, mutate func(*Config), opts ...func(*processor.Settings)) (base string) {
	t.Helper()
	base, proc, tt := serveHints(t, mutate, opts...)
	ctx := context.Background()
	batches := readScenario(t, filepath.Join("..", "..", "testdata", "scenarios", "coincidental.json"))
	for _, td := range batches {
		require.NoError(t, proc.ConsumeTraces(ctx, td))
	}
	require.Eventually(t, func() bool { return counter(t, tt, "traces_analyzed") == int64(len(batches)) },
		10*time.Second, 10*time.Millisecond)
	return base
}

func TestHintsEndpoint(t *testing.T) {
	base := hintsProcessor(t, nil)

	res, err := http.Get(base + ownership.HintsPath + "?service=checkout")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", body)
	assert.Equal(t, "application/json", res.Header.Get("Content-Type"))
	assert.Equal(t, "max-age=30", res.Header.Get("Cache-Control"))
	etag := res.Header.Get("ETag")
	require.NotEmpty(t, etag)

	var doc ownership.Hints
	require.NoError(t, json.Unmarshal(body, &doc))
	assert.Equal(t, ownership.HintsVersion, doc.Version)
	assert.Equal(t, "checkout", doc.Service)
	assert.Equal(t, 30, doc.TTLSeconds)
	assert.Equal(t, &ownership.RetryBudget{Ratio: 0.1, MinRetriesPerSecond: 10}, doc.RetryBudget)
	assert.WithinDuration(t, time.Now(), doc.GeneratedAt, time.Minute)
	modes := map[string]ownership.Mode{}
	for _, e := range doc.Edges {
		assert.Equal(t, "POST /checkout", e.Operation)
		modes[e.PeerService] = e.Mode
		if e.Mode != ownership.ModeUnknown {
			assert.Greater(t, e.Confidence, 0.8, "%s", e.PeerService)
			assert.Positive(t, e.Samples)
		}
	}
	assert.Equal(t, map[string]ownership.Mode{"recommendations": ownership.ModeFailOpen, "payments": ownership.ModeFailClose}, modes)

	// The same hints again: 304 with the same ETag.
	req, _ := http.NewRequest(http.MethodGet, base+ownership.HintsPath+"?service=checkout", nil)
	req.Header.Set("If-None-Match", `"other", `+etag)
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusNotModified, res.StatusCode)
	assert.Equal(t, etag, res.Header.Get("ETag"))

	// A service nobody saw gets empty hints, not an error: every edge unknown.
	res, err = http.Get(base + ownership.HintsPath + "?service=nobody")
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(res.Body).Decode(&doc))
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Empty(t, doc.Edges)
	assert.NotEqual(t, etag, res.Header.Get("ETag"))
}

func TestHintsBadRequests(t *testing.T) {
	base := hintsProcessor(t, nil)
	tests := []struct {
		name, method, path string
		code               int
		says               string
	}{
		{"no service", http.MethodGet, ownership.HintsPath, http.StatusBadRequest, "the service query parameter is missing"},
		{"empty service", http.MethodGet, ownership.HintsPath + "?service=", http.StatusBadRequest, "the service query parameter is missing"},
		{"service too long", http.MethodGet, ownership.HintsPath + "?service=" + strings.Repeat("x", 300), http.StatusBadRequest, "longer than 255 bytes"},
		{"malformed escape", http.MethodGet, ownership.HintsPath + "?service=%zz", http.StatusBadRequest, "the query string is malformed"},
		{"NUL byte", http.MethodGet, ownership.HintsPath + "?service=%00", http.StatusBadRequest, "holds control characters"},
		{"NUL byte inside a name", http.MethodGet, ownership.HintsPath + "?service=check%00out", http.StatusBadRequest, "holds control characters"},
		{"invalid UTF-8", http.MethodGet, ownership.HintsPath + "?service=%ff", http.StatusBadRequest, "not valid UTF-8"},
		{"truncated UTF-8", http.MethodGet, ownership.HintsPath + "?service=caf%C3", http.StatusBadRequest, "not valid UTF-8"},
		{"line break", http.MethodGet, ownership.HintsPath + "?service=checkout%0D%0AX-Injected:%201", http.StatusBadRequest, "holds control characters"},
		{"escape character", http.MethodGet, ownership.HintsPath + "?service=%1B%5B31m", http.StatusBadRequest, "holds control characters"},
		{"DEL", http.MethodGet, ownership.HintsPath + "?service=checkout%7F", http.StatusBadRequest, "holds control characters"},
		{"C1 control", http.MethodGet, ownership.HintsPath + "?service=%C2%85", http.StatusBadRequest, "holds control characters"},
		{"service twice", http.MethodGet, ownership.HintsPath + "?service=checkout&service=payments", http.StatusBadRequest, "given more than once"},
		{"service twice, the same", http.MethodGet, ownership.HintsPath + "?service=checkout&service=checkout", http.StatusBadRequest, "given more than once"},
		{"service twice, once escaped", http.MethodGet, ownership.HintsPath + "?service=checkout&s%65rvice=payments", http.StatusBadRequest, "given more than once"},
		{"wrong method", http.MethodPost, ownership.HintsPath + "?service=checkout", http.StatusMethodNotAllowed, "use GET"},
		{"wrong path", http.MethodGet, "/v2/hints?service=checkout", http.StatusNotFound, "hints are at /v1/hints?service=NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, base+tt.path, nil)
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer res.Body.Close()
			assert.Equal(t, tt.code, res.StatusCode)
			var e map[string]string
			require.NoError(t, json.NewDecoder(res.Body).Decode(&e))
			assert.Contains(t, e["error"], tt.says)
		})
	}
}

// TestHintsReachTheHooks reads the endpoint with the hooks' own client: the
// edge learned fail-open from traffic is what the hooks see.
func TestHintsReachTheHooks(t *testing.T) {
	base := hintsProcessor(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := hints.New(base, "checkout")
	_, err := c.Refresh(ctx)
	require.NoError(t, err)
	assert.Equal(t, ownership.ModeFailOpen, c.Mode("POST /checkout", "recommendations", "GET /recommendations"))
	assert.Equal(t, ownership.ModeFailClose, c.Mode("POST /checkout", "payments", "POST /payments"))
	assert.Equal(t, ownership.ModeFailOpen, c.Mode("", "recommendations", ""), "by peer alone")
}

// TestHintsExtensionMisnamed: a hints_extension that names no extension,
// or another kind, fails Start with the fix.
func TestHintsExtensionMisnamed(t *testing.T) {
	other := component.MustNewID("health_check")
	tests := []struct {
		name string
		id   string
		host component.Host
		want string
	}{
		{"absent", "errorownership_hints", componenttest.NewNopHost(),
			"hints_extension: no extension errorownership_hints in this collector; configure it under extensions and list it in service.extensions"},
		{"another kind", "health_check", extensionHost{other: struct {
			component.StartFunc
			component.ShutdownFunc
		}{}},
			"hints_extension: health_check is not an errorownership_hints extension"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := componenttest.NewTelemetry()
			defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
			id := component.MustNewID(tc.id)
			proc, _ := newTestProcessor(t, tt, testConfig(func(c *Config) { c.HintsExtension = &id }), new(consumertest.TracesSink))
			require.EqualError(t, proc.Start(context.Background(), tc.host), tc.want)
			require.NoError(t, proc.Shutdown(context.Background()))
		})
	}
}

// BenchmarkHintsEndpoint loads the endpoint over loopback from 64
// keep-alive connections, the load generator in the same process:
//   - saturated: each connection sends its next request as soon as the last
//     answered; reports the requests per second the endpoint sustains;
//   - at-10k-rps: the connections share an offered load of 10,000 requests
//     per second for two seconds, each request sent at its scheduled time;
//     reports the rate achieved and the 99th percentile latency, measured
//     from the scheduled time so that a stall is not hidden.
//
// With wrk installed, two more load it from another process, on a core of
// its own when the benchmark runs pinned (make bench-hints):
//   - wrk: saturated, as fast as 64 connections go;
//   - wrk-10k: paced to about 10,000 requests per second.
//
// Targets: ≥ 10,000 requests/s with p99 ≤ 5 ms.
func BenchmarkHintsEndpoint(b *testing.B) {
	const conns = 64
	// The collector's own traces are off by default: the confighttp server
	// records no span per request, as in a default deployment.
	base := hintsProcessor(b, func(*Config) {}, withoutInternalTraces)
	url := base + ownership.HintsPath + "?service=checkout"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	get := func() {
		res, err := client.Get(url)
		if err != nil {
			b.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Errorf("status %d", res.StatusCode)
		}
	}

	b.Run("saturated", func(b *testing.B) {
		work := make(chan struct{}, conns)
		var wg sync.WaitGroup
		for range conns {
			wg.Go(func() {
				for range work {
					get()
				}
			})
		}
		b.ResetTimer()
		for range b.N {
			work <- struct{}{}
		}
		close(work)
		wg.Wait()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	})

	// wrk, when installed (apt-get install wrk), loads the endpoint from
	// another process, as a fleet of services would, over 64 connections
	// for three seconds, and reports its own rate and latency percentiles.
	// Started pinned (make bench-hints: taskset -c 0), the benchmark runs
	// wrk on a core of its own, so that the figures are the endpoint's and
	// not the load generator's.
	b.Run("wrk", func(b *testing.B) {
		path, err := exec.LookPath("wrk")
		if err != nil {
			b.Skip("wrk is not installed: apt-get install wrk")
		}
		var rate, p99 float64
		for range b.N {
			out, err := onAnotherCore(path, "-t1", "-c64", "-d3s", "--latency", url).CombinedOutput()
			require.NoError(b, err, "%s", out)
			rate, p99 = parseWrk(b, string(out))
		}
		b.ReportMetric(rate, "req/s")
		b.ReportMetric(p99, "p99-ms")
	})

	// wrk again, each connection pausing 6 ms after every answer, so that
	// the 64 connections offer about 10,000 requests a second: the latency
	// at that rate rather than at saturation.
	b.Run("wrk-10k", func(b *testing.B) {
		path, err := exec.LookPath("wrk")
		if err != nil {
			b.Skip("wrk is not installed: apt-get install wrk")
		}
		script := filepath.Join(b.TempDir(), "pace.lua")
		require.NoError(b, os.WriteFile(script, []byte("function delay() return 6 end\n"), 0o644))
		var rate, p99 float64
		for range b.N {
			out, err := onAnotherCore(path, "-t1", "-c64", "-d3s", "--latency", "-s", script, url).CombinedOutput()
			require.NoError(b, err, "%s", out)
			rate, p99 = parseWrk(b, string(out))
		}
		b.ReportMetric(rate, "req/s")
		b.ReportMetric(p99, "p99-ms")
	})

	b.Run("at-10k-rps", func(b *testing.B) {
		const rate, period = 10_000, 2 * time.Second
		interval := time.Second * conns / rate // per connection
		var p99, achieved float64
		for range b.N {
			latencies := make([][]time.Duration, conns)
			start := time.Now().Add(10 * time.Millisecond)
			var wg sync.WaitGroup
			for c := range conns {
				wg.Go(func() {
					// Connections start staggered so that requests spread evenly.
					for at := start.Add(interval * time.Duration(c) / conns); at.Before(start.Add(period)); at = at.Add(interval) {
						time.Sleep(time.Until(at))
						get()
						latencies[c] = append(latencies[c], time.Since(at))
					}
				})
			}
			wg.Wait()
			var all []time.Duration
			for _, l := range latencies {
				all = append(all, l...)
			}
			slices.Sort(all)
			p99 = float64(all[len(all)*99/100]) / float64(time.Millisecond)
			achieved = float64(len(all)) / time.Since(start).Seconds()
		}
		b.ReportMetric(achieved, "req/s")
		b.ReportMetric(p99, "p99-ms")
	})
}

// TestLearnedFailOpenEdgeTurnsUnclaimIntoClaim closes the loop: the
// processor learns from traffic that checkout tolerates recommendations
// failing; a checkout service with the hooks and the hints from this
// processor then claims an error of its own that happened while
// recommendations also failed (coincidental), where without the hints it
// would have unclaimed it (an unknown edge counts as fail-close).
func TestLearnedFailOpenEdgeTurnsUnclaimIntoClaim(t *testing.T) {
	tests := []struct {
		name  string
		hints func(t *testing.T) (base string)
	}{
		{"from the processor's own model", func(t *testing.T) string { return hintsProcessor(t, nil) }},
		{"from the model merged in PostgreSQL, by a replica that saw no traffic", func(t *testing.T) string {
			dsn := pgtest.Start(t).DSN()
			runProcessor(t, storeConfig(dsn), scenarioBatches(t, "coincidental"))
			base, _, _ := serveHints(t, storeConfig(dsn))
			return base
		}},
		{"from an extension reading the merged model, in a collector without the processor", func(t *testing.T) string {
			dsn := pgtest.Start(t).DSN()
			runProcessor(t, storeConfig(dsn), scenarioBatches(t, "coincidental"))
			// The store extension the hints extension names, as a
			// collector would start it first.
			stores := hostFor(t, testConfig(storeConfig(dsn, func(sc *store.Config) { sc.ModelRefresh = time.Second })))
			_, base := startHintsExtension(t, func(c *errorownershiphintsextension.Config) {
				for id := range stores {
					c.Store = errorownershipstoreextension.NewRef(id)
				}
			}, stores)
			return base
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { learnedFailOpenEdge(t, tt.hints(t)) })
	}
}

func learnedFailOpenEdge(t *testing.T, base string) {
	recommendations := httptest.NewServer(hookshttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "model server down", http.StatusInternalServerError)
	})))
	defer recommendations.Close()

	checkout := func(h hooks.HintSource) *httptest.Server {
		opts := []hookshttp.Option{
			hookshttp.WithPeerService(func(*http.Request) string { return "recommendations" }),
			hookshttp.WithPeerOperation(func(*http.Request) string { return "GET /recommendations" }),
		}
		if h != nil {
			opts = append(opts, hookshttp.WithHints(h))
		}
		client := &http.Client{Transport: hookshttp.Transport(http.DefaultTransport, opts...)}
		mux := http.NewServeMux()
		mux.HandleFunc("POST /checkout", func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, recommendations.URL+"/recommendations", nil)
			if res, err := client.Do(req); err == nil {
				res.Body.Close()
			}
			// Recommendations are optional; checkout fails for a reason of its own.
			http.Error(w, "cart total does not add up", http.StatusInternalServerError)
		})
		var mwOpts []hookshttp.Option
		if h != nil {
			mwOpts = append(mwOpts, hookshttp.WithHints(h))
		}
		return httptest.NewServer(hookshttp.Middleware(mux, mwOpts...))
	}
	claimOf := func(srv *httptest.Server) string {
		res, err := http.Post(srv.URL+"/checkout", "text/plain", nil)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusInternalServerError, res.StatusCode)
		return res.Header.Get("Error-Claim")
	}

	without := checkout(nil)
	defer without.Close()
	assert.Equal(t, "unclaimed", claimOf(without), "without hints the failed call counts as fail-close")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := hints.New(base, "checkout")
	_, err := h.Refresh(ctx)
	require.NoError(t, err)
	with := checkout(h)
	defer with.Close()
	assert.Equal(t, "claimed", claimOf(with), "the learned fail-open edge makes it coincidental")
}

// parseWrk reads the requests per second and the 99th percentile latency
// in milliseconds from wrk --latency output.
func parseWrk(tb testing.TB, out string) (rate, p99ms float64) {
	tb.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			_, err := fmt.Sscan(f[1], &rate)
			require.NoError(tb, err, line)
		case len(f) == 2 && f[0] == "99%":
			d, err := time.ParseDuration(f[1])
			require.NoError(tb, err, line)
			p99ms = float64(d) / float64(time.Millisecond)
		}
	}
	require.Positive(tb, rate, "wrk output:\n%s", out)
	return rate, p99ms
}

// onAnotherCore is the command, pinned with taskset to a core this process
// may not run on when there is one, so that a load generator does not share
// the endpoint's core; otherwise the bare command.
func onAnotherCore(name string, args ...string) *exec.Cmd {
	var mine unix.CPUSet
	taskset, err := exec.LookPath("taskset")
	if err != nil || unix.SchedGetaffinity(0, &mine) != nil {
		return exec.Command(name, args...) //nolint:gosec // G204: wrk, found on PATH by the benchmark itself
	}
	for cpu := range 1024 {
		if _, err := os.Stat(fmt.Sprintf("/sys/devices/system/cpu/cpu%d", cpu)); err != nil {
			break
		}
		if !mine.IsSet(cpu) {
			return exec.Command(taskset, append([]string{"-c", strconv.Itoa(cpu), name}, args...)...) //nolint:gosec // G204: taskset and wrk, found on PATH by the benchmark itself
		}
	}
	return exec.Command(name, args...) //nolint:gosec // G204: wrk, found on PATH by the benchmark itself
}

func withoutInternalTraces(set *processor.Settings) {
	set.TracerProvider = noop.NewTracerProvider()
}
