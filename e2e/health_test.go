// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/e2e/scaleout"
	"github.com/errorownership/errorownership/internal/testsupport/collectorproc"
	"github.com/errorownership/errorownership/store/pgtest"
)

// healthExtensions starts a config with health_check (%[1]s, readiness, as
// startConfigured waits for it) and healthcheckv2 (%[2]s), which shows each
// component's status, recoverable errors included.
const healthExtensions = `
extensions:
  health_check:
    endpoint: %[1]s
  healthcheckv2:
    use_v2: true
    component_health:
      include_recoverable_errors: true
      recovery_duration: 1s
    http:
      endpoint: %[2]s
      status:
        enabled: true
        path: /health/status
`

// healthConfig is a collector whose processor writes to a store and whose
// hints extension reads the merged model from it, as a hint server apart
// from the analysis would, with healthcheckv2 showing component status: %[1]s the
// health_check address (readiness, as startConfigured waits for it), %[2]s
// healthcheckv2's, %[3]s the OTLP/HTTP address, %[4]s the hints', %[5]s the
// store's DSN, %[6]s the telemetry section.
const healthConfig = healthExtensions + `  errorownership_store:
    dsn: '%[5]s'
    model_refresh: 1s
  errorownership_hints:
    endpoint: %[4]s
    store: errorownership_store
receivers:
  otlp:
    protocols:
      http:
        endpoint: %[3]s
processors:
  errorownership:
    decision_wait: 300ms
    flush_interval: 1s
    store: errorownership_store
exporters:
  debug:
    verbosity: basic
service:
  extensions: [health_check, healthcheckv2, errorownership_store, errorownership_hints]
%[6]s
  pipelines:
    traces:
      receivers: [otlp]
      processors: [errorownership]
      exporters: [debug]
`

// TestHealthShowsTheStore runs the built collector against a PostgreSQL
// server that checks passwords, with the wrong one in the DSN: a
// status-aware health check (healthcheckv2) reports the store's error
// within 10 s, and OK again once the role's password is changed to the one
// the collector sends, without a restart.
func TestHealthShowsTheStore(t *testing.T) {
	bin := buildCollector(t)
	cluster := pgtest.StartWith(t, pgtest.Options{ListenAddresses: "127.0.0.1", PasswordAuth: true})
	ctx := context.Background()
	require.NoError(t, cluster.Exec(ctx, "CREATE ROLE collector LOGIN PASSWORD 'not-the-one-configured'"))
	require.NoError(t, cluster.Exec(ctx, "CREATE DATABASE stats OWNER collector"))
	dsn := fmt.Sprintf("postgres://collector:%s@127.0.0.1:%d/stats?sslmode=disable", testPassword, cluster.Port())

	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", freePort(t)) }
	healthAddr, statusAddr, metricsPort := addr(), addr(), freePort(t)
	// verbose: each component's status besides the collector's.
	statusURL := "http://" + statusAddr + "/health/status?verbose"
	config := fmt.Sprintf(healthConfig, healthAddr, statusAddr, addr(), addr(), dsn, scaleout.TelemetrySection(metricsPort))
	started := time.Now()
	c := startConfigured(t, bin, config, healthAddr, fmt.Sprintf("127.0.0.1:%d", metricsPort))

	status := func() (int, string) {
		res, err := http.Get(statusURL) //nolint:gosec // G107: the status endpoint of the collector the test started
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body = status()
		return code != http.StatusOK && strings.Contains(body, "password authentication failed")
	}, 30*time.Second, 100*time.Millisecond, "the health check never showed the refused password; last %d %s", code, hideSecrets(body))
	shown := time.Since(started)
	t.Logf("the refused password shown after %v (collector started in %v): %d", shown.Round(time.Millisecond), c.Started().Sub(started).Round(time.Millisecond), code)
	require.Less(t, shown, 10*time.Second, "the store's error took more than 10 s to show")
	require.NotContains(t, body, testPassword, "the health check shows the password")
	for _, part := range []string{"writing statistics to the store", "reading the edge model from the store"} {
		require.Contains(t, body, part, "the processor's failing part is named")
	}
	// The hints go stale while no read succeeds: their model's age grows
	// from the start (the rules' ErrorOwnershipHintsStale pages on it).
	const modelAge = "otelcol_extension_errorownership_hints_model_age"
	age := func() float64 {
		v, err := c.Metric(modelAge)
		if err != nil {
			return -1
		}
		return v
	}
	stale := age()
	require.GreaterOrEqual(t, stale, 0.0, "the collector reports no %s", modelAge)
	require.Eventually(t, func() bool { return age() > stale+1 }, 10*time.Second, 200*time.Millisecond,
		"the hints' model age does not grow while the store refuses the password")

	// The operator fixes the role's password; the collector keeps running.
	conn, err := pgx.Connect(ctx, cluster.DSN())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "ALTER ROLE collector PASSWORD '"+testPassword+"'")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	fixed := time.Now()
	require.Eventually(t, func() bool {
		code, body = status()
		return code == http.StatusOK && !strings.Contains(body, "password authentication failed")
	}, time.Minute, 200*time.Millisecond, "the health check never recovered; last %d %s", code, hideSecrets(body))
	t.Logf("OK again %v after ALTER ROLE, without a restart", time.Since(fixed).Round(time.Millisecond))
	// model_refresh is 1s: once reads succeed the model is at most about a
	// second old, however long they failed.
	require.Eventually(t, func() bool { a := age(); return a > 0 && a < 3 }, 10*time.Second, 200*time.Millisecond,
		"the hints' model age stays high once the store is read again")
	require.True(t, c.Running(), "the collector restarted")
}

