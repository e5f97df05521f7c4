// SPDX-License-Identifier: Apache-2.0

package store

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/errorownership/errorownership/store/pgtest"
)

func TestMigrateFromEmptyThenAgain(t *testing.T) {
	ctx := testContext(t)
	pool, err := pgxpool.New(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()

	want := SchemaVersionWanted()
	if want < 1 {
		t.Fatalf("SchemaVersionWanted() = %d; the embedded migrations are missing", want)
	}
	v, err := Migrate(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if v != want {
		t.Fatalf("Migrate from empty: version %d, want %d", v, want)
	}
	count := func() int64 {
		var n int64
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+MigrationsTable).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()

	// Again: a no-op.
	if v, err = Migrate(ctx, db); err != nil || v != want {
		t.Fatalf("Migrate again: version %d, %v; want %d, nil", v, err, want)
	}
	if after := count(); after != before {
		t.Fatalf("Migrate again recorded %d more migrations", after-before)
	}

	// Users can read the version with SQL.
	var version int64
	if err := pool.QueryRow(ctx, "SELECT version FROM schema_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != want {
		t.Fatalf("schema_version shows %d, want %d", version, want)
	}
	rows, err := pool.Query(ctx, "SELECT * FROM schema_version")
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	s, err := New(pool, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v != want {
		t.Fatalf("SchemaVersion() = %d, %v; want %d", v, err, want)
	}
	for _, table := range []string{"operation_stats", "claim_accuracy", "edge_stats", "depth_stats", "root_stats", "coincidental_audit", "flushes"} {
		var kind string
		if err := pool.QueryRow(ctx, "SELECT relkind::text FROM pg_class WHERE relname = $1", table).Scan(&kind); err != nil {
			t.Fatalf("table %s: %v", table, err)
		}
		if wantKind := "p"; table != "flushes" && kind != wantKind {
			t.Errorf("table %s has relkind %q, want %q (partitioned)", table, kind, wantKind)
		}
	}
}

// Replicas starting together migrate concurrently: the advisory lock lets
// one through at a time, and all end at the same version.
func TestMigrateConcurrently(t *testing.T) {
	ctx := testContext(t)
	dsn := pgtest.NewDatabase(t)
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() {
			pool, err := pgxpool.New(ctx, dsn)
			if err != nil {
				errs <- err
				return
			}
			defer pool.Close()
			db := stdlib.OpenDBFromPool(pool)
			defer db.Close()
			_, err = Migrate(ctx, db)
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestMigrateUpgradesAWrittenDatabase: a database written at version 1
// migrates to the newest version keeping its rows, the days it has get the
// new tables' partitions, and the migration reverts cleanly.
func TestMigrateUpgradesAWrittenDatabase(t *testing.T) {
	ctx := testContext(t)
	pool, err := pgxpool.New(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := newProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	day := "2026-11-20"
	for _, sql := range []string{
		"SELECT ensure_partitions('" + day + "')",
		`INSERT INTO edge_stats (bucket, service, operation, peer_service, peer_operation, calls, failed_calls)
		 VALUES ('` + day + ` 10:00Z', 'a', 'GET /a', 'b', 'GET /b', 10, 2)`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if v, err := Migrate(ctx, db); err != nil || v != SchemaVersionWanted() {
		t.Fatalf("Migrate: version %d, %v", v, err)
	}
	var calls, alone int64
	if err := pool.QueryRow(ctx, "SELECT calls, failed_alone FROM edge_stats").Scan(&calls, &alone); err != nil || calls != 10 || alone != 0 {
		t.Fatalf("the version-1 row after the upgrade: calls %d, failed_alone %d, %v", calls, alone, err)
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('address_stats_p20261120') IS NOT NULL").Scan(&exists); err != nil || !exists {
		t.Fatalf("address_stats has no partition for a day edge_stats has: %v", err)
	}
	if _, err := p.DownTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := Migrate(ctx, db); err != nil {
		t.Fatalf("up again after down: %v", err)
	}
}
