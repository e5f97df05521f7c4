// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/collector/config/configopaque"
)

// Store reads and writes the statistics in one PostgreSQL database. It is
// safe for concurrent use.
type Store struct {
	pool  *pgxpool.Pool
	cfg   Config
	owned bool // Close closes the pool
	// copyThreshold is defaultCopyThreshold; tests lower it to exercise
	// the COPY path with few rows.
	copyThreshold int
	// maxName is MaxNameBytes; tests raise it to send the database names
	// it cannot index.
	maxName int
	// secrets are what may be the DSN's password, for redact.
	secrets []string
	// migrating lets one Migrate run at a time in this process, so that
	// the writer and readers repairing a missing schema do not contend for
	// the migrations' advisory lock, which is probed once a second.
	migrating chan struct{}

	mu    sync.Mutex
	days  map[int64]bool // UTC days (Unix days) whose partitions exist
	merge map[int64]bool // buckets (Unix seconds) that must be merged into
}

// OpenDSN is Open with the default configuration and the database at dsn
// (empty: the PG* environment variables), as the readers of the store —
// the CLI, the demo — open it.
func OpenDSN(ctx context.Context, dsn string) (*Store, error) {
	cfg := DefaultConfig()
	cfg.DSN = configopaque.String(dsn)
	return Open(ctx, cfg)
}

// Open returns a store for cfg. It does not connect: the database may be
// down when the collector starts, and the Writer waits for it. Errors name
// the database without its password.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dsn := string(cfg.DSN)
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("dsn: %s cannot be parsed (%s)", redactDSN(dsn), parseProblem(dsn, err))
	}
	if _, ok := pcfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		// So that pg_stat_activity shows who holds a connection.
		pcfg.ConnConfig.RuntimeParams["application_name"] = "errorownership"
	}
	if _, ok := pcfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
		// The store's transactions never idle. One that does lost its
		// client (a connection cut mid-flush) and would hold the flush's
		// row lock, stalling the retry, until the server noticed.
		pcfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(cfg.WriteTimeout.Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("store: database %s: %s", redactDSN(dsn), parseProblem(dsn, err))
	}
	return storeOn(pool, cfg, true), nil
}

func storeOn(pool *pgxpool.Pool, cfg Config, owned bool) *Store {
	return &Store{
		pool:          pool,
		cfg:           cfg,
		owned:         owned,
		copyThreshold: defaultCopyThreshold,
		maxName:       MaxNameBytes,
		migrating:     make(chan struct{}, 1),
		days:          make(map[int64]bool),
		merge:         make(map[int64]bool),
		secrets:       slices.DeleteFunc(append(secrets(string(cfg.DSN)), pool.Config().ConnConfig.Password), func(s string) bool { return s == "" }),
	}
}

// redact hides the DSN's password, and the password the pool connects with
// (from PGPASSWORD, say), in text that may quote it, such as an error
// about to be logged.
func (s *Store) redact(text string) string {
	for _, secret := range s.secrets {
		text = strings.ReplaceAll(text, secret, "xxxxx")
	}
	return text
}

// New returns a store on the caller's pool, which Close leaves open.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return storeOn(pool, cfg, false), nil
}

// Close closes the store's connections, if Open made them.
func (s *Store) Close() {
	if s.owned {
		s.pool.Close()
	}
}

// Pool returns the store's connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Config returns the store's configuration.
func (s *Store) Config() Config { return s.cfg }

// String describes the store's database without its password.
func (s *Store) String() string {
	c := s.pool.Config().ConnConfig
	return fmt.Sprintf("host=%s port=%d dbname=%s user=%s", c.Host, c.Port, c.Database, c.User)
}

// Migrate applies the schema migrations the database lacks and returns the
// schema version. Calls in one process take turns.
func (s *Store) Migrate(ctx context.Context) (int64, error) {
	select {
	case s.migrating <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("store: migrating the schema: %w", context.Cause(ctx))
	}
	defer func() { <-s.migrating }()
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	return Migrate(ctx, db)
}

