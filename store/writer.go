package store

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Backoff between attempts at a failed write.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// retentionEvery is how often the writer drops expired partitions.
const retentionEvery = time.Hour

// WriterStats are a Writer's counters, for telemetry.
type WriterStats struct {
	// WrittenFlushes and WrittenRows count what the writer committed.
	WrittenFlushes, WrittenRows uint64
	// DuplicateFlushes counts flushes found written already: retries of a
	// flush whose earlier attempt committed although it seemed to fail.
	DuplicateFlushes uint64
	// Retries counts failed attempts that were tried again.
	Retries uint64
	// DroppedFlushes and DroppedRows count what the queue bound (or a
	// Shutdown deadline, or Enqueue after Shutdown) made the writer give up.
	DroppedFlushes, DroppedRows uint64
	// RejectedFlushes counts flushes the database refused as malformed
	// (SQLSTATE class 22), which no retry can write; they are not in
	// DroppedFlushes.
	RejectedFlushes uint64
	// NamesCut counts the names longer than MaxNameBytes that were cut
	// before they were written, once per flush that wrote them.
	NamesCut uint64
	// AuditDropped counts coincidental-error audit entries left out by
	// audit_per_service_per_minute or dated outside the retention window.
	AuditDropped uint64
	// PendingFlushes and PendingRows are queued or being written.
	PendingFlushes, PendingRows int
	// LastError is the most recent write, migration or retention error
	// (nil if none yet), at LastErrorTime; it stays after later writes
	// succeed. It names no password.
	LastError     error
	LastErrorTime time.Time
}

// pending is a queued flush.
type pending struct {
	f     Flush
	rows  int    // as counted at Enqueue; the queue bound uses it
	batch *batch // built on the first attempt and kept for the retries
}

// Writer writes flushes to a Store from its own goroutine, so that the
// pipeline never waits for the database: Enqueue only appends to a queue
// bounded by Config.MaxPendingRows, dropping (and counting) the oldest
// flushes beyond it. The goroutine writes the queue in order, each flush
// exactly once (Store.Write), retrying failures with exponential backoff
// from 100 ms to 30 s, so that it outlasts a database outage and catches up
// afterwards. It also migrates the schema before the first write and drops
// expired partitions every hour.
type Writer struct {
	store *Store
	cfg   Config

	// Test hooks.
	minBackoff, maxBackoff time.Duration

	mu         sync.Mutex
	queue      []*pending // queue[head:] waits; a ring would save little
	head       int
	queuedRows int
	inflight   *pending
	stats      WriterStats
	started    bool
	draining   bool
	stopped    bool
	instance   string
	seq        uint64
	audit      map[auditKey]int
	auditMin   int64 // oldest minute kept in audit

	wake   chan struct{}
	done   chan struct{}
	cancel context.CancelFunc
}

type auditKey struct {
	service string
	minute  int64
}

// NewWriter returns a writer to s. Start it; Enqueue may be called before.
func NewWriter(s *Store) *Writer {
	return &Writer{
		store:      s,
		cfg:        s.cfg,
		minBackoff: minBackoff,
		maxBackoff: maxBackoff,
		instance:   NewInstanceID(),
		audit:      make(map[auditKey]int),
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
}

// NewInstanceID returns a name for a collector instance that is unique per
// process lifetime: the host name and random bits. A flush is identified by
// its instance and sequence number, so a restarted collector that reused an
// instance name and restarted its sequence would see its flushes skipped.
func NewInstanceID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "collector"
	}
	var b [6]byte
	_, _ = crand.Read(b[:]) // cannot fail on supported systems
	return host + "-" + hex.EncodeToString(b[:])
}

// Start starts the writing goroutine. ctx is not retained: the goroutine
// runs until Shutdown.
func (w *Writer) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errors.New("store: writer started twice")
	}
	w.started = true
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel = cancel
	go w.run(runCtx)
	return nil
}

