// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/errorownership/errorownership/internal/testsupport/scenario"
	"github.com/errorownership/errorownership/internal/testsupport/soak"
	"github.com/errorownership/errorownership/store"
	"github.com/errorownership/errorownership/store/pgtest"
)

// bulkTraces is how many single-span traces with names of their own each
// fault round adds to the chain: three rows each, so that a flush is
// thousands of rows, goes through COPY, and takes long enough to be
// interrupted.
const bulkTraces = 2500

// faultRound is what the processor analyses between two flushes in the
// fault tests, with the figures it must add up to, known by construction:
// the chain of docs/design.md §1 (scenario.ChainRetryEveryHop, whose
// figures were worked out by hand) and bulkTraces requests to the service
// "bulk", each served once and answered.
type faultRound struct {
	td            ptrace.Traces
	traces, spans int
	served        map[string]int64 // by service
	verdicts      map[string]int64 // by kind
	roots         int64
}

func newFaultRound() faultRound {
	sc := scenario.ChainRetryEveryHop()
	r := faultRound{td: sc.Traces, served: map[string]int64{}, verdicts: map[string]int64{}, roots: int64(sc.Expected.Roots)}
	for svc, e := range sc.Expected.Services {
		r.served[svc] = int64(e.Served)
		for kind, n := range e.Verdicts {
			r.verdicts[kind] += int64(n)
		}
	}
	for i := range bulkTraces {
		appendTrace(r.td, traceID(1<<40+uint64(i)),
			span{service: "bulk", id: 1, kind: ptrace.SpanKindServer, name: fmt.Sprintf("GET /item/%d", i), end: 1})
	}
	r.served["bulk"] = bulkTraces
	r.roots += bulkTraces
	r.traces = sc.Expected.Roots + bulkTraces // one trace per root request
	r.spans = r.td.SpanCount()
	return r
}

// batch returns round n's traces: the same requests as new traces.
func (r *faultRound) batch(n int) ptrace.Traces {
	td := ptrace.NewTraces()
	r.td.CopyTo(td)
	scenario.Restamp(td, uint32(n))
	return td
}

// dbFault is a fault of the store's database, made for real.
type dbFault struct {
	// dsn is the store's database; the harness created its role and
	// database, a fault's setup may have changed them.
	dsn string
	// start begins the fault before the first faulty round; nil: nothing
	// to begin.
	start func(ctx context.Context) error
	// during runs after each faulty round's bucket is queued; nil: nothing.
	during func(ctx context.Context, round int) error
	// met waits, during the last faulty round, until the writer has met
	// the fault, and says how.
	met func(ctx context.Context) (string, error)
	// end ends the fault after the last faulty round; nil: nothing to end.
	end func(ctx context.Context) error
}

// faultHarness is one fault test's cluster and processor.
type faultHarness struct {
	t       *testing.T
	rounds  int
	cluster *pgtest.Cluster
	p       *ownershipProcessor
	// admin is a superuser session on the store's database, reopened as
	// the server comes and goes.
	admin    *pgx.Conn
	adminDSN string
}

// conn returns the superuser session, reconnecting if it was lost.
func (h *faultHarness) conn(ctx context.Context) (*pgx.Conn, error) {
	if h.admin != nil && !h.admin.IsClosed() {
		return h.admin, nil
	}
	c, err := pgx.Connect(ctx, h.adminDSN)
	if err != nil {
		return nil, err
	}
	h.admin = c
	return c, nil
}

// exec runs statements as the superuser on the store's database.
func (h *faultHarness) exec(ctx context.Context, sqls ...string) error {
	c, err := h.conn(ctx)
	if err != nil {
		return err
	}
	for _, sql := range sqls {
		if _, err := c.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
	}
	return nil
}

// sampler watches, throughout a fault test, the rows the writer holds and
// the server sessions the store has, and keeps the most of each seen.
type sampler struct {
	done                   chan struct{}
	stopped                chan struct{}
	once                   sync.Once
	maxPending, maxSession int
}

