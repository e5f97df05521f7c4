// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/errorownership/errorownership/internal/otlpfile"
	"github.com/errorownership/errorownership/internal/testsupport/collectorproc"
	"github.com/errorownership/errorownership/internal/testsupport/scenario"
	"github.com/errorownership/errorownership/internal/testsupport/soak"
	"github.com/errorownership/errorownership/store/pgtest"
)

// The chain scenario's figures per trace (per root request), worked out by
// hand in its expected file: a serves 1 request, b 2, c 4, and d, e, f, g
// 8 each; d's 8 failures are its own, the 7 above it propagated.
const (
	chainServed     = 1 + 2 + 4 + 4*8
	chainOwn        = 8
	chainPropagated = 1 + 2 + 4
)

// load posts the chain scenario's traces to a collector over OTLP/HTTP from
// several goroutines, as SDK exporters would, until stopped or until the
// collector stops answering: one trace a request, each a new trace. It
// notes what was sent and when each trace was acknowledged.
type load struct {
	lines []ptrace.Traces // the scenario's requests, one trace each
	stamp atomic.Uint32

	mu        sync.Mutex
	attempted int
	acked     map[pcommon.TraceID]time.Time
}

func newLoad(t *testing.T) *load {
	l := &load{lines: scenarioRequests(t, "chain_retry_every_hop"), acked: map[pcommon.TraceID]time.Time{}}
	l.stamp.Store(1 << 20) // clear of the stamps other tests use
	return l
}

// run sends to c from conc goroutines until stop is closed or c fails to
// answer, and returns once every goroutine has.
func (l *load) run(t *testing.T, c *collector, conc int, stop <-chan struct{}) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := l.stamp.Add(1)
				td := ptrace.NewTraces()
				l.lines[int(n)%len(l.lines)].CopyTo(td)
				scenario.Restamp(td, n)
				id := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
				body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
				if err != nil {
					t.Error(err)
					return
				}
				l.mu.Lock()
				l.attempted++
				l.mu.Unlock()
				resp, err := client.Post("http://"+c.httpAddr+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
				if err != nil {
					return // the collector is going or gone
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return
				}
				l.mu.Lock()
				l.acked[id] = time.Now()
				l.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// take returns what was attempted and acknowledged since the last take,
// and starts counting afresh.
func (l *load) take() (attempted int, acked map[pcommon.TraceID]time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	attempted, acked = l.attempted, l.acked
	l.attempted, l.acked = 0, map[pcommon.TraceID]time.Time{}
	return attempted, acked
}

// checkPassedOn fails the test unless every trace acknowledged was passed
// on whole, and nothing else was.
func (l *load) checkPassedOn(t *testing.T, acked map[pcommon.TraceID]time.Time, exported map[pcommon.TraceID]int) {
	t.Helper()
	spans := l.lines[0].SpanCount()
	for id := range acked {
		if exported[id] != spans {
			t.Errorf("trace %s was acknowledged; %d of its %d spans were passed on", id, exported[id], spans)
		}
	}
	for id, n := range exported {
		if n != spans {
			t.Errorf("trace %s passed on with %d spans of %d", id, n, spans)
		}
	}
}

// exportedTraces reads the file exporter's output: the spans of each trace
// the collector passed on.
func exportedTraces(t *testing.T, c *collector) map[pcommon.TraceID]int {
	t.Helper()
	out := map[pcommon.TraceID]int{}
	require.NoError(t, otlpfile.ReadFile(c.outFile, func(td ptrace.Traces) {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					out[sp.TraceID()]++
				}
			}
		}
	}))
	return out
}

