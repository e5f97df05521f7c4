// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/errorownership/errorownership/store"
	"github.com/errorownership/errorownership/store/pgtest"
)

// TestComposeStack runs what dashboards/docker-compose.yaml runs, without
// Docker: PostgreSQL prepared by the compose file's init script, the built
// collector with the compose file's configuration (its addresses and store
// from the environment, as the compose file sets them) and the simulator
// feeding it (dashboards/cmd/simfeed). The store fills with the chain's
// figures, the collector serves hints, and Grafana's database user can read
// every table the collector created after it was granted its rights.
func TestComposeStack(t *testing.T) {
	bin := buildCollector(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cluster := pgtest.Start(t)
	admin, err := pgx.Connect(ctx, cluster.DSN())
	require.NoError(t, err)
	defer admin.Close(ctx)
	// As the postgres image does with POSTGRES_USER (a superuser) and
	// POSTGRES_DB, then its init scripts, as that user.
	for _, sql := range []string{"CREATE ROLE errorownership SUPERUSER LOGIN", "CREATE DATABASE errorownership OWNER errorownership"} {
		_, err = admin.Exec(ctx, sql)
		require.NoError(t, err)
	}
	initSQL, err := os.ReadFile(filepath.Join(repoRoot, "dashboards", "compose", "initdb", "10-grafana-reader.sql"))
	require.NoError(t, err)
	asUser := func(user string) string {
		return strings.Replace(cluster.DSNFor("errorownership"), "user=postgres", "user="+user, 1)
	}
	owner, err := pgx.Connect(ctx, asUser("errorownership"))
	require.NoError(t, err)
	defer owner.Close(ctx)
	_, err = owner.PgConn().Exec(ctx, string(initSQL)).ReadAll()
	require.NoError(t, err)

	httpAddr, hintsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	healthAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	promAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	var log bytes.Buffer
	col := exec.Command(bin, "--config", filepath.Join(repoRoot, "dashboards", "compose", "otelcol.yaml")) //nolint:gosec // G204: the collector the test built, on the compose config
	col.Env = append(os.Environ(),
		"ERROROWNERSHIP_DSN="+asUser("errorownership"),
		"OTLP_GRPC_ENDPOINT="+fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"OTLP_HTTP_ENDPOINT="+httpAddr,
		"HINTS_ENDPOINT="+hintsAddr,
		"HEALTH_ENDPOINT="+healthAddr,
		"METRICS_HOST=127.0.0.1",
		fmt.Sprintf("METRICS_PORT=%d", freePort(t)),
		"PROMETHEUS_ENDPOINT="+promAddr,
	)
	col.Stdout, col.Stderr = &log, &log
	require.NoError(t, col.Start())
	defer func() {
		_ = col.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- col.Wait() }()
		select {
		case err := <-done:
			assert.NoError(t, err, "the collector's exit")
		case <-time.After(30 * time.Second):
			_ = col.Process.Kill()
			t.Error("the collector did not stop within 30s of SIGINT")
		}
		if t.Failed() {
			t.Logf("collector log:\n%s", log.String())
		}
	}()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + healthAddr + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "the health check never answered 200")

	feed := filepath.Join(t.TempDir(), "simfeed")
	build := exec.Command("go", "build", "-o", feed, "./dashboards/cmd/simfeed") //nolint:gosec // G204: go build of the repository's simfeed into t.TempDir
	build.Dir = repoRoot
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.CommandContext(ctx, feed, "--otlp", "http://"+httpAddr+"/v1/traces", "--hints", "http://"+hintsAddr, //nolint:gosec // G204: the simfeed the test just built, on its own addresses
		"--rounds", "2", "--requests", "30", "--pause", "0s").CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("simfeed:\n%s", out)

	sc := store.DefaultConfig()
	sc.DSN = configopaque.String(asUser("grafana"))
	reader, err := store.Open(ctx, sc)
	require.NoError(t, err)
	defer reader.Close()
	// Retry every hop: D, three hops below the root, serves eight times
	// the root requests (docs/design.md §1); the collector flushes every 10s.
	var perRoot float64
	require.Eventually(t, func() bool {
		rows, err := reader.ServedPerRoot(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Minute))
		if err != nil {
			return false
		}
		perRoot = 0
		for _, r := range rows {
			if r.RootOperation == "GET /chain/retry_every_hop" && r.Service == "d" {
				perRoot = r.PerRoot
			}
		}
		return perRoot > 0
	}, time.Minute, time.Second, "the store never had the chain's figures")
	assert.InDelta(t, 8, perRoot, 0.5, "requests d served per root request under retry every hop")

	// The connector beside the processor: its metrics, as Prometheus
	// would scrape them, have the chain too.
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + promAddr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return err == nil && strings.Contains(string(body), `errorownership_root_served_total{errorownership_depth="3",errorownership_root_operation="GET /chain/retry_every_hop",errorownership_root_service="a"`)
	}, time.Minute, time.Second, "the collector's prometheus exporter never had the chain's figures")

	resp, err := http.Get("http://" + hintsAddr + "/v1/hints?service=checkout")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "hints for checkout")

	grafana, err := pgx.Connect(ctx, string(sc.DSN))
	require.NoError(t, err)
	defer grafana.Close(ctx)
	for _, table := range []string{"operation_stats", "claim_accuracy", "edge_stats", "address_stats", "depth_stats", "root_stats", "coincidental_audit", "schema_version"} {
		var n int64
		assert.NoError(t, grafana.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n), "grafana reads %s", table)
	}
	var n int64
	assert.NoError(t, grafana.QueryRow(ctx, "SELECT count(*) FROM edge_model(now() - interval '1 hour', interval '10 minutes')").Scan(&n), "grafana reads edge_model()")
	_, err = grafana.Exec(ctx, "DELETE FROM operation_stats")
	assert.Error(t, err, "grafana's user may delete")
}
