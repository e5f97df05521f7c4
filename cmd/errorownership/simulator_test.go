// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/errorownership/errorownership/cmd/errorownership/simulation"
	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
	"github.com/errorownership/errorownership/store/pgtest"
)

// TestAgainstTheSimulator fills PostgreSQL with a simulator run — real
// services on loopback, the real processor with a store and its hints
// endpoint — and checks the commands against it: hints says byte for byte
// what the endpoint says, and audit finds exactly the coincidental errors
// the simulator injected, by trace ID, in every format.
//
// The checkout scenario runs twice, as in the demo: once while the
// processor learns that checkout tolerates recommendations failing, then
// with the hints it learned, when every coincidental error is claimed and
// audited. The second run is the one audited.
func TestAgainstTheSimulator(t *testing.T) {
	pgtest.RequireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dsn := pgtest.NewDatabase(t)
	// One-second buckets, so that the audited run's window holds none of
	// the learning run's statistics; a decision_wait long enough that no
	// trace is analysed before all its spans came, even on a busy machine
	// (a trace analysed in parts names a callee by its address, an edge
	// with no mode yet, and its coincidental error would be missed).
	col, err := simulation.StartCollector(ctx, simulation.CollectorConfig{DSN: dsn, DecisionWait: 2 * time.Second,
		FlushInterval: time.Second, BudgetRatio: simulation.BudgetRatio, BudgetMin: 0, Bucket: time.Second})
	require.NoError(t, err)
	collectorUp := true
	defer func() {
		if collectorUp {
			_ = col.Shutdown(context.Background())
		}
	}()
	top := simulation.Checkout()
	cfg := simulation.RunConfig{Topology: top, Policy: simulation.Ownership, Route: "/checkout", HintsURL: col.HintsURL,
		OTLPEndpoint: col.OTLPEndpoint, Requests: 2000, Concurrency: 4, BudgetRatio: simulation.BudgetRatio, Seed: 7}
	learning, err := simulation.Run(ctx, cfg)
	require.NoError(t, err)
	waitForHint(t, ctx, col.HintsURL, "GET /checkout", learning.Addrs["recommendations"])
	// The audited run starts in a bucket after the learning run's last.
	waitWritten(t, ctx, dsn, "checkout", learning.Served["checkout"])
	time.Sleep(1100 * time.Millisecond)
	cfg.Hints, cfg.Addrs = true, learning.Addrs
	audited, err := simulation.Run(ctx, cfg)
	require.NoError(t, err)

	t.Run("hints agrees with the endpoint", func(t *testing.T) {
		for _, service := range []string{"checkout", "recommendations", "nobody"} {
			endpoint, cli := sameModel(t, ctx, col.HintsURL, dsn, service, false)
			assert.Equal(t, endpoint, cli, service)
			if service == "checkout" {
				assert.Contains(t, cli, `"peer_service":"recommendations"`)
				assert.Contains(t, cli, `"mode":"fail_open"`)
			}
		}
	})
	t.Run("hints --endpoint takes the ttl and budget the endpoint serves", func(t *testing.T) {
		endpoint, cli := sameModel(t, ctx, col.HintsURL, dsn, "checkout", true)
		assert.Equal(t, endpoint, cli)
		assert.Contains(t, cli, `"ttl_seconds":1`, "the simulator's extension serves ttl 1s; the flags' default is 30s")
		out, _, err := runCLI(t, "hints", "checkout", "--dsn", dsn, "--endpoint", col.HintsURL)
		require.NoError(t, err)
		assert.Contains(t, out, "ttl 1s, retry budget 10% of requests + 0 retries/s")
		_, _, err = runCLI(t, "hints", "checkout", "--dsn", dsn, "--endpoint", col.HintsURL, "--ttl", "5s")
		assert.ErrorContains(t, err, "--endpoint and --ttl both given")
	})

	collectorUp = false
	require.NoError(t, col.Shutdown(ctx), "the processor writes the last bucket")

	var want []string
	for id, tr := range audited.Truth {
		if tr.Coincidental(top, "checkout") {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	require.Greater(t, len(want), 10, "the run injected coincidental errors")
	window := []string{"--dsn", dsn, "--from", audited.Start.UTC().Truncate(time.Second).Format(time.RFC3339Nano),
		"--to", time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)}

	t.Run("audit finds the injected coincidental errors", func(t *testing.T) {
		for _, format := range []string{"table", "json", "csv"} {
			out, stderr, err := runCLI(t, append(window, "audit", "--view", "detail", "--limit", "0", "--format", format)...)
			require.NoError(t, err, stderr)
			var got []string
			switch format {
			case "table":
				got = tableColumn(t, out, "TRACE ID")
			case "json":
				var doc struct {
					Errors []auditErrorLine `json:"errors"`
				}
				require.NoError(t, json.Unmarshal([]byte(out), &doc))
				for _, e := range doc.Errors {
					got = append(got, e.TraceID)
					assert.Equal(t, "recommendations", e.Dependency)
					assert.Equal(t, "claimed", e.ClaimSent)
				}
			case "csv":
				rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
				require.NoError(t, err)
				for _, r := range rows[1:] {
					got = append(got, r[1])
				}
			}
			slices.Sort(got)
			assert.Equal(t, want, got, format)
		}

		// Grouped: the share of checkout's failed requests, every one of
		// which the run's driver saw answered with a server fault.
		out, stderr, err := runCLI(t, append(window, "audit", "--format", "json")...)
		require.NoError(t, err, stderr)
		var doc struct {
			Groups []auditGroupLine `json:"groups"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc))
		require.Len(t, doc.Groups, 1)
		g := doc.Groups[0]
		assert.Equal(t, "checkout", g.Service)
		assert.EqualValues(t, len(want), g.Coincidental)
		assert.EqualValues(t, len(want), g.ServiceCoincidental)
		assert.EqualValues(t, audited.RootFailed, g.ServiceFailed)
		require.NotNil(t, g.Share)
		assert.InDelta(t, float64(len(want))/float64(audited.RootFailed), *g.Share, 1e-12)
	})
}

// waitForHint waits until checkout's hints call its calls from op to the
// address fail-open, asked as its hooks ask.
func waitForHint(t *testing.T, ctx context.Context, base, op, addr string) {
	t.Helper()
	c := hints.New(base, "checkout")
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := c.Refresh(ctx); err == nil && c.Mode(op, addr, op) == ownership.ModeFailOpen {
			return
		}
		if time.Now().After(deadline) {
			h, _ := c.Hints()
			t.Fatalf("the hints did not learn checkout → recommendations is fail-open: %+v", h)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitWritten waits until the store counts served requests of service: a
// run's last traces are analysed decision_wait after their last span and
// written a flush later, later still on a busy machine.
func waitWritten(t *testing.T, ctx context.Context, dsn, service string, served int64) {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.DSN = configopaque.String(dsn)
	st, err := store.Open(ctx, cfg)
	require.NoError(t, err)
	defer st.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		amp, err := st.Amplification(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
		require.NoError(t, err)
		counted := int64(0)
		for _, a := range amp {
			if a.Service == service {
				counted = a.Seen.Served
			}
		}
		if counted == served {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store counts %d requests of %s, the run served %d", counted, service, served)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// generatedAt is the one field in which the endpoint's document and the
// command's may differ: each says when it read the model.
var generatedAt = regexp.MustCompile(`"generated_at":"[^"]*"`)

// sameModel returns the endpoint's document for service and the command's.
// The processor reads the store's model every second, so the endpoint
// serves what the store held up to a second earlier, while the last
// flushes still land: the two are compared once the endpoint has caught up
// with the store, and must then be equal byte for byte but for
// generated_at, when each side read the model, which the command's
// document takes from the endpoint's.
func sameModel(t *testing.T, ctx context.Context, base, dsn, service string, fromEndpoint bool) (endpoint, cli string) {
	t.Helper()
	fetch := func() string {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+ownership.HintsPath+"?service="+url.QueryEscape(service), nil)
		require.NoError(t, err)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode, string(b))
		return string(b)
	}
	args := []string{"hints", service, "--dsn", dsn, "--format", "json",
		// The simulator's collector: the hints extension's ttl 1s, a 10 % budget without a floor.
		"--ttl", "1s", "--retry-ratio", "0.1", "--min-retries-per-second", "0"}
	if fromEndpoint {
		args = []string{"hints", service, "--dsn", dsn, "--format", "json", "--endpoint", base}
	}
	if service == "nobody" {
		// The endpoint answers a service it never saw with no edges; the
		// command says there is no such service.
		_, _, err := runCLI(t, args...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `no service "nobody"`)
		return "", ""
	}
	for range 30 {
		out, stderr, err := runCLI(t, args...)
		require.NoError(t, err, stderr)
		require.True(t, strings.HasSuffix(out, "\n"), "one document, one line")
		time.Sleep(1500 * time.Millisecond) // the endpoint reads the model anew
		endpoint = fetch()
		cli = generatedAt.ReplaceAllString(strings.TrimSuffix(out, "\n"), generatedAt.FindString(endpoint))
		if cli == endpoint {
			break
		}
	}
	return endpoint, cli
}