// SQLSTATE codes the store repairs: see Writer.
const (
	codeUniqueViolation   = "23505" // a plain insert met rows: merge instead
	codeCheckViolation    = "23514" // no partition for a row: create it
	codeUndefinedTable    = "42P01" // a partition or the schema is gone
	codeUndefinedFunction = "42883" // the schema is gone
	codeUndefinedColumn   = "42703" // a migration is gone
	codeInternalError     = "XX000" // with "cache lookup failed": replaced while in use
)

// schemaMissing reports whether err says a table, function or column of
// the schema does not exist: the database is new and not migrated yet, the
// schema was dropped under a running collector, or the database lost
// migrations it had applied (restored from an older backup, or crashed
// having acknowledged them before they reached its disk).
func schemaMissing(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case codeUndefinedTable, codeUndefinedFunction, codeUndefinedColumn:
		return true
	}
	return false
}

// schemaChanged reports whether err says a function or table the query
// planned with was dropped while it ran: a migration replaced it (the
// writer migrating a new database while a reader asks, say), and the query
// succeeds once the migration has.
func schemaChanged(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeInternalError && strings.HasPrefix(pgErr.Message, "cache lookup failed")
}

// Write writes one flush in one transaction, exactly once: it reports
// duplicate (and writes nothing) if the flush's (Instance, Seq) was written
// before. A Write that failed with an unknown outcome, such as a connection
// lost during COMMIT, may and should be repeated with the same flush. Audit
// entries dated more than Config.Retention before the bucket or more than a
// day after it are left out. A correction (Flush.Corrects) of a flush the
// store does not hold writes nothing and returns ErrCorrectsUnwritten.
// Write does not take ownership of f.Stats; it does not queue or retry
// (Writer does).
func (s *Store) Write(ctx context.Context, f Flush) (duplicate bool, err error) {
	return s.write(ctx, s.newBatch(&f))
}

// ErrCorrectsUnwritten says that a flush correcting another
// (Flush.Corrects) was not written because the store does not hold the
// other: it was dropped or rejected. Its provisional verdicts were never
// added, so taking them back would leave the bucket short of them; and
// the final verdicts would count requests the bucket does not count.
var ErrCorrectsUnwritten = errors.New("store: the flush a correction corrects was not written")

// newBatch is newBatch with the store's bucket width and retention.
func (s *Store) newBatch(f *Flush) *batch {
	b := newBatch(f, s.cfg.Bucket, s.maxName)
	// Audit entries dated long before the bucket would land in partitions
	// that retention drops (or recreate them); entries dated after it are
	// clock nonsense. Either way one entry must not create partitions.
	lo, hi := time.Time{}, b.bucket.Add(24*time.Hour)
	if s.cfg.Retention > 0 {
		lo = b.bucket.Add(-s.cfg.Retention)
	}
	kept := b.audit[:0]
	for _, a := range b.audit {
		if a.time.Before(lo) || a.time.After(hi) {
			b.auditDropped++
			continue
		}
		kept = append(kept, a)
	}
	b.audit = kept
	return b
}