// storedTraces returns how many chain traces the store's figures hold,
// checking that they add up as whole traces, and how many of their failed
// requests it holds without a verdict. A propagated verdict on an edge
// without a mode yet is held (rejudge), in memory until the model learns
// the edge, but its provisional verdict is written with its trace: so
// none may lack one, after a graceful stop or a SIGKILL.
func storedTraces(ctx context.Context, t *testing.T, dsn string) (traces, verdictless int) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var served, failed, own, propagated, coincidental int
	require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(sum(served), 0), coalesce(sum(failed), 0), coalesce(sum(verdict_own), 0),
		coalesce(sum(verdict_propagated), 0), coalesce(sum(verdict_coincidental), 0)
		FROM operation_stats`).Scan(&served, &failed, &own, &propagated, &coincidental))
	traces = served / chainServed
	require.Equal(t, traces*chainServed, served, "requests served: not whole traces")
	// Own verdicts rest on no edge: they are never held.
	require.Equal(t, traces*chainOwn, own, "own verdicts of %d traces", traces)
	require.Zero(t, coincidental, "coincidental verdicts: the chain has none")
	require.Equal(t, failed, own+propagated+coincidental, "failed requests, against their verdicts")
	require.LessOrEqual(t, propagated, traces*chainPropagated, "propagated verdicts of %d traces: counted twice", traces)
	return traces, traces*chainPropagated - propagated
}

// heldNow reads how many verdicts the collector p holds to be judged again
// (every analysis in it, the connectors' own included).
func heldNow(t require.TestingT, p *collectorproc.Process) int {
	held, err := p.Metric("otelcol_processor_errorownership_verdicts_held")
	require.NoError(t, err)
	judged, err := p.Metric("otelcol_processor_errorownership_verdicts_rejudged")
	require.NoError(t, err)
	return int(held - judged)
}

// learning is the store extension's edge_model that keeps the model
// learning for good: no edge gets a mode, so every propagated verdict is
// held, as while a new edge is learned.
const learning = `    edge_model:
      min_samples: 1000000000`

// ackedSince counts the traces acknowledged at or after from.
func ackedSince(acked map[pcommon.TraceID]time.Time, from time.Time) int {
	n := 0
	for _, at := range acked {
		if !at.Before(from) {
			n++
		}
	}
	return n
}

// lossWindow is how long before a SIGKILL the traces it may lose were
// acknowledged: decision_wait before a trace is analysed, flush_interval
// before its statistics are flushed, and the write; plus a second for a
// scheduler on two busy cores.
const lossWindow = decisionWait + flushInterval + time.Second

// TestCollectorRestartSoak stops the real collector under load, its store
// up, and starts it again with the same configuration against the same
// database, round after round, then a last time gracefully, and compares
// the store with what was sent. SIGTERM loses nothing: the store holds
// every trace the collector passed on (its file exporter's output, which
// holds every trace acknowledged) exactly once. SIGKILL, while the edges
// are being learned and the propagated verdicts held to be judged again
// (rejudge), loses what was not yet flushed — at most the traces
// acknowledged in the last decision_wait and flush_interval before the
// kill — but no verdict of a request it flushed: the held ones' provisional
// verdicts were written with them. It counts nothing twice: never more than
// was sent, and the restarted collector's traces exactly once.
// `make soak` runs ten restarts a case.
func TestCollectorRestartSoak(t *testing.T) {
	bin := buildCollector(t)
	restarts := soak.Pick(1, 10)
	// Several times lossWindow, so that most of what a SIGKILL could
	// lose is outside it.
	phase := soak.Pick(6*time.Second, 10*time.Second)
	const conc = 4
	tests := []struct {
		name   string
		signal syscall.Signal
		store  []string // the store extension's keys
	}{
		{"SIGTERM", syscall.SIGTERM, nil},
		{"SIGKILL", syscall.SIGKILL, []string{learning}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), soak.Pick(5*time.Minute, 30*time.Minute))
			defer cancel()
			dsn := pgtest.Start(t).DSN()
			l := newLoad(t)
			stored := 0
			for i := range restarts {
				c := startCollectorWith(t, bin, storeProcessor, storeExtension(dsn, tt.store...))
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					l.run(t, c, conc, stop)
				}()
				time.Sleep(phase)
				// Under load: the senders keep going until the collector
				// stops answering.
				var held int
				if tt.signal == syscall.SIGKILL {
					held = heldNow(t, c.Process)
				}
				stoppedAt := time.Now()
				var log string
				if tt.signal == syscall.SIGKILL {
					c.Kill()
				} else {
					_, log = terminate(t, c, time.Minute)
				}
				close(stop)
				<-done
				attempted, acked := l.take()
				now, verdictless := storedTraces(ctx, t, dsn)
				counted := now - stored
				stored = now
				rate := float64(len(acked)) / phase.Seconds()
				if tt.signal == syscall.SIGKILL {
					window := ackedSince(acked, stoppedAt.Add(-lossWindow))
					lost := len(acked) - counted
					// In seconds of the traffic just before the kill.
					lostFor := time.Duration(float64(lost) / float64(window) * float64(lossWindow))
					t.Logf("stop %d: SIGKILL after %d traces acknowledged (%.0f a second), %d sent: %d stored, %d lost, %d acknowledged in the last %v: the traffic of %v (decision_wait + flush_interval: %v); %d verdicts held just before the kill, %d stored requests without a verdict",
						i+1, len(acked), rate, attempted, counted, lost, window, lossWindow, lostFor.Round(10*time.Millisecond), decisionWait+flushInterval, held, verdictless)
					assert.LessOrEqual(t, counted, attempted, "stop %d: more traces stored than sent: counted twice", i+1)
					assert.LessOrEqual(t, lost, window, "stop %d: lost more than what was acknowledged in the last %v", i+1, lossWindow)
					// Killed in the learning phase, or the kill tests nothing.
					assert.Positive(t, held, "stop %d: verdicts held at the kill", i+1)
					assert.Zero(t, verdictless, "stop %d: stored requests without a verdict: held verdicts not written provisionally", i+1)
					continue
				}
				exported := exportedTraces(t, c)
				t.Logf("stop %d: SIGTERM after %d traces acknowledged (%.0f a second), %d sent: %d passed on, %d stored",
					i+1, len(acked), rate, attempted, len(exported), counted)
				l.checkPassedOn(t, acked, exported)
				assert.Equal(t, len(exported), counted, "stop %d: traces stored, against those the collector passed on", i+1)
				assert.Zero(t, verdictless, "stop %d: stored requests without a verdict", i+1)
				assert.LessOrEqual(t, counted, attempted, "stop %d: more traces stored than sent", i+1)
				checkLog(t, log)
				assert.NotContains(t, log, "Shutdown left error-ownership statistics unwritten")
			}

			// The last collector, stopped gracefully once the load ends:
			// what it was sent is stored exactly once.
			c := startCollectorWith(t, bin, storeProcessor, storeExtension(dsn, tt.store...))
			stop := make(chan struct{})
			go func() {
				time.Sleep(phase)
				close(stop)
			}()
			l.run(t, c, conc, stop)
			_, log := terminate(t, c, time.Minute)
			attempted, acked := l.take()
			now, verdictless := storedTraces(ctx, t, dsn)
			counted := now - stored
			assert.Zero(t, verdictless, "stored requests without a verdict after the last collector's graceful stop")
			t.Logf("after the restarts: %d traces sent and acknowledged, %d stored", len(acked), counted)
			assert.Equal(t, attempted, len(acked), "every trace sent to the last collector acknowledged")
			assert.Equal(t, len(acked), counted, "the last collector's traces, stored exactly once")
			exported := exportedTraces(t, c)
			l.checkPassedOn(t, acked, exported)
			assert.Equal(t, len(exported), counted, "traces passed on, against those stored")
			checkLog(t, log)
		})
	}
}