// Enqueue queues a flush for writing. It never blocks and never fails: if
// the queue would exceed Config.MaxPendingRows, the oldest waiting flushes
// are dropped and counted (a flush larger than the bound by itself is
// dropped too). Enqueue takes ownership of f.Stats. A flush with an empty
// Instance gets the writer's own identity and next sequence number.
func (w *Writer) Enqueue(f Flush) {
	if f.Stats == nil {
		return
	}
	if f.Bucket.IsZero() {
		f.Bucket = time.Now()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.limitAudit(&f)
	n := countRows(f.Stats)
	if n == 0 {
		return
	}
	if f.Instance == "" {
		w.seq++
		f.Instance, f.Seq = w.instance, w.seq
	}
	if w.stopped || n > w.cfg.MaxPendingRows {
		w.stats.DroppedFlushes++
		w.stats.DroppedRows += uint64(n)
		return
	}
	for w.queuedRows+n > w.cfg.MaxPendingRows && w.head < len(w.queue) {
		old := w.queue[w.head]
		w.queue[w.head] = nil
		w.head++
		w.queuedRows -= old.rows
		w.stats.DroppedFlushes++
		w.stats.DroppedRows += uint64(old.rows)
	}
	if w.head > len(w.queue)/2 {
		// Reclaim the dropped and written prefix now and then.
		w.queue = append(w.queue[:0], w.queue[w.head:]...)
		w.head = 0
	}
	w.queue = append(w.queue, &pending{f: f, rows: n})
	w.queuedRows += n
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// limitAudit drops the audit entries of f beyond the per-service, per-minute
// limit, counting the minute by the entries' own time. Call with mu held.
func (w *Writer) limitAudit(f *Flush) {
	limit := w.cfg.AuditPerServicePerMinute
	s := f.Stats
	if limit <= 0 || len(s.Audit) == 0 {
		return
	}
	kept := s.Audit[:0]
	newest := w.auditMin
	for _, e := range s.Audit {
		name := ""
		if f.Names != nil {
			name = f.Names.Name(e.Service)
		}
		k := auditKey{name, e.Time.AsTime().Unix() / 60}
		newest = max(newest, k.minute)
		if w.audit[k] >= limit {
			w.stats.AuditDropped++
			continue
		}
		w.audit[k]++
		kept = append(kept, e)
	}
	s.Audit = kept
	// Forget minutes well behind the newest: entries arrive a few minutes
	// late at most, and the map must not grow without bound.
	if newest-10 > w.auditMin {
		w.auditMin = newest - 10
		for k := range w.audit {
			if k.minute < w.auditMin {
				delete(w.audit, k)
			}
		}
	}
}

// Stats returns the writer's counters.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.stats
	st.PendingFlushes = len(w.queue) - w.head
	st.PendingRows = w.queuedRows
	if w.inflight != nil {
		st.PendingFlushes++
		st.PendingRows += w.inflight.rows
	}
	return st
}

// Shutdown writes what is pending until ctx ends, then stops the writer and
// reports what it could not write (counted as dropped). It does not close
// the Store.
func (w *Writer) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	if !w.started {
		w.started, w.stopped = true, true
		close(w.done)
	}
	w.draining = true
	cancel := w.cancel
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		if cancel != nil {
			cancel() // abandons the write in flight and the backoff
		}
		<-w.done
	}
	if cancel != nil {
		cancel()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	flushes, rows := len(w.queue)-w.head, w.queuedRows
	if w.inflight != nil {
		flushes++
		rows += w.inflight.rows
		w.inflight = nil
	}
	w.queue, w.head, w.queuedRows = nil, 0, 0
	if flushes == 0 {
		return nil
	}
	w.stats.DroppedFlushes += uint64(flushes)
	w.stats.DroppedRows += uint64(rows)
	return fmt.Errorf("store: shutdown left %d flushes (%d rows) unwritten to %s: %w (last error: %v)",
		flushes, rows, w.store, context.Cause(ctx), w.stats.LastError)
}

// next takes the oldest waiting flush, waiting for one; it returns nil when
// the writer drains and nothing is left, or ctx ends.
func (w *Writer) next(ctx context.Context) *pending {
	for {
		w.mu.Lock()
		if w.head < len(w.queue) {
			p := w.queue[w.head]
			w.queue[w.head] = nil
			w.head++
			w.queuedRows -= p.rows
			w.inflight = p
			w.mu.Unlock()
			return p
		}
		draining := w.draining
		w.mu.Unlock()
		if draining {
			return nil
		}
		select {
		case <-w.wake:
		case <-ctx.Done():
			return nil
		}
	}
}

func (w *Writer) run(ctx context.Context) {
	defer close(w.done)
	migrated := false
	var lastRetention time.Time
	backoff := time.Duration(0) // before jitter
	for {
		p := w.next(ctx)
		if p == nil {
			return
		}
		for {
			err := w.attempt(ctx, p, &migrated)
			if err == nil {
				backoff = 0
				break
			}
			if ctx.Err() != nil {
				return // Shutdown gave up; it counts the flush in flight
			}
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && len(pgErr.Code) == 5 && pgErr.Code[:2] == "22" {
				// A data exception will fail however often it is retried;
				// holding on to it would block every later flush.
				w.mu.Lock()
				w.stats.RejectedFlushes++
				w.inflight = nil
				w.mu.Unlock()
				break
			}
			w.mu.Lock()
			w.stats.Retries++
			w.mu.Unlock()
			backoff = min(max(2*backoff, w.minBackoff), w.maxBackoff)
			t := time.NewTimer(jitter(backoff))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		if w.cfg.Retention > 0 && migrated && time.Since(lastRetention) >= retentionEvery {
			// After a successful write, so the database is up. A failure
			// is reported and tried again in an hour.
			lastRetention = time.Now()
			rctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
			_, err := w.store.DropPartitionsBefore(rctx, time.Now().Add(-w.cfg.Retention))
			cancel()
			if err != nil {
				w.fail(err)
			}
		}
	}
}

// attempt makes one attempt at writing p, migrating the schema first if
// that is still to do.
func (w *Writer) attempt(ctx context.Context, p *pending, migrated *bool) error {
	actx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	if !*migrated {
		if _, err := w.store.Migrate(actx); err != nil {
			return w.fail(err)
		}
		*migrated = true
	}
	if p.batch == nil {
		p.batch = w.store.newBatch(&p.f)
		p.f.Stats = nil // the rows are all we need now
		if p.batch.auditDropped > 0 || p.batch.namesCut > 0 {
			w.mu.Lock()
			w.stats.AuditDropped += uint64(p.batch.auditDropped)
			w.stats.NamesCut += uint64(p.batch.namesCut)
			w.mu.Unlock()
		}
	}
	dup, err := w.store.write(actx, p.batch)
	if err != nil {
		return w.fail(err)
	}
	w.mu.Lock()
	if dup {
		w.stats.DuplicateFlushes++
	} else {
		w.stats.WrittenFlushes++
		w.stats.WrittenRows += uint64(p.batch.rows())
	}
	w.inflight = nil
	w.mu.Unlock()
	return nil
}

// fail records err as the last error and returns it.
func (w *Writer) fail(err error) error {
	w.mu.Lock()
	w.stats.LastError, w.stats.LastErrorTime = err, time.Now()
	w.mu.Unlock()
	return err
}

// jitter returns a random duration between half and all of d ("equal
// jitter"), so that replicas that lost the database together do not all
// come back at the same instant.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