// Statements that write a flush.
const (
	insertFlush = `INSERT INTO flushes (instance, seq, bucket, rows) VALUES ($1, $2, $3, $4) ON CONFLICT (instance, seq) DO NOTHING`
	// lockBucket serialises the writers of one bucket until they commit.
	// The key is the bucket's epoch seconds, not its text, which would
	// depend on the session's time zone.
	lockBucket = `SELECT pg_advisory_xact_lock(hashtextextended('errorownership bucket', extract(epoch FROM $1::timestamptz)::bigint))`
	// durableCommit makes the flush's COMMIT wait until the server has
	// written it to its write-ahead log on disk, when the session would not
	// (synchronous_commit = off, for the server, the database or the
	// role): the writer counts a flush written once its COMMIT succeeds,
	// so a commit a crash of the server can undo loses the flush without
	// a trace. Stronger settings (on, remote_write, remote_apply: waiting
	// for standbys too) stay.
	durableCommit = `SELECT set_config('synchronous_commit', 'local', true) WHERE current_setting('synchronous_commit') = 'off'`
	// bucketWritten reports whether another flush of the bucket committed:
	// only then can the bucket have rows. A statement of its own, so that
	// its snapshot is taken after lockBucket returns.
	bucketWritten = `SELECT EXISTS (SELECT 1 FROM flushes WHERE bucket = $1 AND NOT (instance = $2 AND seq = $3))`
	// flushWritten reports whether a flush was written: the one a
	// correction corrects.
	flushWritten = `SELECT EXISTS (SELECT 1 FROM flushes WHERE instance = $1 AND seq = $2)`
	// deleteAudit deletes, for each request named, as many of its audit
	// entries as asked; the time finds the partition. Withdrawn entries
	// were written by an earlier flush: a Stats takes back its own.
	deleteAudit = `DELETE FROM coincidental_audit a
USING (SELECT e.tableoid AS rel, e.ctid AS tid
       FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::integer[]) AS k(time, trace_id, span_id, n)
       CROSS JOIN LATERAL (SELECT c.tableoid, c.ctid FROM coincidental_audit c
                           WHERE c.time = k.time AND c.trace_id = k.trace_id AND c.span_id = k.span_id LIMIT k.n) e) d
WHERE a.tableoid = d.rel AND a.ctid = d.tid`
	insertAudit = `INSERT INTO coincidental_audit (time, trace_id, span_id, service, operation, peer_service, peer_operation, claim_sent, claim_expected, reason, weight)
SELECT unnest($2::timestamptz[]), unnest($3::text[]), unnest($4::text[]), unnest($5::text[]), unnest($6::text[]),
       unnest($7::text[]), unnest($8::text[]), unnest($9::text[]), unnest($10::text[]), $1, unnest($11::double precision[])`
)

// defaultCopyThreshold is the row count from which a table's rows go
// through COPY into a staging table instead of arrays in a batched
// statement. COPY streams (the client encodes while the server inserts) and
// its rows cost the server less than unnesting arrays, but it takes two
// more round trips per table: measured (BenchmarkFlush) it wins from a few
// thousand rows.
const defaultCopyThreshold = 2000

// column describes a column of a statistics table.
type column struct {
	name     string
	typ      string // text or smallint for keys; bigint or integer for values
	greatest bool   // merged by GREATEST instead of sum
	// est says the count has an estimate of all traffic beside it, in
	// the double precision column <name>_est, which rows written before
	// schema version 4 hold as NULL (read: the count itself).
	est bool
}

// tableSpec describes a statistics table: its key columns after bucket and
// its value columns, in statRow order, then the estimates of those that
// have one (statRow.ests, at the index of their count).
type tableSpec struct {
	name   string
	keys   []column
	values []column
}

func (t *tableSpec) columnNames() []string {
	names := []string{"bucket"}
	for _, c := range t.keys {
		names = append(names, c.name)
	}
	for _, c := range t.values {
		names = append(names, c.name)
	}
	for _, c := range t.values {
		if c.est {
			names = append(names, c.name+"_est")
		}
	}
	return names
}

// onConflict is the clause that merges a row into an existing one, if
// merge is set: it costs every row an extra index probe, which the first
// flush of a bucket can do without.
func (t *tableSpec) onConflict(merge bool) string {
	if !merge {
		return ""
	}
	keys := []string{"bucket"}
	for _, c := range t.keys {
		keys = append(keys, c.name)
	}
	set := make([]string, 0, 2*len(t.values))
	for _, c := range t.values {
		if c.greatest {
			set = append(set, fmt.Sprintf("%[1]s = GREATEST(t.%[1]s, excluded.%[1]s)", c.name))
		} else {
			set = append(set, fmt.Sprintf("%[1]s = t.%[1]s + excluded.%[1]s", c.name))
		}
	}
	for _, c := range t.values {
		if c.est {
			// A row from before schema version 4 has no estimate: it
			// counted every trace once, so its count is its estimate.
			// (SET reads the row as it was, whatever the order.)
			set = append(set, fmt.Sprintf("%[1]s_est = coalesce(t.%[1]s_est, t.%[1]s) + excluded.%[1]s_est", c.name))
		}
	}
	return fmt.Sprintf(" ON CONFLICT (%s) DO UPDATE SET %s", strings.Join(keys, ", "), strings.Join(set, ", "))
}

