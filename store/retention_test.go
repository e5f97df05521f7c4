// SPDX-License-Identifier: Apache-2.0

package store

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// partitions lists the partitions of the statistics and audit tables.
func partitions(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.pool.Query(testContext(t), `
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent::regclass::text = ANY (partitioned_tables()) ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

func day(t time.Time) string { return t.UTC().Format("20060102") }

func TestRetentionDropsOldPartitions(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	now := time.Now().UTC()
	old := []time.Time{now.Add(-40 * 24 * time.Hour), now.Add(-35 * 24 * time.Hour)}
	recent := []time.Time{now.Add(-24 * time.Hour), now}
	for i, at := range append(slices.Clone(old), recent...) {
		if _, err := s.Write(ctx, knownFlush("a", uint64(i), at)); err != nil {
			t.Fatal(err)
		}
	}
	wantInt(t, s, 4000, "served %d before retention", "SELECT sum(served) FROM operation_stats WHERE service = 'frontend'")
	// Every partitioned table has today's and tomorrow's partitions.
	for _, table := range []string{"operation_stats", "claim_accuracy", "edge_stats", "depth_stats", "root_stats", "coincidental_audit", "address_stats"} {
		for _, d := range []time.Time{now, now.Add(24 * time.Hour)} {
			if name := table + "_p" + day(d); !slices.Contains(partitions(t, s), name) {
				t.Fatalf("partition %s missing", name)
			}
		}
	}

	cutoff := now.Add(-30 * 24 * time.Hour)
	dropped, err := s.DropPartitionsBefore(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	// The old days and the days after them (created ahead of need), of
	// all eight tables (trace_stats since schema version 4).
	if len(dropped) != 8*4 {
		t.Fatalf("dropped %d partitions, want 32: %v", len(dropped), dropped)
	}
	left := partitions(t, s)
	for _, at := range old {
		for _, name := range left {
			if strings.HasSuffix(name, "_p"+day(at)) {
				t.Errorf("partition %s survived retention", name)
			}
		}
		if !slices.Contains(dropped, "operation_stats_p"+day(at)) {
			t.Errorf("operation_stats_p%s not reported dropped", day(at))
		}
	}
	wantInt(t, s, 2000, "served %d after retention (the recent flushes)", "SELECT sum(served) FROM operation_stats WHERE service = 'frontend'")
	wantInt(t, s, 6, "%d audit entries after retention", "SELECT count(*) FROM coincidental_audit")
	if got, err := s.DropPartitionsBefore(ctx, cutoff); err != nil || len(got) != 0 {
		t.Fatalf("dropping again: %v, %v; want nothing", got, err)
	}

	// Writing into a dropped day recreates its partitions (the store
	// forgets what it created when it drops).
	if _, err := s.Write(ctx, knownFlush("a", 100, old[0])); err != nil {
		t.Fatal(err)
	}
}

// The writer applies the retention itself, once an hour, starting after its
// first write.
func TestWriterAppliesRetention(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	old := time.Now().Add(-40 * 24 * time.Hour)
	if _, err := s.Write(ctx, knownFlush("old", 1, old)); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(s)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.Enqueue(tinyFlush(1, time.Now()))
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(partitions(t, s), "operation_stats_p"+day(old)) {
		t.Fatal("the writer left a partition older than the retention")
	}
	wantInt(t, s, 1, "served %d", "SELECT sum(served) FROM operation_stats")
}
