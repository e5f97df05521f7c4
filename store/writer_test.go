// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/errorownership/errorownership/store/pgtest"
)

// outageEnv overrides how long TestDatabaseOutage keeps the database down.
const outageEnv = "STORE_TEST_OUTAGE"

// outage returns the test outage: $STORE_TEST_OUTAGE, else the acceptance
// figure of 30 s in CI and 5 s elsewhere.
func outage(t *testing.T) time.Duration {
	if v := os.Getenv(outageEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", outageEnv, v, err)
		}
		return d
	}
	if pgtest.InCI() {
		return 30 * time.Second
	}
	return 5 * time.Second
}

// rowsPerTinyFlush is the row count of tinyFlush.
const rowsPerTinyFlush = 5

// tinyFlush serves one request and makes rowsPerTinyFlush rows, so that the
// totals count the flushes written.
func tinyFlush(seq uint64, at time.Time) Flush {
	b := newBuilder(nil)
	b.op("frontend", "GET /").Served = 1
	for i := range rowsPerTinyFlush - 1 {
		b.edge("frontend", "GET /", "backend", fmt.Sprint("op", i)).Calls = 1
	}
	return b.flush("test", seq, at)
}

// The database stops for a while during a run: everything within the queue
// bound is written when it returns; with a small bound, exactly what was
// dropped is counted and the totals are what was written.
func TestDatabaseOutage(t *testing.T) {
	down := outage(t)
	cluster := pgtest.Start(t)
	ctx := testContext(t)
	open := func(name string, maxRows int) *Store {
		dsn, err := cluster.CreateDatabase(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.MaxPendingRows = maxRows
		return openStore(t, dsn, cfg)
	}
	const smallBound = 10 * rowsPerTinyFlush
	stores := []*Store{open("unbounded", DefaultConfig().MaxPendingRows), open("small", smallBound)}
	var writers []*Writer
	for _, s := range stores {
		w := NewWriter(s)
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		writers = append(writers, w)
	}
	seq := uint64(0)
	enqueue := func() {
		seq++
		for _, w := range writers {
			w.Enqueue(tinyFlush(seq, time.Now()))
		}
	}
	drained := func(timeout time.Duration) {
		t.Helper()
		waitFor(t, timeout, "the writers to drain", func() bool {
			for _, w := range writers {
				if w.Stats().PendingFlushes > 0 {
					return false
				}
			}
			return true
		})
	}

	// Before: the database is up.
	for range 5 {
		enqueue()
	}
	drained(30 * time.Second)

	// The outage: flushes keep coming, ten a second.
	if err := cluster.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for time.Since(start) < down {
		enqueue()
		time.Sleep(100 * time.Millisecond)
	}
	if err := cluster.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("database down for %v; %d flushes enqueued in all", time.Since(start).Round(time.Millisecond), seq)
	enqueue()
	// Within one backoff (at most 30 s) of the database's return.
	drained(maxBackoff + 30*time.Second)

	total := int64(seq)
	for i, w := range writers {
		s, st := stores[i], w.Stats()
		t.Logf("%s: %+v", s.pool.Config().ConnConfig.Database, st)
		if st.Retries == 0 || st.LastError == nil {
			t.Errorf("writer %d never failed during the outage: %+v", i, st)
		}
		served := queryInt(t, s, "SELECT sum(served) FROM operation_stats")
		flushes := queryInt(t, s, "SELECT count(*) FROM flushes")
		dropped := int64(st.DroppedFlushes)
		if got := int64(st.WrittenFlushes + st.DuplicateFlushes); got != total-dropped {
			t.Errorf("writer %d wrote %d flushes, want %d enqueued - %d dropped", i, got, total, dropped)
		}
		if served != total-dropped || flushes != total-dropped {
			t.Errorf("writer %d: the database holds %d requests in %d flushes, want %d = %d enqueued - %d dropped", i, served, flushes, total-dropped, total, dropped)
		}
		if st.DroppedRows != st.DroppedFlushes*rowsPerTinyFlush {
			t.Errorf("writer %d: %d rows dropped in %d flushes, want %d a flush", i, st.DroppedRows, st.DroppedFlushes, rowsPerTinyFlush)
		}
		if newest := queryInt(t, s, "SELECT max(seq) FROM flushes"); newest != total {
			t.Errorf("writer %d: newest flush written %d, want %d: the bound drops the oldest", i, newest, total)
		}
		if err := w.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}
	if st := writers[0].Stats(); st.DroppedFlushes != 0 {
		t.Errorf("the unbounded writer dropped %d flushes", st.DroppedFlushes)
	}
	if st := writers[1].Stats(); st.DroppedFlushes == 0 {
		t.Errorf("the small bound dropped nothing: %+v", st)
	}
}

func TestQueueBoundDropsOldest(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DSN = "host=/nonexistent port=5432 dbname=x user=x"
	cfg.MaxPendingRows = 3 * rowsPerTinyFlush
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := NewWriter(s) // not started: everything stays queued
	for i := range 5 {
		w.Enqueue(tinyFlush(uint64(i+1), t0))
	}
	st := w.Stats()
	if st.PendingFlushes != 3 || st.PendingRows != 3*rowsPerTinyFlush || st.DroppedFlushes != 2 || st.DroppedRows != 2*rowsPerTinyFlush {
		t.Fatalf("stats %+v; want 3 flushes pending, 2 dropped", st)
	}
	var seqs []uint64
	for _, p := range w.queue[w.head:] {
		seqs = append(seqs, uint64(p.batch.seq))
	}
	if fmt.Sprint(seqs) != "[3 4 5]" {
		t.Fatalf("queued flushes %v, want the newest [3 4 5]", seqs)
	}

	// A flush larger than the bound by itself cannot be kept.
	big := newBuilder(nil)
	for i := range 4 * rowsPerTinyFlush {
		big.op("svc", fmt.Sprint(i)).Served = 1
	}
	w.Enqueue(big.flush("test", 99, t0))
	if st := w.Stats(); st.PendingFlushes != 3 || st.DroppedFlushes != 3 {
		t.Fatalf("after an oversized flush: %+v", st)
	}

	// Empty flushes are not worth a transaction.
	w.Enqueue(newBuilder(nil).flush("test", 100, t0))
	w.Enqueue(Flush{})
	if st := w.Stats(); st.PendingFlushes != 3 {
		t.Fatalf("empty flushes were queued: %+v", st)
	}
}

// The bound holds the flush being written too: while the database hangs
// on it, the rows held never exceed the bound, the oldest waiting flushes
// make room, and a flush that cannot fit beside the one being written is
// dropped itself.
func TestQueueBoundCountsTheFlushBeingWritten(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DSN = configopaque.String(fmt.Sprintf("host=127.0.0.1 port=%d dbname=x user=x sslmode=disable", pgtest.Unresponsive(t)))
	cfg.MaxPendingRows = 3 * rowsPerTinyFlush
	cfg.ShutdownTimeout = 100 * time.Millisecond
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := NewWriter(s)
	w.Enqueue(tinyFlush(1, t0))
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Shutdown(context.Background()) }() // it reports what it drops
	waitFor(t, time.Minute, "the first flush in flight", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.inflight != nil
	})
	for seq := uint64(2); seq <= 5; seq++ {
		w.Enqueue(tinyFlush(seq, t0))
		if st := w.Stats(); st.PendingRows > cfg.MaxPendingRows {
			t.Fatalf("after flush %d: %d rows held, bound %d (%+v)", seq, st.PendingRows, cfg.MaxPendingRows, st)
		}
	}
	w.mu.Lock()
	var seqs []uint64
	for _, p := range w.queue[w.head:] {
		seqs = append(seqs, uint64(p.batch.seq))
	}
	w.mu.Unlock()
	if st := w.Stats(); fmt.Sprint(seqs) != "[4 5]" || st.DroppedFlushes != 2 {
		t.Fatalf("waiting %v, dropped %d; want the newest [4 5] beside the flush being written, 2 dropped", seqs, st.DroppedFlushes)
	}
	big := newBuilder(nil)
	for i := range 3 * rowsPerTinyFlush {
		big.op("svc", fmt.Sprint(i)).Served = 1
	}
	w.Enqueue(big.flush("test", 99, t0)) // fits the bound alone, not beside flush 1
	if st := w.Stats(); st.PendingFlushes != 3 || st.DroppedFlushes != 3 {
		t.Fatalf("after a flush that cannot fit beside the one being written: %+v", st)
	}
}

