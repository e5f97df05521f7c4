// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store/pgtest"
)

// polyglotDir holds the chain's services (polyglot/README.md).
var polyglotDir = filepath.Join(repoRoot, "e2e", "polyglot")

// polyglotMissing names what `make hooks-deps` makes that is not there
// (its stamps, each written once what it stands for is made, and more),
// "" when all is.
func polyglotMissing(more ...string) string {
	for _, p := range append([]string{"node/node_modules/.deps", "java/target/.deps"}, more...) {
		if _, err := os.Stat(filepath.Join(polyglotDir, p)); err != nil {
			return p
		}
	}
	return ""
}

// startChainService starts a service of the chain with its language's
// zero-code instrumentation, exporting OTLP/HTTP to otlp, and waits until
// it says where it listens.
func startChainService(t *testing.T, name, otlp string, argv []string, env ...string) *appService {
	t.Helper()
	return startApp(t, name, otlp, argv, append([]string{
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_METRICS_EXPORTER=none",
		"OTEL_LOGS_EXPORTER=none", // the collector takes traces only
	}, env...)...)
}

// stopChainService ends a service of the chain with SIGTERM. A JVM, and a
// Python process without a handler, exit non-zero on it: what they
// exported is what counts.
func stopChainService(t *testing.T, s *appService) {
	t.Helper()
	if err := s.terminate(t); err != nil {
		if errors.Is(err, errDidNotStop) {
			t.Error(err)
			return
		}
		t.Logf("%s: %v", s.name, err)
	}
}

// chainCounts are what a service knows it did: requests served and, of
// those that failed, why.
type chainCounts struct {
	Served, Own, Propagated, Coincidental int64
}

func (s *appService) counters(t *testing.T) chainCounts {
	t.Helper()
	res, err := http.Get("http://" + s.addr + "/admin/counters")
	require.NoError(t, err)
	defer res.Body.Close()
	var c chainCounts
	require.NoError(t, json.NewDecoder(res.Body).Decode(&c))
	return c
}

func (s *appService) setRate(t *testing.T, rate float64) {
	t.Helper()
	res, err := http.Post(fmt.Sprintf("http://%s/admin/rate?value=%g", s.addr, rate), "text/plain", nil)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "%s: setting its failure rate", s.name)
}

// driveChain sends n root requests to the gateway from conc goroutines,
// ids from first+1.
func driveChain(t *testing.T, gateway string, n, conc, first int) {
	t.Helper()
	driveRoots(t, n, conc, func(i int) string { return fmt.Sprintf("http://%s/api/%d", gateway, first+i) }, nil)
}

// chainLaunch is how a run of the chain starts its Java, Node.js and
// Python services: each service's command line, and the environment beside
// the protocol's (polyglot/README.md) that each is given.
type chainLaunch struct {
	orders, catalog, python []string
	env                     []string
}

// TestPolyglotChain runs a chain of four languages (polyglot/README.md),
// each under its language's usual zero-code OpenTelemetry instrumentation
// and with the hooks of its language as a library, against the built
// collector with a store and the hints, wired as the README says, and
// compares the store's figures with what each service knows it did.
func TestPolyglotChain(t *testing.T) {
	if p := polyglotMissing("python/.venv/.deps"); p != "" {
		t.Fatalf("e2e/polyglot/%s is missing: run `make hooks-deps` (the hooks of each language, the Python venv, the Node.js packages, the Java classpath and agent)", p)
	}
	py := filepath.Join(polyglotDir, "python", ".venv", "bin")
	jdir := filepath.Join(polyglotDir, "java", "target")
	runPolyglotChain(t, chainLaunch{
		python:  []string{filepath.Join(py, "opentelemetry-instrument"), filepath.Join(py, "python"), filepath.Join(polyglotDir, "python", "library.py")},
		catalog: []string{"node", "--require", filepath.Join(polyglotDir, "node", "tracing.js"), filepath.Join(polyglotDir, "node", "library.js")},
		// As hooks-java/README.md says: the hooks make each attempt's CLIENT
		// span, so the agent's HttpClient instrumentation is off.
		orders: []string{"java", "-javaagent:" + filepath.Join(jdir, "opentelemetry-javaagent.jar"), "-Dotel.instrumentation.java-http-client.enabled=false",
			"-cp", filepath.Join(jdir, "classes") + ":" + chainClasspath(t, true), "e2e.Hooked"},
		// The library alone: the venv's editable install brings the
		// zero-code instrumentor too.
		env: []string{"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=errorownership"},
	})
}

