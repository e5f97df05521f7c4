// SPDX-License-Identifier: Apache-2.0

package store

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/store/pgtest"
)

// dropSchema drops the store's tables and functions under a running
// writer, as an operator cleaning up by hand might; withRecords drops
// goose's record of the migrations too.
func dropSchema(t testing.TB, s *Store, withRecords bool) {
	t.Helper()
	// Every table the schema has, as its own function lists them.
	tables := "partitioned_tables() || ARRAY['flushes']"
	if withRecords {
		tables = "partitioned_tables() || ARRAY['flushes', '" + MigrationsTable + "']"
	}
	for _, sql := range []string{
		"DO $$ BEGIN EXECUTE 'DROP TABLE ' || array_to_string(" + tables + ", ', ') || ' CASCADE'; END $$",
		"DROP FUNCTION edge_model, drop_partitions_before, ensure_partitions, partitioned_tables",
	} {
		if _, err := s.pool.Exec(testContext(t), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// schemaReady reports whether the schema's tables and functions exist.
func schemaReady(t testing.TB, s *Store) bool {
	t.Helper()
	return queryInt(t, s, "SELECT count(*) FROM pg_class WHERE relname = 'flushes'") == 1 &&
		queryInt(t, s, "SELECT count(*) FROM pg_proc WHERE proname = 'edge_model'") == 1
}

// migrationsLost reverts every migration after the first, records and
// all, as a restore from a backup taken before them would leave the
// database.
func migrationsLost(t testing.TB, s *Store) {
	t.Helper()
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := newProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	// Back to the first migration: the ones after it add the columns and
	// the table the writer writes (the last adds only indexes, which no
	// write misses).
	if _, err := p.DownTo(testContext(t), 1); err != nil {
		t.Fatal(err)
	}
}

// A schema dropped under a running writer is recreated by running the
// migrations again, if goose's records went with it; if they stayed, the
// migrations cannot restore it, and each flush is rejected after that one
// repair instead of being retried forever. A migration the database lost
// with its record (a column missing: 42703) is applied again likewise.
func TestSchemaDroppedUnderTheWriter(t *testing.T) {
	tests := []struct {
		name                      string
		lose                      func(t testing.TB, s *Store)
		recovers                  bool
		wantWritten, wantRejected uint64
		// wantServed is what the store holds once it recovered: the
		// flushes written since its tables were dropped, or all of them.
		wantServed int64
		wantLog    string
	}{
		{"with the migration records: recreated",
			func(t testing.TB, s *Store) { dropSchema(t, s, true) }, true, 3, 0, 2, "running the migrations again"},
		{"migration records kept: rejected, not retried forever",
			func(t testing.TB, s *Store) { dropSchema(t, s, false) }, false, 1, 2, 0, "drop " + MigrationsTable + " too"},
		{"migrations lost: applied again",
			migrationsLost, true, 3, 0, 3, "running the migrations again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			ctx := testContext(t)
			core, logs := observer.New(zap.InfoLevel)
			w := NewWriter(s, WithLogger(zap.New(core)))
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			w.Enqueue(tinyFlush(1, t0))
			waitFor(t, time.Minute, "the first flush", func() bool { return w.Stats().WrittenFlushes == 1 })

			tt.lose(t, s)
			w.Enqueue(tinyFlush(2, t0))
			w.Enqueue(tinyFlush(3, t0))
			if err := w.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			st := w.Stats()
			if st.WrittenFlushes != tt.wantWritten || st.RejectedFlushes != tt.wantRejected {
				t.Fatalf("written %d, rejected %d; want %d, %d (%+v)", st.WrittenFlushes, st.RejectedFlushes, tt.wantWritten, tt.wantRejected, st)
			}
			if ready := schemaReady(t, s); ready != tt.recovers {
				t.Errorf("schema ready %v, want %v", ready, tt.recovers)
			}
			if tt.recovers {
				wantInt(t, s, tt.wantServed, "served %d once the schema was restored", "SELECT sum(served) FROM operation_stats")
			}
			found := false
			for _, e := range logs.All() {
				found = found || strings.Contains(e.Message, tt.wantLog)
			}
			if !found {
				t.Errorf("no log line says %q; logged: %v", tt.wantLog, messages(logs))
			}
		})
	}
}

// The writer migrates a new database as soon as it starts, without waiting
// for a flush, and keeps trying while the database is down.
func TestWriterMigratesAtStart(t *testing.T) {
	tests := []struct {
		name string
		down bool // the database is down when the writer starts
	}{
		{"database up", false},
		{"database down at first", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			cluster := pgtest.Start(t)
			cfg := DefaultConfig()
			cfg.DSN = configopaque.String(cluster.DSN())
			s, err := Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			core, logs := observer.New(zap.InfoLevel)
			w := NewWriter(s, WithLogger(zap.New(core)))
			if tt.down {
				if err := cluster.Stop(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := w.Shutdown(ctx); err != nil {
					t.Error(err)
				}
			}()
			if tt.down {
				waitFor(t, time.Minute, "a failed migration to be logged", func() bool { return logs.Len() > 0 })
				if err := cluster.Start(ctx); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, 2*maxBackoff, "the schema", func() bool {
				v, err := s.SchemaVersion(ctx)
				return err == nil && v == SchemaVersionWanted()
			})
			if st := w.Stats(); st.WrittenFlushes != 0 || st.PendingFlushes != 0 {
				t.Fatalf("the schema came from a flush: %+v", st)
			}
			if tt.down {
				waitFor(t, time.Minute, "the recovery to be logged", func() bool {
					return logs.FilterMessageSnippet("again").Len() == 1
				})
			}
		})
	}
}

// A reader that comes before the writer migrated, or after the schema was
// dropped, gets an empty edge model, not an error.
func TestEdgesForMigratesTheSchema(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, s *Store)
	}{
		{"new database", func(*testing.T, *Store) {}},
		{"schema dropped with its records", func(t *testing.T, s *Store) {
			if _, err := s.Migrate(testContext(t)); err != nil {
				t.Fatal(err)
			}
			dropSchema(t, s, true)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			cfg := DefaultConfig()
			cfg.DSN = configopaque.String(pgtest.NewDatabase(t))
			s, err := Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tt.prepare(t, s)
			edges, err := s.EdgesFor(ctx, "checkout", t0.Add(-time.Hour), 10*time.Minute, dependencyanalysis.DefaultConfig().EdgeModel)
			if err != nil {
				t.Fatal(err)
			}
			if len(edges) != 0 || !schemaReady(t, s) {
				t.Fatalf("%d edges, schema ready %v; want none, and the schema", len(edges), schemaReady(t, s))
			}
		})
	}
}

func messages(logs *observer.ObservedLogs) []string {
	var out []string
	for _, e := range logs.All() {
		out = append(out, e.Message)
	}
	return out
}