// Shutdown with the database unreachable gives up when its context ends and
// reports what it could not write, without the password.
func TestShutdownReportsUnwritten(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DSN = "host=/nonexistent port=5432 dbname=stats user=collector password=hunter2"
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := NewWriter(s)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Enqueue(tinyFlush(1, t0))
	w.Enqueue(tinyFlush(2, t0))
	waitFor(t, 10*time.Second, "a failed attempt", func() bool { return w.Stats().Retries > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = w.Shutdown(ctx)
	if err == nil {
		t.Fatal("Shutdown reported nothing unwritten")
	}
	msg := err.Error()
	if !strings.Contains(msg, "2 flushes (10 rows) unwritten") || !strings.Contains(msg, "dbname=stats") {
		t.Fatalf("Shutdown error %q does not say what was left and where", msg)
	}
	if strings.Contains(msg, "hunter2") {
		t.Fatalf("Shutdown error shows the password: %q", msg)
	}
	if st := w.Stats(); st.DroppedFlushes != 2 || st.PendingFlushes != 0 {
		t.Fatalf("after Shutdown: %+v", st)
	}
	// After Shutdown, Enqueue still never blocks; it counts the loss.
	w.Enqueue(tinyFlush(3, t0))
	if st := w.Stats(); st.DroppedFlushes != 3 {
		t.Fatalf("Enqueue after Shutdown: %+v", st)
	}
}

func TestInstanceIDsDiffer(t *testing.T) {
	a, b := NewInstanceID(), NewInstanceID()
	if a == b || a == "" {
		t.Fatalf("NewInstanceID gave %q and %q", a, b)
	}
}

// A flush without an instance gets the writer's identity and sequence.
func TestEnqueueFillsIdentity(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	w := NewWriter(s)
	for range 3 {
		f := tinyFlush(0, t0)
		f.Instance = ""
		w.Enqueue(f)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wantInt(t, s, 3, "%d flushes under the writer's identity", "SELECT count(DISTINCT seq) FROM flushes WHERE instance = $1", w.instance)
}