func startSampler(h *faultHarness) *sampler {
	s := &sampler{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(s.stopped)
		ctx := context.Background()
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				conn.Close(ctx)
			}
		}()
		for {
			s.maxPending = max(s.maxPending, h.p.storeSink.Writer.Stats().PendingRows)
			// The server's sessions, when it answers: a session whose
			// client is gone stays until the server notices.
			if conn == nil || conn.IsClosed() {
				conn, _ = pgx.Connect(ctx, h.adminDSN)
			}
			var n int
			if conn != nil && conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'errorownership'").Scan(&n) == nil {
				s.maxSession = max(s.maxSession, n)
			} else if conn != nil {
				conn.Close(ctx)
			}
			select {
			case <-s.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return s
}

// stop stops the sampler, if it runs, and returns the most rows pending
// and store sessions it saw.
func (s *sampler) stop() (maxPending, maxSessions int) {
	s.once.Do(func() { close(s.done) })
	<-s.stopped
	return s.maxPending, s.maxSession
}

// sqlstate returns err's SQLSTATE, or "" if it has none.
func sqlstate(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// faultAttempts is how many failed attempts the writer makes in a fault
// before the fault ends: a few backoffs, and with a hanging lock a few
// write timeouts.
const faultAttempts = 3

// waitForState waits until the writer has failed faultAttempts times, the
// last with SQLSTATE code.
func (h *faultHarness) waitForState(ctx context.Context, code string) (string, error) {
	for {
		if st := h.p.storeSink.Writer.Stats(); sqlstate(st.LastError) == code && st.Retries >= faultAttempts {
			return fmt.Sprintf("%d failed attempts, the last with SQLSTATE %s", st.Retries, code), nil
		}
		select {
		case <-ctx.Done():
			st := h.p.storeSink.Writer.Stats()
			return "", fmt.Errorf("the writer did not fail %d times with SQLSTATE %s: %d retries, last error %w", faultAttempts, code, st.Retries, st.LastError)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// The faults. Each opens the store's database as the role collector,
// which owns it, and says how the database fails.
var dbFaults = []struct {
	name string
	// boundRounds, if not zero, bounds the writer's queue
	// (store.max_pending_rows) to about this many rounds' rows.
	boundRounds int
	open        func(ctx context.Context, h *faultHarness) (dbFault, error)
}{
	{
		// PostgreSQL crashes and comes back, again and again: killed
		// while a flush's transaction is open, just after the writer saw
		// a flush commit, and at the moment a bucket is queued.
		name: "SIGKILL and restart",
		open: func(ctx context.Context, h *faultHarness) (dbFault, error) {
			dsn, err := h.createDatabase(ctx, "")
			if err != nil {
				return dbFault{}, err
			}
			var midFlush, afterCommit, kills int
			return dbFault{
				dsn: dsn,
				during: func(ctx context.Context, round int) error {
					w := h.p.storeSink.Writer
					switch round % 3 {
					case 0: // while the flush's transaction has written
						for {
							var writing bool
							c, err := h.conn(ctx)
							if err == nil {
								err = c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
									WHERE application_name = 'errorownership' AND backend_xid IS NOT NULL)`).Scan(&writing)
							}
							if err != nil {
								return err
							}
							if writing {
								midFlush++
								break
							}
							if w.Stats().PendingFlushes == 0 {
								break // written before it was seen
							}
						}
					case 1: // as soon as the writer knows the flush committed
						for w.Stats().PendingFlushes > 0 {
							if ctx.Err() != nil {
								return ctx.Err()
							}
							time.Sleep(time.Millisecond)
						}
						afterCommit++
					}
					if h.admin != nil {
						h.admin.Close(ctx)
					}
					if err := h.cluster.Kill(ctx); err != nil {
						return err
					}
					kills++
					// Down for a moment: the writer's attempts fail meanwhile.
					time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond) //nolint:gosec // G404: a random pause between faults, not a secret
					return h.cluster.Start(ctx)
				},
				met: func(context.Context) (string, error) {
					if midFlush == 0 {
						return "", fmt.Errorf("no kill landed while a flush's transaction was open (%d kills)", kills)
					}
					return fmt.Sprintf("%d kills: %d while a flush's transaction was open, %d just after a commit", kills, midFlush, afterCommit), nil
				},
			}, nil
		},
	},
	{
		// The data disk fills up: the store's database lives in a
		// tablespace on a small tmpfs, and another table fills what is
		// left, so that every write needing a new page fails with 53100
		// disk_full, as PostgreSQL reports a full disk; the operator then
		// frees space by dropping that table. Mounting needs
		// CAP_SYS_ADMIN. Where it is refused, another session fills the
		// server's shared lock table instead, and the writer's
		// transactions fail with 53200 "out of shared memory": the
		// closest resource exhaustion that needs no privilege, equivalent
		// for the writer — the same SQLSTATE class 53 (insufficient
		// resources), raised in the middle of a flush's transaction, by
		// a resource someone else used up and later frees — which must
		// be retried, not rejected, as a full disk must.
		name: "disk full",
		open: func(ctx context.Context, h *faultHarness) (dbFault, error) {
			// The template database, the schema, and a few MB a round.
			dir, ok := pgtest.SmallDisk(h.t, (16+6*h.rounds)<<20)
			if !ok {
				h.t.Log("mounting refused: filling the shared lock table instead")
				dsn, err := h.createDatabase(ctx, "")
				if err != nil {
					return dbFault{}, err
				}
				f := h.sessionFault(dsn, fillLockTable)
				f.met = func(ctx context.Context) (string, error) { return h.waitForState(ctx, "53200") }
				return f, nil
			}
			if err := h.adminExec(ctx, "CREATE TABLESPACE small LOCATION '"+dir+"'"); err != nil {
				return dbFault{}, err
			}
			dsn, err := h.createDatabase(ctx, "small")
			if err != nil {
				return dbFault{}, err
			}
			return dbFault{
				dsn: dsn,
				start: func(ctx context.Context) error {
					// Uncompressed, live and never vacuumed away: the disk
					// stays full until the table goes.
					if err := h.exec(ctx, "CREATE TABLE filler (b text) WITH (autovacuum_enabled = false)",
						"ALTER TABLE filler ALTER b SET STORAGE PLAIN"); err != nil {
						return err
					}
					for {
						err := h.exec(ctx, "INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 1000)")
						if sqlstate(err) == "53100" {
							return nil
						}
						if err != nil {
							return fmt.Errorf("filling the disk: %w", err)
						}
					}
				},
				met: func(ctx context.Context) (string, error) { return h.waitForState(ctx, "53100") },
				end: func(ctx context.Context) error { return h.exec(ctx, "DROP TABLE filler") },
			}, nil
		},
	},
	{
		// The database is slow: another session holds a lock on a table
		// the writer writes (SHARE, as CREATE INDEX takes), and the
		// collector's role has a statement_timeout, which cancels the
		// writer's statements waiting for it (57014 query_canceled).
		name: "statement_timeout hit",
		open: func(ctx context.Context, h *faultHarness) (dbFault, error) {
			dsn, err := h.createDatabase(ctx, "")
			if err != nil {
				return dbFault{}, err
			}
			if err := h.adminExec(ctx, "ALTER ROLE collector SET statement_timeout = '300ms'"); err != nil {
				return dbFault{}, err
			}
			f := h.sessionFault(dsn, lockOperationStats)
			f.met = func(ctx context.Context) (string, error) { return h.waitForState(ctx, "57014") }
			return f, nil
		},
	},
	{
		// The same lock without a statement_timeout: each attempt waits
		// for it until store.write_timeout, and the flushes queue up to
		// store.max_pending_rows, which this case sets to two rounds'
		// rows, so that the oldest are dropped and counted.
		name:        "lock held by another session",
		boundRounds: 2,
		open: func(ctx context.Context, h *faultHarness) (dbFault, error) {
			dsn, err := h.createDatabase(ctx, "")
			if err != nil {
				return dbFault{}, err
			}
			f := h.sessionFault(dsn, lockOperationStats)
			f.met = func(ctx context.Context) (string, error) {
				for {
					var waiting bool
					c, err := h.conn(ctx)
					if err == nil {
						err = c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
							WHERE application_name = 'errorownership' AND wait_event_type = 'Lock')`).Scan(&waiting)
					}
					if err != nil {
						return "", err
					}
					if retries := h.p.storeSink.Writer.Stats().Retries; waiting && retries >= faultAttempts {
						return fmt.Sprintf("%d attempts timed out waiting for the lock", retries), nil
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			return f, nil
		},
	},
}

// sessionFault is the fault of another session, which runs sql at start
// and holds what it took until end, when it disconnects.
func (h *faultHarness) sessionFault(dsn, sql string) dbFault {
	var session *pgx.Conn
	return dbFault{
		dsn: dsn,
		start: func(ctx context.Context) error {
			var err error
			if session, err = pgx.Connect(ctx, h.adminDSN); err != nil {
				return err
			}
			_, err = session.Exec(ctx, sql)
			return err
		},
		end: func(ctx context.Context) error { return session.Close(ctx) },
	}
}

// lockOperationStats keeps the writer from inserting into operation_stats
// until its transaction ends.
const lockOperationStats = "BEGIN; LOCK TABLE operation_stats IN SHARE MODE"

// fillLockTable takes advisory locks until the server's shared lock table
// is full, and holds them until its transaction ends: every other
// transaction needing a lock of its own then fails with 53200 out of
// shared memory. Each lock is taken in a subtransaction of its own, so
// that the one finding the table full fails alone.
const fillLockTable = `BEGIN; DO $$
	DECLARE n bigint := 0;
	BEGIN
		LOOP
			BEGIN
				PERFORM pg_advisory_xact_lock(n);
				n := n + 1;
			EXCEPTION WHEN out_of_memory THEN
				EXIT;
			END;
		END LOOP;
	END $$`

// adminExec runs statements as the superuser on the postgres database.
func (h *faultHarness) adminExec(ctx context.Context, sqls ...string) error {
	c, err := pgx.Connect(ctx, h.cluster.DSN())
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	for _, sql := range sqls {
		if _, err := c.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
	}
	return nil
}

// createDatabase creates the role collector and a database it owns in
// tablespace (if not empty), and returns the DSN the store uses.
func (h *faultHarness) createDatabase(ctx context.Context, tablespace string) (string, error) {
	ts := ""
	if tablespace != "" {
		ts = " TABLESPACE " + tablespace
	}
	if err := h.adminExec(ctx, "CREATE ROLE collector LOGIN PASSWORD '"+testPassword+"'",
		"CREATE DATABASE stats OWNER collector"+ts); err != nil {
		return "", err
	}
	h.adminDSN = h.cluster.DSNFor("stats")
	return strings.Replace(h.adminDSN, "user=postgres", "user=collector password="+testPassword, 1), nil
}

// TestDatabaseFaultsSoak runs the processor against real PostgreSQL faults
// while spans flow: round after round, a batch of traces whose figures are
// known goes through the pipeline and is analysed, and its bucket queued
// for the store, while the database fails. Through every fault the spans
// pass on at once and whole, the writer holds no more than
// store.max_pending_rows, and once the database recovers the store holds
// every round's figures exactly once: the rounds the queue bound dropped,
// and counted, are missing; nothing else is, and nothing is counted twice.
// `make soak` runs more rounds and more faults.
func TestDatabaseFaultsSoak(t *testing.T) {
	rounds := soak.Pick(8, 60)
	firstFaulty, lastFaulty := 3, rounds-2
	round := newFaultRound()
	for _, tc := range dbFaults {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), soak.Pick(5*time.Minute, 60*time.Minute))
			defer cancel()
			h := &faultHarness{t: t, rounds: rounds, cluster: pgtest.Start(t)}
			defer func() {
				if h.admin != nil {
					h.admin.Close(context.Background())
				}
			}()
			fault, err := tc.open(ctx, h)
			require.NoError(t, err)

			core, logs := observer.New(zap.InfoLevel)
			tt := componenttest.NewTelemetry()
			defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
			sink := new(consumertest.TracesSink)
			cfg := testConfig(func(c *Config) {
				storeConfig(fault.dsn, func(sc *store.Config) {
					sc.Bucket = time.Second
					sc.WriteTimeout = 2 * time.Second
					sc.ShutdownTimeout = time.Minute
					if tc.boundRounds > 0 {
						// Three rows a bulk trace; the chain adds a few dozen.
						sc.MaxPendingRows = tc.boundRounds*3*bulkTraces + 3*bulkTraces/2
					}
				})(c)
				c.DecisionWait = 10 * time.Millisecond
				c.FlushInterval = time.Hour // the test flushes, once a round
			})
			proc, p := newTestProcessor(t, tt, cfg, sink, func(set *processor.Settings) { set.Logger = zap.New(core) })
			h.p = p
			defer func() {
				if t.Failed() {
					for _, e := range logs.All() {
						t.Logf("collector log: %s %s %v", e.Level, e.Message, strings.ReplaceAll(fmt.Sprint(e.ContextMap()), testPassword, "xxxxx"))
					}
				}
			}()
			require.NoError(t, proc.Start(ctx, hostFor(t, cfg)))
			var how string
			poolSize := int(p.store.Pool().Config().MaxConns)
			sampler := startSampler(h)
			defer sampler.stop()

			for n := 1; n <= rounds; n++ {
				faulty := n >= firstFaulty && n <= lastFaulty
				if n == firstFaulty && fault.start != nil {
					require.NoError(t, fault.start(ctx), "starting the fault")
				}
				// The pipeline: the batch passes on while the database
				// fails; a call that waited for it would hang here.
				done := make(chan error, 1)
				go func() { done <- proc.ConsumeTraces(ctx, round.batch(n)) }()
				select {
				case err := <-done:
					require.NoError(t, err)
				case <-time.After(time.Minute):
					t.Fatalf("round %d: ConsumeTraces has not returned after a minute", n)
				}
				require.Eventually(t, func() bool {
					return counter(t, tt, "traces_analyzed") == int64(n*round.traces)
				}, time.Minute, 5*time.Millisecond, "round %d analysed", n)
				p.flush(ctx, false)
				if faulty && fault.during != nil {
					require.NoError(t, fault.during(ctx, n), "round %d", n)
				}
				if n == firstFaulty-1 {
					// The database works before the fault: the schema is
					// in place and the rounds so far are written.
					require.Eventually(t, func() bool { return p.storeSink.Writer.Stats().PendingFlushes == 0 },
						time.Minute, 10*time.Millisecond, "the rounds before the fault written")
				}
				if n == lastFaulty {
					wctx, wcancel := context.WithTimeout(ctx, time.Minute)
					how, err = fault.met(wctx)
					wcancel()
					require.NoError(t, err, "the writer never met the fault")
					if fault.end != nil {
						require.NoError(t, fault.end(ctx), "ending the fault")
					}
				}
			}
			require.Eventually(t, func() bool {
				return p.storeSink.Writer.Stats().PendingFlushes == 0
			}, 5*time.Minute, 10*time.Millisecond, "the writer caught up after the fault")
			maxPending, maxSessions := sampler.stop()
			// The telemetry says what the writer did (read before
			// Shutdown, which ends it).
			st := p.storeSink.Writer.Stats()
			assert.Equal(t, int64(st.WrittenFlushes), counter(t, tt, "store_flushes", attrOutcome("written")), "store_flushes{written}")
			assert.Equal(t, int64(st.DroppedFlushes), counter(t, tt, "store_flushes", attrOutcome("dropped")), "store_flushes{dropped}")
			assert.Equal(t, int64(st.DroppedRows), counter(t, tt, "store_rows_dropped"), "store_rows_dropped")
			assert.Zero(t, counter(t, tt, "store_rows_pending"), "store_rows_pending once caught up")
			require.NoError(t, proc.Shutdown(ctx))
			assert.Equal(t, st, p.storeSink.Writer.Stats(), "nothing left for Shutdown to write")

			// The pipeline lost nothing.
			assert.Equal(t, rounds*round.spans, sink.SpanCount(), "spans passed on")
			// Memory stayed bounded.
			bound := p.store.Config().MaxPendingRows
			assert.LessOrEqual(t, maxPending, bound, "rows pending beyond store.max_pending_rows")
			assert.LessOrEqual(t, maxSessions, poolSize, "server sessions the store holds, beyond its pool's %d", poolSize)

			// Exactly once: every round the writer kept, none twice.
			dropped := int(st.DroppedFlushes)
			if tc.boundRounds == 0 {
				assert.Zero(t, dropped, "flushes dropped under the default bound")
			} else {
				assert.Positive(t, dropped, "the bound dropped nothing: the test did not fill the queue")
			}
			assert.Zero(t, st.RejectedFlushes, "flushes rejected")
			kept := int64(rounds - dropped)
			db, err := pgx.Connect(ctx, h.adminDSN)
			require.NoError(t, err)
			defer db.Close(ctx)
			var flushes, rowsPerFlush, shapes int64
			require.NoError(t, db.QueryRow(ctx, "SELECT count(*), coalesce(max(rows), 0), count(DISTINCT rows) FROM flushes").Scan(&flushes, &rowsPerFlush, &shapes))
			assert.Equal(t, kept, flushes, "flushes recorded")
			assert.EqualValues(t, 1, shapes, "every flush is one round: the same rows")
			assert.EqualValues(t, int64(dropped)*rowsPerFlush, st.DroppedRows, "rows dropped: %d flushes of %d", dropped, rowsPerFlush)
			served := map[string]int64{}
			verdicts := map[string]int64{}
			rows, err := db.Query(ctx, `SELECT service, sum(served), sum(verdict_own), sum(verdict_propagated), sum(verdict_coincidental)
				FROM operation_stats GROUP BY service`)
			require.NoError(t, err)
			for rows.Next() {
				var svc string
				var s, own, prop, coinc int64
				require.NoError(t, rows.Scan(&svc, &s, &own, &prop, &coinc))
				served[svc] = s
				verdicts["own"] += own
				verdicts["propagated"] += prop
				verdicts["coincidental"] += coinc
			}
			require.NoError(t, rows.Err())
			wantServed, wantVerdicts := map[string]int64{}, map[string]int64{"own": 0, "propagated": 0, "coincidental": 0}
			for svc, n := range round.served {
				wantServed[svc] = kept * n
			}
			for kind, n := range round.verdicts {
				wantVerdicts[kind] = kept * n
			}
			assert.Equal(t, wantServed, served, "requests served, by service")
			assert.Equal(t, wantVerdicts, verdicts, "verdicts")
			var roots int64
			require.NoError(t, db.QueryRow(ctx, "SELECT coalesce(sum(requests), 0) FROM root_stats").Scan(&roots))
			assert.Equal(t, kept*round.roots, roots, "root requests")
			checkLogsHidePassword(t, logs)

			t.Logf("%d rounds of %d spans (%d rows a flush), faulty from %d to %d; %s", rounds, round.spans, rowsPerFlush, firstFaulty, lastFaulty, how)
			t.Logf("writer: %d written, %d duplicates, %d retries, %d dropped (%d rows), %d rejected; rows pending at most %d of %d; store sessions at most %d (pool %d)",
				st.WrittenFlushes, st.DuplicateFlushes, st.Retries, st.DroppedFlushes, st.DroppedRows, st.RejectedFlushes, maxPending, bound, maxSessions, poolSize)
			t.Logf("store: %d root requests, %d flushes; truth: %d rounds kept of %d", roots, flushes, kept, rounds)
		})
	}
}