// upsertArrays returns the statement that adds rows, passed as one array
// per column after the bucket ($1), into target (the bucket's partition,
// which spares PostgreSQL routing every row): new keys are inserted and,
// with merge, existing ones summed. The arrays are unnested in the select list, where
// PostgreSQL walks them in step: unnest in FROM would first copy every
// array into a tuple store, which costs a third of the write. The rows go
// in in the order given, which is the key order.
func (t *tableSpec) upsertArrays(target string, merge bool) string {
	arrays := make([]string, 0, len(t.keys)+2*len(t.values))
	n := 2
	for _, c := range append(slices.Clone(t.keys), t.values...) {
		arrays = append(arrays, fmt.Sprintf("unnest($%d::%s[])", n, c.typ))
		n++
	}
	for _, c := range t.values {
		if c.est {
			arrays = append(arrays, fmt.Sprintf("unnest($%d::double precision[])", n))
			n++
		}
	}
	return fmt.Sprintf("INSERT INTO %s AS t (%s) SELECT $1::timestamptz, %s%s",
		pgx.Identifier{target}.Sanitize(), strings.Join(t.columnNames(), ", "), strings.Join(arrays, ", "), t.onConflict(merge))
}

// staging names the session's temporary table that COPY fills.
func (t *tableSpec) staging() string { return "staging_" + t.name }

// createStaging creates the staging table unless the session has it. Its
// rows vanish at the end of every transaction, committed or not.
func (t *tableSpec) createStaging() string {
	return fmt.Sprintf("CREATE TEMP TABLE IF NOT EXISTS %s (LIKE %s) ON COMMIT DELETE ROWS", t.staging(), t.name)
}

// upsertStaged moves the staging table's rows into target, merging as
// upsertArrays does. A freshly filled heap is read in the order written,
// which is the key order.
func (t *tableSpec) upsertStaged(target string, merge bool) string {
	cols := strings.Join(t.columnNames(), ", ")
	return fmt.Sprintf("INSERT INTO %s AS t (%s) SELECT %s FROM %s%s",
		pgx.Identifier{target}.Sanitize(), cols, cols, t.staging(), t.onConflict(merge))
}

var (
	text     = func(name string) column { return column{name: name, typ: "text"} }
	smallint = func(name string) column { return column{name: name, typ: "smallint"} }
	bigint   = func(name string) column { return column{name: name, typ: "bigint"} }
	bigints  = func(names ...string) []column {
		cols := make([]column, len(names))
		for i, n := range names {
			cols[i] = bigint(n)
		}
		return cols
	}
	// estimated are counts with an estimate beside them.
	estimated = func(names ...string) []column {
		cols := bigints(names...)
		for i := range cols {
			cols[i].est = true
		}
		return cols
	}
	// extrapolated counts, of a table's requests or calls, those whose
	// weight came from their trace's sampling.
	extrapolated = bigint("extrapolated")

	// allSpecs are the statistics tables, indexed like batch.tables.
	allSpecs = [numTables]*tableSpec{
		tableOps: {
			name: "operation_stats", keys: []column{text("service"), text("operation")},
			values: append(estimated("served", "retries_received", "failed", "verdict_own", "verdict_propagated", "verdict_coincidental",
				"claims_correct", "expected_claimed", "expected_unclaimed"), extrapolated),
		},
		tableClaims: {
			name: "claim_accuracy", keys: []column{text("service"), text("operation"), text("claim_sent"), text("verdict")},
			values: append(estimated("requests"), extrapolated),
		},
		tableEdges: {
			name: "edge_stats", keys: []column{text("service"), text("operation"), text("peer_service"), text("peer_operation")},
			values: append(estimated("calls", "failed_calls", "attempts", "retries", "call_failed_request_failed", "call_ok_request_failed",
				"retried", "suppressed_unclaimed", "suppressed_budget", "no_policy", "exhausted",
				"failed_alone", "failed_alone_request_failed"), extrapolated),
		},
		tableDepths: {
			name: "depth_stats", keys: []column{text("root_service"), text("root_operation"), smallint("depth"), text("service")},
			values: append(estimated("served"), extrapolated),
		},
		tableRoots: {
			name: "root_stats", keys: []column{text("root_service"), text("root_operation")},
			values: []column{
				{name: "requests", typ: "bigint", est: true}, {name: "storm_radius_max", typ: "integer", greatest: true},
				{name: "storm_radius_sum", typ: "bigint", est: true}, extrapolated,
			},
		},
		tableAddresses: {
			name: "address_stats", keys: []column{text("service"), text("peer_service"), text("address")},
			values: bigints("calls"),
		},
		tableTraces: {
			name: "trace_stats",
			values: bigints("traces", "extrapolated", "counted_failed",
				"incomplete_missing_parent", "incomplete_missing_callee", "incomplete_inconsistent_sampling"),
		},
	}
)

