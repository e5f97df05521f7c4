// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/internal/testsupport/scenario"
	"github.com/errorownership/errorownership/store/pgtest"
)

// testPassword is in the DSN of every store these tests configure; it
// must appear in no log line and no test output.
const testPassword = "hunter2-e2e"

// shutdownTimeout is store.shutdown_timeout in these tests.
const shutdownTimeout = 2 * time.Second

// stopSlack is what the rest of the collector may take to stop besides the
// processor's bounded shutdown: receivers, exporters, extensions.
const stopSlack = 10 * time.Second

// decisionWait and flushInterval are the processor's in these tests.
const (
	decisionWait  = 300 * time.Millisecond
	flushInterval = time.Second
)

// storeProcessor is the errorownership section writing to the store
// (storeExtension).
var storeProcessor = fmt.Sprintf(`    decision_wait: %v
    flush_interval: %v
    store: errorownership_store`, decisionWait, flushInterval)

// storeExtension is the errorownership_store extension on dsn, with the
// tests' shutdown_timeout and the keys given (indented by four spaces).
func storeExtension(dsn string, keys ...string) extension {
	config := fmt.Sprintf("    dsn: '%s'\n    shutdown_timeout: %v", strings.ReplaceAll(dsn, "'", "''"), shutdownTimeout)
	for _, k := range keys {
		config += "\n" + k
	}
	return extension{id: "errorownership_store", config: config}
}

// storeCollector starts the collector with the errorownership section
// writing to dsn, and the extensions given.
func storeCollector(t *testing.T, bin, dsn string, extensions ...extension) *collector {
	t.Helper()
	return startCollectorWith(t, bin, storeProcessor, append([]extension{storeExtension(dsn)}, extensions...)...)
}

// sendTraces posts the chain scenario's traces over OTLP/HTTP, stamped
// with fresh IDs so that every call makes new traces.
func sendTraces(t *testing.T, c *collector, stamp uint32) {
	t.Helper()
	for _, td := range scenarioRequests(t, "chain_retry_every_hop") {
		scenario.Restamp(td, stamp)
		c.post(t, td)
	}
}

// checkLog fails the test unless the log holds every fragment, and if it
// shows the password (without printing it).
func checkLog(t *testing.T, log string, fragments ...string) {
	t.Helper()
	for _, f := range fragments {
		if !strings.Contains(log, f) {
			t.Errorf("the collector log does not say %q", f)
		}
	}
	if strings.Contains(log, testPassword) {
		t.Error("the collector log shows the password")
	}
}

// TestCollectorStopsWithTheDatabaseUnreachable: SIGTERM stops the real
// collector within store.shutdown_timeout (and the rest of its shutdown)
// while its database cannot be reached, a flush still unwritten; the log
// says what failed and what was dropped, never the password. The
// collector's own shutdown has no deadline: before the bound, it waited
// for the database for minutes.
func TestCollectorStopsWithTheDatabaseUnreachable(t *testing.T) {
	bin := buildCollector(t)
	tests := []struct {
		name string
		dsn  func(t *testing.T) string
		// ready says when the flush is stuck: a failed attempt, or, with a
		// database that never answers (each attempt waits for
		// write_timeout), rows waiting.
		ready      func(c *collector) bool
		logFailure bool
	}{
		{
			name: "nothing listening",
			dsn: func(t *testing.T) string {
				return fmt.Sprintf("postgres://collector:%s@127.0.0.1:%d/stats?sslmode=disable", testPassword, freePort(t))
			},
			ready: func(c *collector) bool {
				return c.metric(t, "otelcol_processor_errorownership_store_retries") > 0
			},
			logFailure: true,
		},
		{
			name: "a server that never answers",
			dsn: func(t *testing.T) string {
				return fmt.Sprintf("postgres://collector:%s@127.0.0.1:%d/stats?sslmode=disable", testPassword, pgtest.Unresponsive(t))
			},
			ready: func(c *collector) bool {
				return c.metric(t, "otelcol_processor_errorownership_store_rows_pending") > 0
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := storeCollector(t, bin, tt.dsn(t))
			sendTraces(t, c, 1)
			require.Eventually(t, func() bool { return tt.ready(c) }, time.Minute, 50*time.Millisecond, "a flush stuck on the database")
			took, log := terminate(t, c, time.Minute)
			if took > shutdownTimeout+stopSlack {
				t.Errorf("the collector took %v to stop, more than store.shutdown_timeout (%v) and %v for the rest", took, shutdownTimeout, stopSlack)
			}
			want := []string{"Shutdown left error-ownership statistics unwritten"}
			if tt.logFailure {
				want = append(want, "Cannot write error-ownership statistics to the store")
			}
			checkLog(t, log, want...)
		})
	}
}

