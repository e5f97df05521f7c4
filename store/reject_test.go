package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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
		{"insufficient privilege", pg("42501"), 0, true},
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