// TestStoreConfigRuns starts the built collector with
// testdata/otelcol-config-store.yaml as its header says, the DSN from
// ERROROWNERSHIP_DSN (only the ports moved, to free ones): it becomes
// healthy, serves hints, and writes what it analysed to the store.
func TestStoreConfigRuns(t *testing.T) {
	bin := buildCollector(t)
	dsn := pgtest.Start(t).DSN()
	t.Setenv("ERROROWNERSHIP_DSN", dsn)
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", freePort(t)) }
	status, hintsAddr, grpcAddr, httpAddr, metricsPort := addr(), addr(), addr(), addr(), freePort(t)
	ports := fmt.Sprintf(`yaml:
extensions:
  healthcheckv2:
    http:
      endpoint: %s
  errorownership_hints:
    endpoint: %s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
processors:
  errorownership:
    decision_wait: 300ms
    flush_interval: 1s
service:
%s
`, status, hintsAddr, grpcAddr, httpAddr, scaleout.TelemetrySection(metricsPort))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := collectorproc.Start(ctx, bin, collectorproc.Options{
		Name: "collector", Configs: []string{filepath.Join(repoRoot, "testdata", "otelcol-config-store.yaml"), ports},
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", metricsPort),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("collector log:\n%s", p.Log())
		}
	})
	get := func(url string) int {
		res, err := http.Get(url) //nolint:gosec // G107: the collector this test started, on loopback
		if err != nil {
			return 0
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	require.Eventually(t, func() bool { return get("http://"+status+"/health/status") == http.StatusOK },
		30*time.Second, 100*time.Millisecond, "healthcheckv2 never answered OK")
	c := &collector{Process: p, httpAddr: httpAddr}
	for _, td := range scenarioRequests(t, "coincidental") {
		c.post(t, td)
	}
	require.Eventually(t, func() bool { return get("http://"+hintsAddr+"/v1/hints?service=checkout") == http.StatusOK },
		30*time.Second, 100*time.Millisecond, "the hints were never served")
	_, err = p.Terminate(time.Minute)
	require.NoError(t, err)

	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var failed int
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT coalesce(sum(verdict_own + verdict_propagated + verdict_coincidental), 0) FROM operation_stats`).Scan(&failed))
	require.Positive(t, failed, "the store holds the verdicts of what the collector analysed")
}
