// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/internal/portlock"
	"github.com/errorownership/errorownership/store"
)

// TestStoreErrors: what goes wrong with the database is said with the fix,
// and never with the password.
func TestStoreErrors(t *testing.T) {
	// A port nothing listens on: reserved and never bound, so no other test
	// process's server takes it.
	reserved, err := portlock.Reserve()
	require.NoError(t, err)
	t.Cleanup(reserved.Release)
	port := reserved.Number()
	unreachable := fmt.Sprintf("postgres://auditor:s3cret-pw@127.0.0.1:%d/errorownership?connect_timeout=5", port)

	older := fixtureDSN(t, fixtureBucket)
	execSQL(t, older, "DELETE FROM "+store.MigrationsTable+" WHERE version_id = $1", store.SchemaVersionWanted())
	newer := fixtureDSN(t, fixtureBucket)
	execSQL(t, newer, "INSERT INTO "+store.MigrationsTable+" (version_id, is_applied) VALUES ($1, true)", store.SchemaVersionWanted()+1)
	missing := store.MigrationsAfter(store.SchemaVersionWanted() - 1)
	require.Len(t, missing, 1)

	for _, tc := range []struct {
		name, dsn string
		want      []string
	}{
		{"unreachable", unreachable, []string{
			fmt.Sprintf("cannot reach the database (host=127.0.0.1 port=%d dbname=errorownership user=auditor)", port),
			"connect: connection refused",
			"with --dsn postgres://user@host:5432/dbname, or the PGHOST, PGPORT, PGDATABASE and PGUSER variables",
		}},
		{"unparseable", "postgres://auditor:s3cret-pw@127.0.0.1:notaport/db", []string{"--dsn: (unparseable dsn) cannot be parsed"}},
		{"no schema", pgtestEmptyDatabase(t), []string{"no errorownership schema", "Is this the collector's database?"}},
		{"older schema", older, []string{
			fmt.Sprintf("the schema is version %d, this code reads version %d: migration %s is missing", store.SchemaVersionWanted()-1, store.SchemaVersionWanted(), missing[0]),
			"starting the errorownership collector of this version with its store section pointing at this database",
		}},
		{"newer schema", newer, []string{fmt.Sprintf("the schema is version %d, newer than the version %d this code reads", store.SchemaVersionWanted()+1, store.SchemaVersionWanted()),
			"use the errorownership command of the collector's version"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, args := range [][]string{{"audit"}, {"hints", "checkout"}} {
				_, stderr, err := runCLI(t, append(args, "--dsn", tc.dsn, "--db-timeout", "20s")...)
				require.Error(t, err, args)
				for _, w := range tc.want {
					assert.Contains(t, err.Error(), w, args)
				}
				assert.NotContains(t, err.Error()+stderr, "s3cret-pw")
			}
		})
	}
}

func execSQL(t *testing.T, dsn, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(t, err, strings.SplitN(sql, " ", 2)[0])
}
