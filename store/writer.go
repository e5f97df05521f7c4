// SPDX-License-Identifier: Apache-2.0

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
	"go.uber.org/zap"
)

// Backoff between attempts at a failed write.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// retentionEvery is how often the writer drops expired partitions.
const retentionEvery = time.Hour

// logEvery is how often, at most, the writer logs that writes keep failing
// (and, separately, that flushes keep being rejected): a database down for
// an hour must not fill the log with a line per attempt.
const logEvery = time.Minute

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
	// Shutdown deadline, or Enqueue after Shutdown) made the writer give
	// up, and the corrections of flushes so lost or rejected, which
	// would take away what was never added (ErrCorrectsUnwritten).
	DroppedFlushes, DroppedRows uint64
	// RejectedFlushes counts flushes the database refused with an error no
	// retry can fix: SQLSTATE class 22 (data exception), 23 (integrity
	// constraint violation), 42 (syntax error or access rule violation) or
	// 54 (program limit exceeded), once the repairs the writer knows were
	// tried (see Writer). Their rows are not written, and are in neither
	// DroppedFlushes nor DroppedRows.
	RejectedFlushes uint64
	// RejectedRows counts the rows of the rejected flushes.
	RejectedRows uint64
	// NamesCut counts the names longer than MaxNameBytes that were cut
	// before they were written, once per flush that wrote them.
	NamesCut uint64
	// AuditDropped counts coincidental-error audit entries left out
	// because they were dated outside the retention window around their
	// bucket (the processor bounds how many it keeps,
	// Config.AuditPerServicePerMinute).
	AuditDropped uint64
	// PendingFlushes and PendingRows are queued or being written.
	PendingFlushes, PendingRows int
	// LastError is the most recent write, migration or retention error
	// (nil if none yet), at LastErrorTime; it stays after later writes
	// succeed. It names no password.
	LastError     error
	LastErrorTime time.Time
}

// pending is a queued flush, turned into rows at Enqueue: the queue holds
// names, not the symbols of a table its owner may sweep meanwhile.
type pending struct {
	batch *batch
	rows  int // the queue bound uses it
	// repaired holds the repairs tried for this flush: each is tried once,
	// so that a refusal that outlives its repair cannot hold the queue.
	repaired repair
}

// Writer writes flushes to a Store from its own goroutine, so that the
// pipeline never waits for the database: Enqueue only appends to a queue
// bounded by Config.MaxPendingRows (the flush being written included),
// dropping (and counting) the oldest flushes beyond it. The goroutine migrates the schema as soon as it starts
// (trying again in the background while the database is down), then writes
// the queue in order, each flush exactly once (Store.Write), retrying
// failures with exponential backoff from 100 ms to 30 s, so that it
// outlasts a database outage and catches up afterwards. It drops expired
// partitions every hour.
//
// A flush the database refuses with an error no retry can fix is rejected
// (counted in WriterStats.RejectedFlushes and logged) rather than retried,
// so that it never holds up the flushes behind it: SQLSTATE classes 22
// (data exception: text PostgreSQL cannot hold), 23 (integrity constraint
// violation), 42 (syntax error or access rule violation: a missing
// privilege) and 54 (program limit exceeded: an index entry too large).
// Five codes in those classes have a repair, which is tried once per
// flush before the flush is tried again: 23505 unique_violation (a bucket
// holds rows no recorded flush wrote: merge into them), 23514
// check_violation (no partition for a row: create the partitions), and
// 42P01 undefined_table, 42883 undefined_function and 42703
// undefined_column (a partition or the schema was dropped, or the
// database lost migrations it had applied: create the partitions and run
// the migrations again).
// A flush refused again after its repair is rejected. Anything else (the
// connection, the server shutting down, a deadlock, a full disk) is
// retried.
//
// Failures are logged, if the writer has a logger (WithLogger), without
// flooding: the first failure at once, then at most one line a minute
// saying how many attempts failed meanwhile, and one line when a write
// succeeds again. Logged errors never show the DSN's password.
type Writer struct {
	store *Store
	cfg   Config
	log   *zap.Logger
	// status, if set, is told of every failed attempt (its error, the
	// password redacted) and of every success (nil): the processor
	// reports its component status by it.
	status func(error)

	// Test hooks.
	minBackoff, maxBackoff time.Duration
	logEvery               time.Duration
	now                    func() time.Time

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

	wake   chan struct{}
	done   chan struct{}
	cancel context.CancelFunc

	// Owned by the writing goroutine.
	failures, rejections, repairs logLimit
}

// A WriterOption configures a Writer.
type WriterOption func(*Writer)

// WithLogger makes the writer log its failures, rate-limited, its
// rejections and what shutdown left unwritten to l.
func WithLogger(l *zap.Logger) WriterOption {
	return func(w *Writer) { w.log = l }
}

