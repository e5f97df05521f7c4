// SPDX-License-Identifier: Apache-2.0

package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/store/pgtest"
)

// A flush the database can never accept is dropped and counted, and the
// flushes behind it are written: the queue never jams.
func TestWriterNeverJams(t *testing.T) {
	long := "SELECT " + incompressible(8<<10)
	tests := []struct {
		name string
		// maxName is the name bound; 0 keeps MaxNameBytes.
		maxName                int
		wantWritten, wantCut   uint64
		wantRejected           uint64
		wantStoredOperationLen int
	}{
		{
			name:        "an 8 KB name is cut and written",
			wantWritten: 2, wantCut: 1,
			wantStoredOperationLen: MaxNameBytes,
		},
		{
			// Without the cut the name reaches the database, which cannot
			// index it (54000, program limit exceeded).
			name:         "an 8 KB name the database refuses is rejected",
			maxName:      1 << 20,
			wantWritten:  1,
			wantRejected: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			if tt.maxName != 0 {
				s.maxName = tt.maxName
			}
			ctx := testContext(t)
			w := NewWriter(s)
			w.Enqueue(longNameFlush(1, long))
			w.Enqueue(tinyFlush(2, t0))
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			waitFor(t, time.Minute, "both flushes to be dealt with", func() bool { return w.Stats().PendingFlushes == 0 })
			if err := w.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			st := w.Stats()
			if st.WrittenFlushes != tt.wantWritten || st.RejectedFlushes != tt.wantRejected || st.NamesCut != tt.wantCut {
				t.Fatalf("written %d, rejected %d, names cut %d; want %d, %d, %d",
					st.WrittenFlushes, st.RejectedFlushes, st.NamesCut, tt.wantWritten, tt.wantRejected, tt.wantCut)
			}
			if tt.wantRejected > 0 && !strings.Contains(st.LastError.Error(), "SQLSTATE 54000") {
				t.Errorf("last error %v, want the index limit (54000)", st.LastError)
			}
			wantInt(t, s, 1, "the good flush behind: served %d", "SELECT served FROM operation_stats WHERE service = 'frontend'")
			wantInt(t, s, int64(tt.wantStoredOperationLen), "stored operation name of %d bytes", "SELECT max(octet_length(operation)) FROM operation_stats WHERE service = 'db-client'")
		})
	}
}

func TestClassify(t *testing.T) {
	pg := func(code string) error {
		return fmt.Errorf("store: writing the flush's rows: %w", &pgconn.PgError{Code: code})
	}
	tests := []struct {
		name          string
		err           error
		wantNeed      repair
		wantPermanent bool
	}{
		{"connection refused", errors.New("failed to connect: dial error: connection refused"), 0, false},
		{"admin shutdown", pg("57P01"), 0, false},
		{"deadlock", pg("40P01"), 0, false},
		{"disk full", pg("53100"), 0, false},
		{"read-only standby after a failover", pg("25006"), 0, false},
		{"untranslatable character", pg("22P05"), 0, true},
		{"NUL in text", pg("22021"), 0, true},
		{"index row too large", pg("54000"), 0, true},
		{"insufficient privilege, from no file", pg("42501"), 0, true},
		{"syntax error", pg("42601"), 0, true},
		{"not null violation", pg("23502"), 0, true},
		{"unique violation: merge", pg("23505"), repairMerge, true},
		{"check violation: create the partitions", pg("23514"), repairPartitions, true},
		{"undefined table: migrate", pg("42P01"), repairSchema, true},
		{"undefined function: migrate", pg("42883"), repairSchema, true},
		{"undefined column: migrate", pg("42703"), repairSchema, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, need, permanent := classify(tt.err)
			if need != tt.wantNeed || permanent != tt.wantPermanent {
				t.Fatalf("classify = repair %b, permanent %v; want %b, %v", need, permanent, tt.wantNeed, tt.wantPermanent)
			}
		})
	}
}

// TestClassifyTellsAFileFromAGrant: PostgreSQL answers a write its own
// files refuse (a data disk remounted read-only, a directory it may not
// write to) and a missing grant with the same 42501. The first is retried,
// since the disk is repaired; the second is rejected, since retrying it
// changes nothing. Both errors here are the server's own.
func TestClassifyTellsAFileFromAGrant(t *testing.T) {
	ctx := testContext(t)
	c := pgtest.Start(t)
	dir, err := os.MkdirTemp("", "store-readonly-") //nolint:usetesting // t.TempDir's parent is private to us; the server's user must enter this one
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, c.Chown(dir))
	admin, err := pgx.Connect(ctx, c.DSN())
	require.NoError(t, err)
	defer admin.Close(ctx)
	for _, sql := range []string{
		"CREATE TABLESPACE readonly LOCATION '" + dir + "'",
		"CREATE ROLE outsider LOGIN",
		"CREATE TABLE secret (x int)",
	} {
		_, err := admin.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return os.Chmod(path, 0o500) //nolint:gosec // G302: a directory, made read-only for its owner, the server
	}))
	_, fileErr := admin.Exec(ctx, "CREATE TABLE stats_elsewhere (x int) TABLESPACE readonly")

	outsider, err := pgx.Connect(ctx, c.DSN()+" user=outsider")
	require.NoError(t, err)
	defer outsider.Close(ctx)
	_, grantErr := outsider.Exec(ctx, "SELECT x FROM secret")

	for _, tt := range []struct {
		name          string
		err           error
		wantPermanent bool
	}{
		{"a file the server may not write", fileErr, false},
		{"a missing grant", grantErr, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, permanent := classify(tt.err)
			require.Equal(t, codeInsufficientPrivilege, code, "%v", tt.err)
			require.Equal(t, tt.wantPermanent, permanent, "%v", tt.err)
		})
	}
}