// TestCollectorStopsWithTheSchemaDropped: the store's tables and functions
// are dropped in real PostgreSQL while the collector writes to it, and the
// collector gets SIGTERM with a bucket still to write. It stops within the
// bound: before, it retried the refused flush for ever. With goose's
// records dropped too, the migrations recreate the schema and the last
// bucket is written; with them kept, the migrations cannot, and the bucket
// is rejected after that one repair, the log saying what to do.
func TestCollectorStopsWithTheSchemaDropped(t *testing.T) {
	bin := buildCollector(t)
	cluster := pgtest.Start(t)
	tests := []struct {
		name        string
		withRecords bool
		log         []string
	}{
		{"with the migration records: recreated", true,
			[]string{"running the migrations again"}},
		{"migration records kept: rejected", false,
			[]string{"running the migrations again", "The database refused an error-ownership statistics flush",
				"drop errorownership_migrations too"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			dsn, err := cluster.CreateDatabase(ctx, fmt.Sprintf("schema_dropped_%d", i))
			require.NoError(t, err)
			c := storeCollector(t, bin, dsn+" password="+testPassword)
			sendTraces(t, c, 1)
			require.Eventually(t, func() bool {
				return c.metric(t, "otelcol_processor_errorownership_store_flushes", `outcome="written"`) >= 1
			}, time.Minute, 50*time.Millisecond, "a flush written")

			dropSchema(ctx, t, dsn, tt.withRecords)
			sendTraces(t, c, 2) // the bucket shutdown writes
			took, log := terminate(t, c, time.Minute)
			if took > shutdownTimeout+stopSlack {
				t.Errorf("the collector took %v to stop, more than store.shutdown_timeout (%v) and %v for the rest", took, shutdownTimeout, stopSlack)
			}
			checkLog(t, log, tt.log...)
			if strings.Contains(log, "Shutdown left error-ownership statistics unwritten") {
				t.Error("shutdown left the last bucket unwritten: it was neither written nor rejected")
			}
			if tt.withRecords {
				conn, err := pgx.Connect(ctx, dsn)
				require.NoError(t, err)
				defer conn.Close(ctx)
				var served int
				require.NoError(t, conn.QueryRow(ctx, "SELECT coalesce(sum(served), 0) FROM operation_stats").Scan(&served))
				require.Positive(t, served, "the last bucket, written into the recreated schema")
			}
		})
	}
}

// dropSchema drops the store's tables and functions, and goose's records
// of them if withRecords, as an operator cleaning up by hand might. A
// flush committing at the same moment may deadlock with the DROP, which
// is then tried again.
func dropSchema(ctx context.Context, t *testing.T, dsn string, withRecords bool) {
	t.Helper()
	// Every table the schema has, as its own function lists them.
	tables := `array_to_string(partitioned_tables() || ARRAY['flushes'], ', ')`
	if withRecords {
		tables = `array_to_string(partitioned_tables() || ARRAY['flushes', 'errorownership_migrations'], ', ')`
	}
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var last error
	for range 5 {
		last = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "DO $$ BEGIN EXECUTE 'DROP TABLE ' || "+tables+" || ' CASCADE'; END $$"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "DROP FUNCTION edge_model, drop_partitions_before, ensure_partitions, partitioned_tables")
			return err
		})
		if last == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("dropping the schema: %v", last)
}