// WithStatus has f told, from the writing goroutine, the error of each
// attempt that failed and will be retried (its text never shows the DSN's
// password), and nil after each that succeeded: a status-aware health
// check can then show a database that refuses the password, or is down,
// within one attempt, and the recovery within one more.
func WithStatus(f func(error)) WriterOption {
	return func(w *Writer) { w.status = f }
}

// NewWriter returns a writer to s. Start it; Enqueue may be called before.
func NewWriter(s *Store, opts ...WriterOption) *Writer {
	w := &Writer{
		store:      s,
		cfg:        s.cfg,
		log:        zap.NewNop(),
		minBackoff: minBackoff,
		maxBackoff: maxBackoff,
		logEvery:   logEvery,
		now:        time.Now,
		instance:   NewInstanceID(),
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
	for _, o := range opts {
		o(w)
	}
	return w
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
// the rows held, the flush being written included, would exceed
// Config.MaxPendingRows, the oldest waiting flushes are dropped and
// counted; a flush that cannot fit beside the one being written (or is
// larger than the bound by itself) is dropped instead. The flush is turned into rows before Enqueue returns: the
// caller may reuse f.Stats and its symbols at once. A flush with an empty
// Instance gets the writer's identity and next sequence number. A flush
// that makes no rows — a correction whose final verdicts count as the
// provisional ones did — is not written at all.
func (w *Writer) Enqueue(f Flush) {
	if f.Stats == nil {
		return
	}
	if f.Bucket.IsZero() {
		f.Bucket = time.Now()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if countRows(f.Stats) == 0 && f.Stats.Traces == 0 {
		return
	}
	if f.Instance == "" {
		w.seq++
		f.Instance, f.Seq = w.instance, w.seq
	}
	b := w.store.newBatch(&f)
	w.stats.AuditDropped += uint64(b.auditDropped)
	w.stats.NamesCut += uint64(b.namesCut)
	n := b.rows()
	if b.empty() {
		return // a correction that changes nothing
	}
	// The flush being written is held too, and may be for as long as
	// the database is down: the bound is on memory.
	inflight := 0
	if w.inflight != nil {
		inflight = w.inflight.rows
	}
	if w.stopped || inflight+n > w.cfg.MaxPendingRows {
		w.stats.DroppedFlushes++
		w.stats.DroppedRows += uint64(n)
		return
	}
	for inflight+w.queuedRows+n > w.cfg.MaxPendingRows && w.head < len(w.queue) {
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
	w.queue = append(w.queue, &pending{batch: b, rows: n})
	w.queuedRows += n
	select {
	case w.wake <- struct{}{}:
	default:
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

// Shutdown writes what is pending until ctx ends or Config.ShutdownTimeout
// passes, whichever is first, then stops the writer and reports what it
// could not write: counted as dropped, logged, and returned as the error.
// It does not close the Store.
func (w *Writer) Shutdown(ctx context.Context) error {
	ctx, cancelTimeout := context.WithTimeout(ctx, w.cfg.ShutdownTimeout)
	defer cancelTimeout()
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
	lastErr := "none"
	if w.stats.LastError != nil {
		lastErr = w.store.redact(w.stats.LastError.Error())
	}
	w.log.Error("Shutdown left error-ownership statistics unwritten; they are dropped",
		zap.Int("flushes", flushes), zap.Int("rows", rows), zap.Stringer("store", w.store),
		zap.Duration("shutdown_timeout", w.cfg.ShutdownTimeout), zap.String("last_error", lastErr))
	return fmt.Errorf("store: shutdown left %d flushes (%d rows) unwritten to %s: %w (last error: %s)",
		flushes, rows, w.store, context.Cause(ctx), lastErr)
}

// take takes the oldest waiting flush, if one waits; if none does, it
// reports whether the writer is draining, under the same lock, so that a
// flush enqueued just before Shutdown is not left behind.
func (w *Writer) take() (p *pending, draining bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.head == len(w.queue) {
		return nil, w.draining
	}
	p = w.queue[w.head]
	w.queue[w.head] = nil
	w.head++
	w.queuedRows -= p.rows
	w.inflight = p
	return p, false
}

// next takes the oldest waiting flush, waiting for one; it returns nil when
// the writer drains and nothing is left, or ctx ends.
func (w *Writer) next(ctx context.Context) *pending {
	for {
		p, draining := w.take()
		if p != nil || draining {
			return p
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
		var p *pending
		if migrated {
			if p = w.next(ctx); p == nil {
				return
			}
		} else if next, draining := w.take(); next != nil {
			p = next
		} else if draining {
			return
		} else {
			// Nothing to write yet: migrate now rather than at the first
			// flush, so that readers (the hints) find the schema.
			if err := w.migrate(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				w.failed(err)
				// A flush or Shutdown ends the wait early.
				if !w.pause(ctx, &backoff, w.wake) {
					return
				}
				continue
			}
			migrated, backoff = true, 0
			w.succeeded()
			continue
		}
		w.write(ctx, p, &migrated, &backoff)
		if ctx.Err() != nil {
			return // Shutdown gave up; it counts the flush in flight
		}
		if w.cfg.Retention > 0 && migrated && time.Since(lastRetention) >= retentionEvery {
			// After a write, so the database is up. A failure is logged
			// and tried again in an hour.
			lastRetention = time.Now()
			rctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
			_, err := w.store.DropPartitionsBefore(rctx, time.Now().Add(-w.cfg.Retention))
			cancel()
			if err != nil {
				_ = w.record(err) // kept as the last error; the line below logs it
				w.log.Warn("Cannot drop the store's expired partitions; trying again in an hour",
					zap.Stringer("store", w.store), zap.String("error", w.store.redact(err.Error())))
			}
		}
	}
}

// write writes p, retrying and repairing, until it is written, rejected,
// or ctx ends.
func (w *Writer) write(ctx context.Context, p *pending, migrated *bool, backoff *time.Duration) {
	for {
		err := w.attempt(ctx, p, migrated)
		if err == nil {
			*backoff = 0
			w.succeeded()
			return
		}
		if ctx.Err() != nil {
			return
		}
		code, need, permanent := classify(err)
		if permanent && need != 0 && p.repaired&need == 0 {
			// The repair is made by writeError (partitions, merging) or
			// by the next attempt (migrating), which comes at once.
			p.repaired |= need
			if need&repairSchema != 0 {
				*migrated = false
				if w.repairs.allow(w.now(), w.logEvery) {
					w.log.Info("A table or function of the store's schema is missing; running the migrations again",
						zap.String("sqlstate", code), zap.Stringer("store", w.store))
				}
			}
			w.mu.Lock()
			w.stats.Retries++
			w.mu.Unlock()
			continue
		}
		if permanent {
			w.reject(p, code, err)
			return
		}
		w.mu.Lock()
		w.stats.Retries++
		w.mu.Unlock()
		w.failed(err)
		if !w.pause(ctx, backoff, nil) {
			return
		}
	}
}

// pause waits out the next backoff. It returns false if ctx ended first,
// and true early if wake says so.
func (w *Writer) pause(ctx context.Context, backoff *time.Duration, wake <-chan struct{}) bool {
	*backoff = min(max(2**backoff, w.minBackoff), w.maxBackoff)
	t := time.NewTimer(jitter(*backoff))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-wake:
		return true
	case <-ctx.Done():
		return false
	}
}

// reject gives p up: the database refused it with an error no retry fixes.
func (w *Writer) reject(p *pending, code string, err error) {
	w.mu.Lock()
	w.stats.RejectedFlushes++
	w.stats.RejectedRows += uint64(p.rows)
	w.inflight = nil
	w.mu.Unlock()
	_ = w.record(err) // kept as the last error; the rejection is logged below
	now := w.now()
	if !w.rejections.allow(now, w.logEvery) {
		return
	}
	fields := []zap.Field{
		zap.String("sqlstate", code), zap.String("error", w.store.redact(err.Error())),
		zap.Time("bucket", p.batch.bucket), zap.Int("rows", p.rows), zap.Stringer("store", w.store),
	}
	if n := w.rejections.takeSuppressed(); n > 0 {
		fields = append(fields, zap.Int("rejected_unlogged", n))
	}
	msg := "The database refused an error-ownership statistics flush with an error no retry can fix; it was dropped"
	if p.repaired&repairSchema != 0 && schemaMissing(err) {
		msg += ". Running the migrations again did not restore the schema: its tables, functions or columns were dropped while " +
			MigrationsTable + " still records them; drop " + MigrationsTable + " too and the writer recreates the schema"
	}
	w.log.Error(msg, fields...)
}

// failed logs a failed attempt that will be retried: the first of an
// outage at once, then at most one line per logEvery.
func (w *Writer) failed(err error) {
	if w.status != nil {
		w.status(errors.New(w.store.redact(err.Error())))
	}
	now := w.now()
	first := !w.failures.failing
	w.failures.fail(now)
	if !w.failures.allow(now, w.logEvery) {
		return
	}
	st := w.Stats()
	fields := []zap.Field{
		zap.Stringer("store", w.store), zap.String("error", w.store.redact(err.Error())),
		zap.Int("pending_flushes", st.PendingFlushes), zap.Int("pending_rows", st.PendingRows),
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		fields = append(fields, zap.String("sqlstate", pgErr.Code))
	}
	if first {
		w.log.Warn("Cannot write error-ownership statistics to the store; retrying in the background, the flushes wait in memory", fields...)
		return
	}
	fields = append(fields, zap.Int("failed_attempts", w.failures.attempts),
		zap.Duration("failing_for", now.Sub(w.failures.since).Round(time.Millisecond)),
		zap.Int("failures_unlogged", w.failures.takeSuppressed()))
	w.log.Warn("Still cannot write error-ownership statistics to the store", fields...)
}

// succeeded logs the recovery after failures.
func (w *Writer) succeeded() {
	if w.status != nil {
		w.status(nil)
	}
	if !w.failures.failing {
		return
	}
	now := w.now()
	w.log.Info("Writing error-ownership statistics to the store again",
		zap.Stringer("store", w.store), zap.Int("failed_attempts", w.failures.attempts),
		zap.Duration("after", now.Sub(w.failures.since).Round(time.Millisecond)))
	w.failures = logLimit{}
}

// logLimit lets one log line through per interval and counts the rest.
type logLimit struct {
	failing    bool      // for failures: since the last success
	since      time.Time // the first failure
	attempts   int       // failed attempts since then
	last       time.Time // the last line logged
	suppressed int       // lines not logged since then
}

func (l *logLimit) fail(now time.Time) {
	if !l.failing {
		l.failing, l.since, l.attempts = true, now, 0
	}
	l.attempts++
}

// allow reports whether a line may be logged now, counting it if not.
func (l *logLimit) allow(now time.Time, every time.Duration) bool {
	if !l.last.IsZero() && now.Sub(l.last) < every {
		l.suppressed++
		return false
	}
	l.last = now
	return true
}

func (l *logLimit) takeSuppressed() int {
	n := l.suppressed
	l.suppressed = 0
	return n
}

// repair is a set of repairs a refused write may need.
type repair uint8

const (
	repairSchema     repair = 1 << iota // run the migrations again (and create the partitions)
	repairPartitions                    // create the partitions
	repairMerge                         // merge into the bucket's rows
)

// classify says whether err is a refusal no retry fixes as such
// (permanent), and which repair, if any, may fix it.
func classify(err error) (code string, need repair, permanent bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return "", 0, false
	}
	code = pgErr.Code
	if schemaMissing(err) {
		return code, repairSchema, true
	}
	switch code {
	case codeCheckViolation:
		return code, repairPartitions, true
	case codeUniqueViolation:
		return code, repairMerge, true
	case codeInsufficientPrivilege:
		if fileAccess(pgErr) {
			return code, 0, false
		}
	}
	if len(code) == 5 {
		switch code[:2] {
		case "22", "23", "42", "54":
			return code, 0, true
		}
	}
	return code, 0, false
}

// codeInsufficientPrivilege is SQLSTATE 42501.
const codeInsufficientPrivilege = "42501"

// fileAccess reports whether a 42501 comes from the server's own file
// access rather than from a privilege check: PostgreSQL gives a file it
// may not write — a data disk remounted read-only after an I/O error —
// the same code as a missing grant, but a grant is checked in aclchk.c.
// A disk is repaired or remounted, so its flushes are retried; a missing
// grant is not, so its flush is given up.
func fileAccess(e *pgconn.PgError) bool {
	return e.File != "" && e.File != "aclchk.c"
}

// migrate runs the migrations, bounded by the write timeout.
func (w *Writer) migrate(ctx context.Context) error {
	mctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	_, err := w.store.Migrate(mctx)
	return w.record(err)
}

// attempt makes one attempt at writing p, migrating the schema first if
// that is still to do.
func (w *Writer) attempt(ctx context.Context, p *pending, migrated *bool) error {
	actx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	if !*migrated {
		if _, err := w.store.Migrate(actx); err != nil {
			return w.record(err)
		}
		*migrated = true
	}
	dup, err := w.store.write(actx, p.batch)
	if errors.Is(err, ErrCorrectsUnwritten) {
		// Lost with the flush it corrects, which was counted then.
		w.mu.Lock()
		w.stats.DroppedFlushes++
		w.stats.DroppedRows += uint64(p.rows)
		w.inflight = nil
		w.mu.Unlock()
		return nil
	}
	if err != nil {
		return w.record(err)
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

// record records err, if not nil, as the last error and returns it.
func (w *Writer) record(err error) error {
	if err == nil {
		return nil
	}
	w.mu.Lock()
	w.stats.LastError, w.stats.LastErrorTime = err, time.Now()
	w.mu.Unlock()
	return err
}

// jitter returns a random duration between half and all of d ("equal
// jitter"), so that replicas that lost the database together do not all
// come back at the same instant.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1) //nolint:gosec // G404: jitter needs no unpredictability
}
