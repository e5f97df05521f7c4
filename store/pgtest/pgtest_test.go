// SPDX-License-Identifier: Apache-2.0

package pgtest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errorownership/errorownership/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func query(t *testing.T, dsn string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestStartStopRestart(t *testing.T) {
	c := pgtest.Start(t)
	if got := query(t, c.DSN()); got != "postgres" {
		t.Fatalf("database %q, want postgres", got)
	}
	ctx := context.Background()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.DSN())
	if err == nil {
		conn.Close(ctx)
		t.Fatal("connected to a stopped cluster")
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	query(t, c.DSN())
	dir := c.Dir()
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("cluster directory %s left behind: %v", dir, err)
	}
}

func TestNewDatabase(t *testing.T) {
	a, b := pgtest.NewDatabase(t), pgtest.NewDatabase(t)
	if a == b {
		t.Fatal("two tests share a database")
	}
	if query(t, a) == query(t, b) {
		t.Fatal("two tests share a database")
	}
}

func TestDSNHasNoPassword(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Password != "" {
		t.Fatalf("DSN %q carries a password", dsn)
	}
}

// TestKill: a killed cluster loses its connections and its transactions in
// flight, keeps what it committed durably, and starts again, recovering
// from the crash.
func TestKill(t *testing.T) {
	c := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// The cluster commits asynchronously; this session waits for the WAL,
	// so that its commits outlive a crash.
	for _, sql := range []string{
		"SET synchronous_commit = on",
		"CREATE TABLE kept (v text)",
		"INSERT INTO kept VALUES ('committed')",
		"BEGIN",
		"INSERT INTO kept VALUES ('in flight')",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if err := c.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Running() {
		t.Fatal("a killed cluster says it runs")
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err == nil {
		t.Fatal("the transaction in flight committed across the kill")
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := pgx.Connect(ctx, c.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close(context.Background())
	var rows []string
	r, err := after.Query(ctx, "SELECT v FROM kept ORDER BY v")
	if err == nil {
		rows, err = pgx.CollectRows(r, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0] != "committed" {
		t.Fatalf("after the crash the table holds %q, want only the committed row", rows)
	}
}