// TestPolyglotChainZeroCode runs the chain of TestPolyglotChain with no
// hooks code in its Java, Node.js and Python services: each runs the same
// app without the library's wiring, under its language's zero-code
// instrumentation with the hooks switched on the zero-code way, installed
// from what users get (hooks-java/README.md, hooks-node/README.md,
// hooks-python/README.md): the Java agent with the hooks' extension jar, the
// auto-instrumentations' register beside the hooks' register from the packed
// tarball, opentelemetry-instrument with the hooks' wheel installed. The
// Go gateway keeps the Go hooks.
func TestPolyglotChainZeroCode(t *testing.T) {
	if p := polyglotMissing("python/.venv-zerocode/.deps", "../../hooks-java/agent/target/.deps"); p != "" {
		t.Fatalf("e2e/polyglot/%s is missing: run `make hooks-deps` (the hooks' wheel in a Python venv, the Node.js packages with the packed hooks, the Java classpath and agent, the hooks' agent extension)", p)
	}
	ext := filepath.Join(repoRoot, "hooks-java", "agent", "target", "errorownership-javaagent-extension-0.1.0.jar")
	py := filepath.Join(polyglotDir, "python", ".venv-zerocode", "bin")
	jdir := filepath.Join(polyglotDir, "java", "target")
	runPolyglotChain(t, chainLaunch{
		python: []string{filepath.Join(py, "opentelemetry-instrument"), filepath.Join(py, "python"), filepath.Join(polyglotDir, "python", "app.py")},
		// From the service's directory, as its README says, where the
		// packages resolve from its node_modules (the packed hooks').
		catalog: []string{"env", "-C", filepath.Join(polyglotDir, "node"), "node", "--require", "@opentelemetry/auto-instrumentations-node/register",
			"--require", "@errorownership/hooks/register", "app.js"},
		// The classpath without the hooks' jar: the app cannot load any of
		// them, only the extension's.
		orders: []string{"java", "-javaagent:" + filepath.Join(jdir, "opentelemetry-javaagent.jar"), "-Dotel.javaagent.extensions=" + ext,
			"-cp", filepath.Join(jdir, "classes") + ":" + chainClasspath(t, false), "e2e.Orders"},
	})
}

// chainClasspath is the Java service's classpath, as `make hooks-deps`
// wrote it, with or without the hooks' jar.
func chainClasspath(t *testing.T, hooks bool) string {
	t.Helper()
	cp, err := os.ReadFile(filepath.Join(polyglotDir, "java", "target", "classpath.txt")) //nolint:gosec // G304: the classpath `make hooks-deps` wrote
	require.NoError(t, err)
	var kept []string
	for _, e := range filepath.SplitList(strings.TrimSpace(string(cp))) {
		if hooks || !strings.Contains(filepath.ToSlash(e), "/io/github/errorownership/") {
			kept = append(kept, e)
		}
	}
	return strings.Join(kept, string(filepath.ListSeparator))
}

