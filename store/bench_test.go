// SPDX-License-Identifier: Apache-2.0

package store

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// benchRows is how many aggregate rows one benchmark flush makes.
const benchRows = 100_000

// benchFlush returns a flush of benchRows distinct edges: 100 services ×
// 10 operations × 10 peers × 10 peer operations.
func benchFlush() Flush {
	b := newBuilder(nil)
	for i := range benchRows {
		e := b.edge(fmt.Sprintf("service-%02d", i/1000), fmt.Sprintf("operation-%d", i/100%10),
			fmt.Sprintf("peer-%d", i/10%10), fmt.Sprintf("peer-operation-%d", i%10))
		e.Calls, e.FailedCalls, e.Attempts, e.Retries = 100+uint64(i%7), uint64(i%5), 110, 10
		e.CallFailedRequestFailed, e.CallOKRequestFailed = uint64(i%3), 1
		e.Decisions[1], e.Decisions[2], e.Decisions[3] = 5, 3, 2
	}
	return b.flush("bench", 0, time.Time{})
}

// BenchmarkFlush writes one flush of 100,000 edge rows through the store
// (partitions, the flushes row, the bucket lock, COPY into a staging table
// and INSERT … SELECT into the bucket's partition) and, in the same run,
// the same rows with a plain pgx CopyFrom into an equivalent unpartitioned
// table with the same primary key and indexes, and reports the ratio store/raw (target
// ≤ 2). Each flush is its bucket's first, as with one collector flushing
// once a bucket; BenchmarkFlushMerge measures the flushes that merge.
func BenchmarkFlush(b *testing.B) { benchmarkFlush(b, false) }

// BenchmarkFlushMerge is BenchmarkFlush for a second collector's flush of
// the same 100,000 keys into a bucket already written: every row merges
// (INSERT … ON CONFLICT DO UPDATE).
func BenchmarkFlushMerge(b *testing.B) { benchmarkFlush(b, true) }

func benchmarkFlush(b *testing.B, merge bool) {
	s := newStore(b)
	ctx := testContext(b)
	// The raw table has edge_stats' indexes too, the readers' included, so
	// that the ratio is the flush's own cost and not the schema's.
	if _, err := s.pool.Exec(ctx, `CREATE TABLE edge_stats_raw (LIKE edge_stats INCLUDING DEFAULTS,
		PRIMARY KEY (bucket, service, operation, peer_service, peer_operation));
		CREATE INDEX ON edge_stats_raw (service, bucket)`); err != nil {
		b.Fatal(err)
	}
	f := benchFlush()
	// The raw rows are built outside the timing: the store's time includes
	// turning Stats into rows, the raw copy's does not.
	batch := s.newBatch(&f)
	edges := &batch.tables[tableEdges]
	raw := make([][]any, 0, len(edges.rows))
	src := edges.copySource(time.Time{}, batch.names)
	for src.Next() {
		row, _ := src.Values()
		raw = append(raw, slices.Clone(row))
	}
	cols := edges.spec.columnNames()

	base := time.Now().UTC().Truncate(24 * time.Hour)
	var storeTime, rawTime time.Duration
	n := 0
	for b.Loop() {
		bucket := base.Add(time.Duration(n) * time.Minute)
		n++
		if merge {
			// Another collector wrote the bucket first.
			first := f
			first.Instance, first.Seq, first.Bucket = "first", uint64(n), bucket
			if _, err := s.Write(ctx, first); err != nil {
				b.Fatal(err)
			}
		}
		f.Seq, f.Bucket = uint64(n), bucket
		start := time.Now()
		if _, err := s.Write(ctx, f); err != nil {
			b.Fatal(err)
		}
		storeTime += time.Since(start)

		for _, row := range raw {
			row[0] = bucket
		}
		start = time.Now()
		copied, err := s.pool.CopyFrom(ctx, pgx.Identifier{"edge_stats_raw"}, cols, pgx.CopyFromRows(raw))
		if err != nil {
			b.Fatal(err)
		}
		rawTime += time.Since(start)
		if copied != benchRows {
			b.Fatalf("copied %d rows, want %d", copied, benchRows)
		}
	}
	if got := queryInt(b, s, "SELECT count(*) FROM edge_stats"); got != int64(n*benchRows) {
		b.Fatalf("the store holds %d rows, want %d", got, n*benchRows)
	}
	if merge {
		if got := queryInt(b, s, "SELECT sum(attempts) FROM edge_stats"); got != int64(2*n*benchRows*110) {
			b.Fatalf("the store holds %d attempts, want %d", got, 2*n*benchRows*110)
		}
	}
	perStore, perRaw := storeTime/time.Duration(n), rawTime/time.Duration(n)
	b.ReportMetric(float64(perStore.Milliseconds()), "store-ms/flush")
	b.ReportMetric(float64(perRaw.Milliseconds()), "raw-copy-ms/flush")
	b.ReportMetric(float64(benchRows)/perStore.Seconds(), "store-rows/s")
	b.ReportMetric(storeTime.Seconds()/rawTime.Seconds(), "store/raw")
}
