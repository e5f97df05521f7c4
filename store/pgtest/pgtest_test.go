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