// runPolyglotChain runs the chain (polyglot/README.md) with its Java,
// Node.js and Python services started as launch says, and asserts what
// the hooks promise of it: no retry above the hop next to a failing
// service, catalog's coincidental errors sent claimed once learned, and
// the store's figures equal to the services' own counters.
func runPolyglotChain(t *testing.T, launch chainLaunch) {
	t.Helper()
	collectorBin := buildCollector(t)
	gatewayBin := filepath.Join(t.TempDir(), "gateway")
	out, err := exec.Command("go", "build", "-o", gatewayBin, "./polyglot/gateway").CombinedOutput() //nolint:gosec // G204: go build of the chain's Go service into t.TempDir
	require.NoError(t, err, "building the gateway:\n%s", out)

	dsn := pgtest.Start(t).DSN()
	hintsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	col := startCollectorWith(t, collectorBin, shopProcessor+shopStore, shopStoreExtension(dsn),
		extension{id: "errorownership_hints", config: fmt.Sprintf("    endpoint: %s\n    ttl: 2s\n    retry_budget:\n      ratio: 0.1\n      min_retries_per_second: 0", hintsAddr)})
	hintsURL := "http://" + hintsAddr
	otlp := col.httpAddr
	// The library variants read HINTS_URL, the zero-code hooks their
	// variable (conformance/vocabulary.yaml); each service gets both.
	common := append([]string{"HINTS_URL=" + hintsURL, ownership.EnvHintsEndpoint + "=" + hintsURL}, launch.env...)
	with := func(env ...string) []string { return append(append([]string{}, common...), env...) }

	stock := startChainService(t, "stock", otlp, launch.python, with("RATE=0.2")...)
	reviews := startChainService(t, "reviews", otlp, launch.python, with("RATE=0.4")...)
	catalog := startChainService(t, "catalog", otlp, launch.catalog,
		with("RATE=0.1", "NEXT=http://"+stock.addr+"/stock", "OPTIONAL=http://"+reviews.addr+"/reviews")...)
	orders := startChainService(t, "orders", otlp, launch.orders, with("NEXT=http://"+catalog.addr+"/catalog")...)
	gateway := startChainService(t, "gateway", otlp, []string{gatewayBin}, with("NEXT=http://"+orders.addr+"/orders")...)
	services := []*appService{gateway, orders, catalog, stock, reviews}

	// Learning: the collector learns the edges; catalog → reviews is
	// tolerated.
	driveChain(t, gateway.addr, 600, 8, 0)
	h := hints.New(hintsURL, "catalog")
	learned := func() bool {
		if _, err := h.Refresh(context.Background()); err != nil {
			return false
		}
		return h.Mode("", "reviews", "") == ownership.ModeFailOpen && h.Mode("", "stock", "") == ownership.ModeFailClose
	}
	if !assert.Eventually(t, learned, time.Minute, 200*time.Millisecond, "catalog's hints never learned reviews fail_open and stock fail_close") {
		doc, _ := h.Hints()
		t.Fatalf("catalog's hints: %+v", doc)
	}
	time.Sleep(3 * time.Second) // every hint client polls again (ttl 2s)

	// Measured: once learned, catalog claims its coincidental errors.
	measuredFrom := time.Now().UTC()
	catalogBefore := catalog.counters(t)
	driveChain(t, gateway.addr, 600, 8, 10_000)
	coincidental := catalog.counters(t).Coincidental - catalogBefore.Coincidental

	// Stock failing every time, once every budget's window (10 s) has
	// forgotten the measured phase: only catalog, next to it, retries.
	time.Sleep(11 * time.Second)
	before := map[string]chainCounts{}
	for _, s := range services {
		before[s.name] = s.counters(t)
	}
	stock.setRate(t, 1)
	const stormRoots = 300
	driveChain(t, gateway.addr, stormRoots, 8, 20_000)
	perRoot := map[string]float64{}
	for _, s := range services {
		perRoot[s.name] = float64(s.counters(t).Served-before[s.name].Served) / stormRoots
	}
	t.Logf("stock failing, requests served per root request: gateway %.2f, orders %.2f, catalog %.2f, stock %.2f",
		perRoot["gateway"], perRoot["orders"], perRoot["catalog"], perRoot["stock"])
	for _, name := range []string{"gateway", "orders", "catalog"} {
		assert.InDelta(t, 1.0, perRoot[name], 1e-9, "%s, above the hop next to the failing service: no retry", name)
	}
	assert.LessOrEqual(t, perRoot["stock"], 1.1+1e-9, "stock: catalog's retries, within its 10 %% budget")
	assert.Greater(t, perRoot["stock"], 1.0, "stock: catalog, next to it, retries its claimed errors")

	final := map[string]chainCounts{}
	for _, s := range services {
		final[s.name] = s.counters(t)
	}
	for _, s := range services {
		stopChainService(t, s)
	}
	time.Sleep(3 * time.Second) // decision_wait and a flush
	_, err = col.Terminate(time.Minute)
	require.NoError(t, err)

	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var audited, sentClaimed int64
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT count(*), count(*) FILTER (WHERE claim_sent = 'claimed') FROM coincidental_audit
		 WHERE service = 'catalog' AND time >= $1 AND time < $2`, measuredFrom, measuredFrom.Add(time.Hour)).Scan(&audited, &sentClaimed))
	t.Logf("measured phase: catalog counted %d coincidental failures; the store audited %d after it, %d of them sent claimed", coincidental, audited, sentClaimed)
	require.Positive(t, coincidental, "the measured phase has coincidental errors")
	assert.Equal(t, coincidental, audited, "the store audits every coincidental failure of catalog's")
	assert.Equal(t, audited, sentClaimed, "once learned, catalog sends its coincidental errors claimed")
	for _, s := range services {
		var got chainCounts
		require.NoError(t, conn.QueryRow(context.Background(),
			`SELECT coalesce(sum(served), 0), coalesce(sum(verdict_own), 0), coalesce(sum(verdict_propagated), 0), coalesce(sum(verdict_coincidental), 0)
			 FROM operation_stats WHERE service = $1 AND operation NOT LIKE '%admin%'`, s.name).Scan(&got.Served, &got.Own, &got.Propagated, &got.Coincidental))
		t.Logf("%s: the service counted %+v; the store holds %+v", s.name, final[s.name], got)
		assert.Equal(t, final[s.name], got, "%s: the store's figures against the service's own counters", s.name)

		// What each service's hooks sent on its failures: its own claimed,
		// those it passed on unclaimed, none without a claim.
		sent := map[string]int64{}
		rows, err := conn.Query(context.Background(),
			`SELECT verdict || '/' || claim_sent, sum(requests)::bigint FROM claim_accuracy
			 WHERE service = $1 AND operation NOT LIKE '%admin%' GROUP BY 1`, s.name)
		require.NoError(t, err)
		for rows.Next() {
			var cell string
			var n int64
			require.NoError(t, rows.Scan(&cell, &n))
			sent[cell] = n
		}
		require.NoError(t, rows.Err())
		t.Logf("%s: failed requests by verdict/claim sent: %v", s.name, sent)
		for cell, n := range sent {
			assert.Contains(t, []string{"own/claimed", "propagated/unclaimed", "coincidental/claimed", "coincidental/unclaimed"}, cell,
				"%s: %d failed requests %s, against the claim rules", s.name, n, cell)
		}
	}
}