// partitionSuffix names the daily partition holding t.
func partitionSuffix(t time.Time) string { return "_p" + t.UTC().Format("20060102") }

// write writes b in one transaction that begins by claiming b's identity in
// flushes: a flush already there is a duplicate, and the transaction rolls
// back having written nothing. Since the claim and the rows commit
// together, a retried flush is counted once whether the first attempt's
// COMMIT took effect or not.
//
// Writers of one bucket take turns (an advisory lock held until commit),
// so that they never wait for each other's row locks, and so that the first
// flush of a bucket, which finds no rows to merge with, can insert plainly:
// merging (ON CONFLICT DO UPDATE) costs every row an extra index probe.
// Later flushes of the bucket merge.
func (s *Store) write(ctx context.Context, b *batch) (duplicate bool, err error) {
	if err := s.ensurePartitions(ctx, b); err != nil {
		return false, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("store: beginning a flush: %w", err)
	}
	defer func() {
		if err != nil || duplicate {
			// The error that brought us here matters, not the rollback's.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	var q pgx.Batch
	var claimed, written bool
	corrected := true
	q.Queue(durableCommit)
	if b.corrects != 0 {
		// Before the flush claims its identity: a correction that finds
		// its own identity taken was written, with what it corrects.
		q.Queue(flushWritten, b.instance, b.corrects).QueryRow(func(row pgx.Row) error { return row.Scan(&corrected) })
	}
	q.Queue(insertFlush, b.instance, b.seq, b.bucket, b.rows()).Exec(func(tag pgconn.CommandTag) error {
		claimed = tag.RowsAffected() == 1
		return nil
	})
	q.Queue(lockBucket, b.bucket)
	q.Queue(bucketWritten, b.bucket, b.instance, b.seq).QueryRow(func(row pgx.Row) error { return row.Scan(&written) })
	if err := tx.SendBatch(ctx, &q).Close(); err != nil {
		return false, s.writeError(b, "recording the flush", err)
	}
	if !claimed {
		return true, nil
	}
	if !corrected {
		return false, ErrCorrectsUnwritten
	}
	merge := written || s.mustMerge(b.bucket)

	q = pgx.Batch{}
	send := func() error {
		if q.Len() == 0 {
			return nil
		}
		err := tx.SendBatch(ctx, &q).Close()
		q = pgx.Batch{}
		return err
	}
	suffix := partitionSuffix(b.bucket)
	if len(b.unaudit) > 0 {
		// Before the entries added: a correction may withdraw a
		// request's entry and add another for it.
		q.Queue(deleteAudit, b.unauditArrays()...)
	}
	for i := range b.tables {
		t := &b.tables[i]
		if len(t.rows) == 0 {
			continue
		}
		target := t.spec.name + suffix
		if len(t.rows) < s.copyThreshold {
			q.Queue(t.spec.upsertArrays(target, merge), t.arrays(b.bucket, b.names)...)
			continue
		}
		q.Queue(t.spec.createStaging())
		if err := send(); err != nil {
			return false, s.writeError(b, "writing the flush's rows", err)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.spec.staging()}, t.spec.columnNames(), t.copySource(b.bucket, b.names)); err != nil {
			return false, s.writeError(b, "copying the flush's rows", err)
		}
		q.Queue(t.spec.upsertStaged(target, merge))
	}
	if keys := b.tables[tableClaims].emptied(b.names); keys != nil {
		// A cell a correction took to zero goes, as cells that never
		// counted a request are never written.
		q.Queue(fmt.Sprintf(deleteEmptyClaims, pgx.Identifier{allSpecs[tableClaims].name + suffix}.Sanitize()), append([]any{b.bucket}, keys...)...)
	}
	if len(b.audit) > 0 {
		q.Queue(insertAudit, b.auditArrays()...)
	}
	if err := send(); err != nil {
		return false, s.writeError(b, "writing the flush's rows", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, s.writeError(b, "committing the flush", err)
	}
	return false, nil
}

// mustMerge reports whether bucket's rows must be merged although no other
// flush of it was recorded: a plain insert into it met existing rows.
func (s *Store) mustMerge(bucket time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.merge[bucket.Unix()]
}

// writeError wraps a failed write of b. If a partition was missing
// (dropped by another replica's retention, say), it forgets which
// partitions exist, so that the retry creates them. If a plain insert met
// existing rows (written by something that recorded no flush), the retry
// merges.
func (s *Store) writeError(b *batch, what string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		s.mu.Lock()
		switch pgErr.Code {
		case codeCheckViolation, codeUndefinedTable:
			clear(s.days)
		case codeUniqueViolation:
			if len(s.merge) > 1000 {
				clear(s.merge)
			}
			s.merge[b.bucket.Unix()] = true
		}
		s.mu.Unlock()
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

// arrays returns the statement arguments of upsertArrays: the bucket and
// one array per column.
func (t *tableRows) arrays(bucket time.Time, names []string) []any {
	n := len(t.rows)
	args := make([]any, 0, 1+len(t.spec.keys)+len(t.spec.values))
	args = append(args, bucket)
	for i, c := range t.spec.keys {
		switch c.typ {
		case "smallint":
			col := make([]int16, n)
			for j := range t.rows {
				col[j] = int16(int32(t.rows[j].key.slot(i)) - smallintBias)
			}
			args = append(args, col)
		default:
			col := make([]string, n)
			for j := range t.rows {
				col[j] = names[t.rows[j].key.slot(i)]
			}
			args = append(args, col)
		}
	}
	for i, c := range t.spec.values {
		switch c.typ {
		case "integer":
			col := make([]int32, n)
			for j := range t.rows {
				col[j] = int32(min(t.rows[j].vals[i], math.MaxInt32))
			}
			args = append(args, col)
		default:
			col := make([]int64, n)
			for j := range t.rows {
				col[j] = t.rows[j].vals[i]
			}
			args = append(args, col)
		}
	}
	for i, c := range t.spec.values {
		if c.est {
			col := make([]float64, n)
			for j := range t.rows {
				col[j] = t.rows[j].ests[i]
			}
			args = append(args, col)
		}
	}
	return args
}

// copySource returns the rows as COPY wants them: the columns arrays
// encodes, row by row.
func (t *tableRows) copySource(bucket time.Time, names []string) pgx.CopyFromSource {
	cols := t.arrays(bucket, names)
	return &rowSource{cols: cols, n: len(t.rows), row: make([]any, len(cols)), i: -1}
}

// rowSource feeds columns to CopyFrom, one reused slice per row: CopyFrom
// encodes each row before asking for the next.
type rowSource struct {
	cols []any // the bucket, then one typed slice per column
	n    int
	row  []any
	i    int
}

func (r *rowSource) Next() bool {
	r.i++
	return r.i < r.n
}

func (r *rowSource) Values() ([]any, error) {
	for j, col := range r.cols {
		switch c := col.(type) {
		case []string:
			r.row[j] = c[r.i]
		case []int16:
			r.row[j] = c[r.i]
		case []int32:
			r.row[j] = c[r.i]
		case []int64:
			r.row[j] = c[r.i]
		case []float64:
			r.row[j] = c[r.i]
		default: // the bucket, the same for every row
			r.row[j] = c
		}
	}
	return r.row, nil
}

func (r *rowSource) Err() error { return nil }

// deleteEmptyClaims deletes the claim-accuracy cells of a bucket's
// partition (%s) that a correction may have taken to zero.
const deleteEmptyClaims = `DELETE FROM %s
WHERE bucket = $1 AND requests = 0
  AND (service, operation, claim_sent, verdict) IN (SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]))`

// emptied returns, as one array per key column, the keys of the rows
// that take counts away, or nil if none does.
func (t *tableRows) emptied(names []string) []any {
	var cols [][]string
	for _, r := range t.rows {
		if r.vals[0] >= 0 {
			continue
		}
		if cols == nil {
			cols = make([][]string, len(t.spec.keys))
		}
		for i := range cols {
			cols[i] = append(cols[i], names[r.key.slot(i)])
		}
	}
	if cols == nil {
		return nil
	}
	args := make([]any, len(cols))
	for i, c := range cols {
		args[i] = c
	}
	return args
}

// unauditArrays returns the arguments of deleteAudit.
func (b *batch) unauditArrays() []any {
	n := len(b.unaudit)
	times, traces, spans, counts := make([]time.Time, n), make([]string, n), make([]string, n), make([]int32, n)
	for i, u := range b.unaudit {
		times[i], traces[i], spans[i], counts[i] = u.time, u.traceID, u.spanID, u.n
	}
	return []any{times, traces, spans, counts}
}

// auditArrays returns the arguments of insertAudit.
func (b *batch) auditArrays() []any {
	n := len(b.audit)
	cols := make([][]string, 8)
	for i := range cols {
		cols[i] = make([]string, n)
	}
	times, weights := make([]time.Time, n), make([]float64, n)
	for i, a := range b.audit {
		times[i], weights[i] = a.time, a.weight
		cols[0][i], cols[1][i], cols[2][i], cols[3][i] = a.traceID, a.spanID, a.service, a.operation
		cols[4][i], cols[5][i], cols[6][i], cols[7][i] = a.peerService, a.peerOperation, a.sent, a.want
	}
	return []any{auditReason, times, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], weights}
}

// unixDay numbers t's UTC day.
func unixDay(t time.Time) int64 { return t.Unix() / 86400 }

// ensurePartitions creates the daily partitions b writes into, and those of
// the day after its bucket so that the first flush after midnight does not
// wait for DDL. It remembers what exists, so that it usually costs nothing.
// It runs outside the flush's transaction: creating a partition locks the
// parent table, which a long transaction must not hold.
func (s *Store) ensurePartitions(ctx context.Context, b *batch) error {
	need := []int64{unixDay(b.bucket), unixDay(b.bucket) + 1}
	for _, a := range b.audit {
		if d := unixDay(a.time); d != need[len(need)-1] && d != need[0] {
			need = append(need, d)
		}
	}
	for _, d := range need {
		s.mu.Lock()
		ok := s.days[d]
		s.mu.Unlock()
		if ok {
			continue
		}
		day := time.Unix(d*86400, 0).UTC()
		if _, err := s.pool.Exec(ctx, "SELECT ensure_partitions($1::date)", day); err != nil {
			return fmt.Errorf("store: creating the partitions of %s: %w", day.Format(time.DateOnly), err)
		}
		s.mu.Lock()
		s.days[d] = true
		s.mu.Unlock()
	}
	return nil
}

// EnsurePartitions creates the daily partitions for the days from..to
// (inclusive) ahead of need.
func (s *Store) EnsurePartitions(ctx context.Context, from, to time.Time) error {
	for d := unixDay(from); d <= unixDay(to); d++ {
		b := &batch{bucket: time.Unix(d*86400, 0).UTC()}
		if err := s.ensurePartitions(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// DropPartitionsBefore drops the daily partitions (statistics and audit
// log) that end at or before cutoff, forgets the flushes of those days, and
// returns the names of the partitions dropped. Dropping a partition briefly
// locks its table; if writers hold it for long, DropPartitionsBefore gives
// up after a few seconds rather than stall them, and can be run again.
func (s *Store) DropPartitionsBefore(ctx context.Context, cutoff time.Time) ([]string, error) {
	var dropped []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '5s'"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT drop_partitions_before($1)", cutoff)
		if err != nil {
			return err
		}
		if dropped, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		// Forget the flushes of the days dropped, and only those: a
		// bucket whose rows remain must keep its flushes, or its next
		// flush would take it for empty.
		_, err = tx.Exec(ctx, "DELETE FROM flushes WHERE bucket < $1", time.Unix(unixDay(cutoff)*86400, 0).UTC())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: dropping partitions before %s: %w", cutoff.UTC().Format(time.RFC3339), err)
	}
	s.mu.Lock()
	clear(s.days)
	s.mu.Unlock()
	return dropped, nil
}
