// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// migrationFS holds the schema, one goose SQL file per version.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// MigrationsTable is where goose records the applied schema versions. It is
// not goose's default name, so that the store can share a database with
// another application that uses goose.
const MigrationsTable = "errorownership_migrations"

// migrationLockID keys the advisory lock that serialises replicas migrating
// at once ("errorownership" as a number, distinct from goose's default).
const migrationLockID = 0x65_72_72_6f_77_6e

// Migrate applies the schema migrations db lacks and returns the schema
// version. Applying them again is a no-op. Collector replicas may migrate
// concurrently: an advisory lock lets one at a time through. db must use a
// PostgreSQL driver, such as github.com/jackc/pgx/v5/stdlib.
func Migrate(ctx context.Context, db *sql.DB) (int64, error) {
	p, err := newProvider(db)
	if err != nil {
		return 0, err
	}
	if _, err := p.Up(ctx); err != nil {
		return 0, fmt.Errorf("store: migrating the schema: %w", err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: reading the schema version: %w", err)
	}
	return v, nil
}

// SchemaVersionWanted returns the newest schema version this code knows:
// the number that prefixes the newest migration file.
func SchemaVersionWanted() int64 {
	names, _ := fs.Glob(migrationFS, "migrations/*.sql")
	var v int64
	for _, name := range names {
		n, err := strconv.ParseInt(strings.SplitN(path.Base(name), "_", 2)[0], 10, 64)
		if err == nil {
			v = max(v, n)
		}
	}
	return v
}

func newProvider(db *sql.DB) (*goose.Provider, error) {
	fsys, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	opts := []goose.ProviderOption{
		goose.WithTableName(MigrationsTable),
		// Another package's goose.AddMigration must not leak into ours.
		goose.WithDisableGlobalRegistry(true),
	}
	{
		// Probe the lock every second for up to five minutes: a replica
		// that starts while another migrates waits for it.
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID), lock.WithLockTimeout(1, 300))
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("store: loading the migrations: %w", err)
	}
	return p, nil
}
