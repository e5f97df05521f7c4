// SPDX-License-Identifier: Apache-2.0

package store

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/errorownership/errorownership/dependencyanalysis"
)

func TestWriteTwiceCountsOnce(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	for i, wantDup := range []bool{false, true, true} {
		dup, err := s.Write(ctx, knownFlush("a", 7, t0))
		if err != nil {
			t.Fatal(err)
		}
		if dup != wantDup {
			t.Fatalf("write %d: duplicate %v, want %v", i, dup, wantDup)
		}
	}
	wantInt(t, s, 1000, "served %d (written once)", "SELECT sum(served) FROM operation_stats WHERE service = 'frontend'")
	wantInt(t, s, 3, "%d audit entries", "SELECT count(*) FROM coincidental_audit")
	wantInt(t, s, 18, "flushes.rows = %d", "SELECT rows FROM flushes WHERE instance = 'a' AND seq = 7")
	// The same sequence number of another instance is another flush.
	if dup, err := s.Write(ctx, knownFlush("b", 7, t0)); err != nil || dup {
		t.Fatalf("instance b: duplicate %v, %v", dup, err)
	}
	wantInt(t, s, 2000, "served %d", "SELECT sum(served) FROM operation_stats WHERE service = 'frontend'")
}

func TestBucketTruncation(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	// Flushes every 10 s land in the same one-minute bucket and sum there.
	for i := range 6 {
		if _, err := s.Write(ctx, knownFlush("a", uint64(i), t0.Add(time.Duration(i)*10*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	wantInt(t, s, 1, "%d buckets", "SELECT count(DISTINCT bucket) FROM operation_stats")
	wantInt(t, s, 6000, "served %d", "SELECT served FROM operation_stats WHERE service = 'frontend' AND bucket = $1", t0)
}

// The two ways rows go in (arrays, COPY through a staging table) and the
// two ways they land (plain insert into a fresh bucket, merge into a
// written one) give the same tables.
func TestCopyAndArraysAgree(t *testing.T) {
	ctx := testContext(t)
	viaArrays, viaCopy := newStore(t), newStore(t)
	viaCopy.copyThreshold = 1
	for _, s := range []*Store{viaArrays, viaCopy} {
		for i, instance := range []string{"a", "b", "a"} {
			if _, err := s.Write(ctx, knownFlush(instance, uint64(i), t0)); err != nil {
				t.Fatal(err)
			}
		}
		wantInt(t, s, 3000, "served %d", "SELECT served FROM operation_stats WHERE service = 'frontend'")
		wantInt(t, s, 2, "storm_radius_max %d (merged by maximum)", "SELECT storm_radius_max FROM root_stats")
	}
	got, want := dump(t, viaCopy), dump(t, viaArrays)
	for table := range want {
		if !reflect.DeepEqual(got[table], want[table]) {
			t.Errorf("table %s differs: %s", table, diffLines(got[table], want[table]))
		}
	}
}

// Rows that exist although no flush of their bucket was recorded (written
// by hand, say) make the first, plain insert fail; the retry merges.
func TestUnrecordedRowsAreMergedOnRetry(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	if err := s.EnsurePartitions(ctx, t0, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "INSERT INTO operation_stats (bucket, service, operation, served) VALUES ($1, 'frontend', 'GET /', 5)", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, knownFlush("a", 1, t0)); err == nil {
		t.Fatal("the plain insert over an existing row succeeded")
	}
	if dup, err := s.Write(ctx, knownFlush("a", 1, t0)); err != nil || dup {
		t.Fatalf("retry: duplicate %v, %v", dup, err)
	}
	wantInt(t, s, 1005, "served %d", "SELECT served FROM operation_stats WHERE service = 'frontend'")
}

// Names that PostgreSQL text cannot hold (invalid UTF-8, NUL) must not
// make a flush fail forever; an absent peer and a peer called "unknown"
// merge into one row instead of failing the upsert.
func TestUnstorableNamesAndCollidingKeys(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	b := newBuilder(nil)
	b.op("bad\xffname", "op\x00").Served = 3
	b.edge("a", "op", "", "x").Calls = 1
	b.edge("a", "op", "unknown", "x").Calls = 2
	if _, err := s.Write(ctx, b.flush("a", 1, t0)); err != nil {
		t.Fatal(err)
	}
	wantInt(t, s, 3, "served %d under the cleaned name", "SELECT served FROM operation_stats WHERE service = 'bad\uFFFDname' AND operation = 'op'")
	wantInt(t, s, 3, "calls %d", "SELECT calls FROM edge_stats WHERE peer_service = 'unknown'")
}

// Two collector instances writing overlapping buckets at the same time give
// the same tables as one writer writing the union of their figures.
func TestTwoWritersEqualOneWriterOfTheUnion(t *testing.T) {
	// Rows go in as arrays or, past the threshold, through COPY.
	for _, threshold := range []int{defaultCopyThreshold, 1} {
		t.Run(fmt.Sprint("copy from ", threshold, " rows"), func(t *testing.T) { testTwoWriters(t, threshold) })
	}
}

func testTwoWriters(t *testing.T, copyThreshold int) {
	ctx := testContext(t)
	merged := newStore(t)
	single := newStore(t)
	// The second instance writes through its own store (its own pool), as
	// a second collector would.
	other := openStore(t, string(merged.cfg.DSN), DefaultConfig())
	for _, s := range []*Store{merged, single, other} {
		s.copyThreshold = copyThreshold
	}

	const buckets = 6
	seedA := func(i int) uint64 { return uint64(1000 + i) }
	seedB := func(i int) uint64 { return uint64(2000 + i) }
	// Instance b's buckets overlap a's from the third on.
	bucketA := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	bucketB := func(i int) time.Time { return t0.Add(time.Duration(i+2) * time.Minute) }

	// Each instance has its own symbol table, interned in its own order.
	namesA, namesB := dependencyanalysis.NewSymbols(0), dependencyanalysis.NewSymbols(0)
	namesB.Intern("db")
	namesB.Intern("payments")

	wa, wb := NewWriter(merged), NewWriter(other)
	for _, w := range []*Writer{wa, wb} {
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, x := range []struct {
		w      *Writer
		name   string
		names  *dependencyanalysis.Symbols
		seed   func(int) uint64
		bucket func(int) time.Time
	}{{wa, "a", namesA, seedA, bucketA}, {wb, "b", namesB, seedB, bucketB}} {
		wg.Go(func() {
			for i := range buckets {
				b := newBuilder(x.names)
				randomStats(b, x.seed(i), x.bucket(i))
				x.w.Enqueue(b.flush(x.name, uint64(i), x.bucket(i).Add(17*time.Second)))
			}
		})
	}
	wg.Wait()
	for _, w := range []*Writer{wa, wb} {
		if err := w.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if st := w.Stats(); st.WrittenFlushes != buckets || st.DroppedFlushes != 0 || st.DuplicateFlushes != 0 {
			t.Fatalf("writer stats %+v", st)
		}
	}

	// One writer, the union: per bucket, both instances' figures merged.
	names := dependencyanalysis.NewSymbols(0)
	union := make(map[time.Time]*dependencyanalysis.Stats)
	add := func(seed uint64, bucket time.Time) {
		b := newBuilder(names)
		randomStats(b, seed, bucket)
		countedEstimates(b.s)
		if union[bucket] == nil {
			union[bucket] = dependencyanalysis.NewStats()
		}
		union[bucket].Merge(b.s)
	}
	for i := range buckets {
		add(seedA(i), bucketA(i))
		add(seedB(i), bucketB(i))
	}
	seq := uint64(0)
	for bucket, st := range union {
		seq++
		if _, err := single.Write(ctx, Flush{Instance: "union", Seq: seq, Bucket: bucket, Stats: st, Names: names}); err != nil {
			t.Fatal(err)
		}
	}

	got, want := dump(t, merged), dump(t, single)
	for table := range want {
		if len(want[table]) == 0 {
			t.Fatalf("table %s is empty: the test writes nothing there", table)
		}
		if !reflect.DeepEqual(got[table], want[table]) {
			t.Errorf("table %s differs: %s", table, diffLines(got[table], want[table]))
		}
	}
}

// diffLines describes how two sorted row dumps differ.
func diffLines(got, want []string) string {
	in := func(s []string) map[string]int {
		m := make(map[string]int)
		for _, x := range s {
			m[x]++
		}
		return m
	}
	g, w := in(got), in(want)
	var b strings.Builder
	fmt.Fprintf(&b, "%d rows, want %d", len(got), len(want))
	shown := 0
	for x, n := range g {
		if w[x] != n && shown < 5 {
			fmt.Fprintf(&b, "\n  unexpected: %s", x)
			shown++
		}
	}
	for x, n := range w {
		if g[x] != n && shown < 10 {
			fmt.Fprintf(&b, "\n  missing:    %s", x)
			shown++
		}
	}
	return b.String()
}
