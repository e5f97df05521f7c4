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
