// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/extension/errorownershiphintsextension"
	"github.com/errorownership/errorownership/extension/errorownershipstoreextension"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/metadatatest"
	"github.com/errorownership/errorownership/store"
	"github.com/errorownership/errorownership/store/pgtest"
)

// testStores are the configurations of the errorownership_store
// extensions the tests' processors name (storeConfig), which hostFor starts.
var (
	testStores   sync.Map // component.ID → store.Config
	testStoreSeq atomic.Int64
)

// storeConfig points a processor at dsn, through an errorownership_store
// extension of its own, its store keys changed by mutate.
func storeConfig(dsn string, mutate ...func(*store.Config)) func(*Config) {
	return func(c *Config) {
		sc := store.DefaultConfig()
		sc.DSN = configopaque.String(dsn)
		for _, m := range mutate {
			m(&sc)
		}
		id := component.MustNewIDWithName("errorownership_store", strconv.FormatInt(testStoreSeq.Add(1), 10))
		testStores.Store(id, sc)
		c.Store = errorownershipstoreextension.NewRef(id)
	}
}

// hostFor is a collector host that holds the extensions in exts and, when
// cfg names one (storeConfig), its errorownership_store extension, started
// as a collector starts it before the pipelines, its edge_model the one
// cfg gives (the processor's own model's, which the tests set).
func hostFor(t testing.TB, cfg *Config, exts ...extensionHost) extensionHost {
	t.Helper()
	host := extensionHost{}
	for _, e := range exts {
		maps.Copy(host, e)
	}
	if cfg.Store == nil {
		return host
	}
	sc, ok := testStores.Load(cfg.Store.ID())
	require.True(t, ok, "store %s was not made by storeConfig", cfg.Store)
	f := errorownershipstoreextension.NewFactory()
	ecfg := f.CreateDefaultConfig().(*errorownershipstoreextension.Config)
	ecfg.Config = sc.(store.Config)
	ecfg.EdgeModel = cfg.Engine().EdgeModel
	ctx := context.Background()
	ext, err := f.Create(ctx, extensiontest.NewNopSettings(f.Type()), ecfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(ctx, host))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(ctx)) })
	host[cfg.Store.ID()] = ext
	return host
}

// runProcessor feeds batches through a processor with the given config
// and shuts it down, which analyses everything and writes the last bucket.
func runProcessor(t *testing.T, mutate func(*Config), batches []ptrace.Traces) {
	t.Helper()
	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
	proc, p := newTestProcessor(t, tt, testConfig(mutate), new(consumertest.TracesSink))
	ctx := context.Background()
	require.NoError(t, proc.Start(ctx, hostFor(t, p.cfg)))
	for _, td := range batches {
		require.NoError(t, proc.ConsumeTraces(ctx, td))
	}
	require.NoError(t, proc.Shutdown(ctx))
	assert.EqualValues(t, 1, p.storeSink.Writer.Stats().WrittenFlushes, "the last bucket was written")
}

func openStore(t *testing.T, dsn string) *store.Store {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.DSN = configopaque.String(dsn)
	st, err := store.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

func scenarioBatches(t *testing.T, name string) []ptrace.Traces {
	return readScenario(t, filepath.Join("..", "..", "testdata", "scenarios", name+".json"))
}

// TestStoreReplicasMerge: two processors that each analyse half of the
// traces write to one database the same totals as one processor that
// analyses them all writes to another.
func TestStoreReplicasMerge(t *testing.T) {
	cluster := pgtest.Start(t)
	ctx := context.Background()
	oneDSN, err := cluster.CreateDatabase(ctx, "one")
	require.NoError(t, err)
	twoDSN, err := cluster.CreateDatabase(ctx, "two")
	require.NoError(t, err)

	batches := scenarioBatches(t, "chain_retry_every_hop")
	runProcessor(t, storeConfig(oneDSN), batches)
	runProcessor(t, storeConfig(twoDSN), batches[:len(batches)/2])
	runProcessor(t, storeConfig(twoDSN), batches[len(batches)/2:])

	from, to := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	one, two := openStore(t, oneDSN), openStore(t, twoDSN)
	ampOne, err := one.Amplification(ctx, from, to)
	require.NoError(t, err)
	ampTwo, err := two.Amplification(ctx, from, to)
	require.NoError(t, err)
	assert.Equal(t, ampOne, ampTwo)
	accOne, err := one.ClaimAccuracy(ctx, from, to)
	require.NoError(t, err)
	accTwo, err := two.ClaimAccuracy(ctx, from, to)
	require.NoError(t, err)
	assert.Equal(t, accOne, accTwo)

	// docs/design.md §1's table, read back from the store: 1, 2, 4, 8, 8, 8, 8 Ƞ.
	served, err := two.ServedPerRoot(ctx, from, to)
	require.NoError(t, err)
	perRoot := map[string]float64{}
	for _, r := range served {
		perRoot[r.Service] = r.PerRoot
	}
	assert.Equal(t, map[string]float64{"a": 1, "b": 2, "c": 4, "d": 8, "e": 8, "f": 8, "g": 8}, perRoot)
}

// TestStoreServesHintsToEveryReplica: one replica learns from traffic and
// writes its statistics; another replica, which saw none of it, serves the
// same hints from the store.
func TestStoreServesHintsToEveryReplica(t *testing.T) {
	dsn := pgtest.Start(t).DSN()
	runProcessor(t, storeConfig(dsn), scenarioBatches(t, "coincidental"))

	base, _, _ := serveHints(t, storeConfig(dsn))
	// The replica reads the model in the background once it starts.
	var res *http.Response
	require.Eventually(t, func() bool {
		r, err := http.Get(base + ownership.HintsPath + "?service=checkout")
		require.NoError(t, err)
		if r.StatusCode != http.StatusOK {
			r.Body.Close()
			return false
		}
		res = r
		return true
	}, 10*time.Second, 20*time.Millisecond)
	defer res.Body.Close()
	var doc ownership.Hints
	require.NoError(t, json.NewDecoder(res.Body).Decode(&doc))
	modes := map[string]ownership.Mode{}
	for _, e := range doc.Edges {
		modes[e.PeerService] = e.Mode
	}
	assert.Equal(t, ownership.ModeFailOpen, modes["recommendations"])
	assert.Equal(t, ownership.ModeFailClose, modes["payments"])
}

// TestStoreJudgesByTheMergedModel: with a store, a replica judges by the
// model merged from every replica's flushes, the one its hints serve too:
// a replica that has seen too little traffic to learn an edge still calls
// an error coincidental when another replica's evidence shows it to be.
func TestStoreJudgesByTheMergedModel(t *testing.T) {
	dsn := pgtest.Start(t).DSN()
	runProcessor(t, storeConfig(dsn), scenarioBatches(t, "coincidental")) // the replica that learns

	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
	proc, p := newTestProcessor(t, tt, testConfig(func(c *Config) {
		storeConfig(dsn)(c)
		c.DecisionWait = 10 * time.Millisecond
	}), new(consumertest.TracesSink))
	ctx := context.Background()
	require.NoError(t, proc.Start(ctx, hostFor(t, p.cfg)))
	defer func() { require.NoError(t, proc.Shutdown(ctx)) }()

	// checkout fails on its own while recommendations, which it
	// tolerates, failed too; payments answered.
	coincidentalTrace := func(n uint64) ptrace.Traces {
		td := ptrace.NewTraces()
		appendTrace(td, traceID(n),
			span{service: "checkout", id: 1, kind: ptrace.SpanKindServer, name: "POST /checkout", failed: true, end: 20},
			span{service: "checkout", id: 2, parent: 1, kind: ptrace.SpanKindClient, name: "GET", failed: true, startMs: 1, end: 5},
			span{service: "recommendations", id: 3, parent: 2, kind: ptrace.SpanKindServer, name: "GET /recommendations", failed: true, startMs: 2, end: 4},
			span{service: "checkout", id: 4, parent: 1, kind: ptrace.SpanKindClient, name: "POST", startMs: 6, end: 10},
			span{service: "payments", id: 5, parent: 4, kind: ptrace.SpanKindServer, name: "POST /payments", startMs: 7, end: 9},
		)
		return td
	}
	// The replica has just started: it has read the merged model once,
	// before it saw any of these names, and judges its very first trace
	// by it.
	_, err := p.storeModel.View(ctx)
	require.NoError(t, err)
	require.NoError(t, proc.ConsumeTraces(ctx, coincidentalTrace(1)))
	require.Eventually(t, func() bool { return counter(t, tt, "traces_analyzed") == 1 }, 10*time.Second, time.Millisecond)
	assert.EqualValues(t, 1, counter(t, tt, "verdicts", coincidental), "judged by the merged model, not by its own one trace")
}

// TestStoreDownKeepsThePipelineFlowing: with the database stopped the spans
// still pass through at once, and shutdown says what it could not write.
func TestStoreDownKeepsThePipelineFlowing(t *testing.T) {
	cluster := pgtest.Start(t)
	dsn := cluster.DSN()
	require.NoError(t, cluster.Stop(context.Background()))

	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
	sink := new(consumertest.TracesSink)
	proc, p := newTestProcessor(t, tt, testConfig(func(c *Config) {
		storeConfig(dsn)(c)
		c.FlushInterval = 50 * time.Millisecond
		c.DecisionWait = 10 * time.Millisecond
	}), sink)
	ctx := context.Background()
	require.NoError(t, proc.Start(ctx, hostFor(t, p.cfg)))
	batches := scenarioBatches(t, "http_4xx")
	spans := 0
	for _, td := range batches {
		start := time.Now()
		require.NoError(t, proc.ConsumeTraces(ctx, td))
		assert.Less(t, time.Since(start), time.Second, "the pipeline never waits for the database")
		spans += td.SpanCount()
	}
	assert.Equal(t, spans, sink.SpanCount())
	// The writer keeps retrying; its telemetry shows the rows waiting.
	require.Eventually(t, func() bool { return counter(t, tt, "store_retries") > 0 }, 10*time.Second, 20*time.Millisecond)
	assert.Positive(t, counter(t, tt, "store_rows_pending"))
	assert.Zero(t, counter(t, tt, "store_flushes", attrOutcome("written")))

	shutdownCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := proc.Shutdown(shutdownCtx)
	require.Error(t, err, "shutdown reports what it could not write")
	st := p.storeSink.Writer.Stats()
	assert.Zero(t, st.WrittenFlushes)
	assert.Positive(t, st.DroppedFlushes)
	assert.Positive(t, st.DroppedRows)
	assert.NotContains(t, err.Error(), "password")
}

func attrOutcome(v string) attribute.KeyValue { return attribute.String("outcome", v) }

// testPassword is the password of the test DSNs; no log line may show it.
const testPassword = "hunter2-processor"

// checkLogsHidePassword fails the test if a log line shows testPassword,
// without printing it.
func checkLogsHidePassword(t *testing.T, logs *observer.ObservedLogs) {
	t.Helper()
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	for _, e := range logs.All() {
		buf, err := enc.EncodeEntry(e.Entry, e.Context)
		require.NoError(t, err)
		if strings.Contains(buf.String(), testPassword) {
			t.Errorf("the log line %q shows the password", e.Message)
		}
		buf.Free()
	}
}

// TestShutdownBoundedWithTheDatabaseHanging: with a database that accepts
// connections and never answers, and a hints request waiting for it,
// Shutdown — with a context that never ends, as the collector's — returns
// after store.shutdown_timeout, having logged the failure and what it
// dropped, never the password.
func TestShutdownBoundedWithTheDatabaseHanging(t *testing.T) {
	port := pgtest.Unresponsive(t)
	core, logs := observer.New(zap.InfoLevel)
	host, base := startHintsExtension(t, nil)
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	proc, p := newTestProcessor(t, tt, testConfig(func(c *Config) {
		storeConfig(fmt.Sprintf("postgres://collector:%s@127.0.0.1:%d/stats?sslmode=disable", testPassword, port), func(sc *store.Config) {
			sc.ShutdownTimeout = 200 * time.Millisecond
			sc.WriteTimeout = time.Second
		})(c)
		id := component.MustNewID("errorownership_hints")
		c.HintsExtension = &id
	}), new(consumertest.TracesSink), func(set *processor.Settings) { set.Logger = zap.New(core) })
	ctx := context.Background()
	require.NoError(t, proc.Start(ctx, hostFor(t, p.cfg, host)))
	require.NoError(t, proc.ConsumeTraces(ctx, scenarioBatches(t, "http_4xx")[0]))

	// A hints request that waits for the database.
	answered := make(chan int, 1)
	go func() {
		res, err := http.Get(base + ownership.HintsPath + "?service=checkout")
		if err != nil {
			answered <- 0
			return
		}
		res.Body.Close()
		answered <- res.StatusCode
	}()
	// The migration at start fails once the write timeout passes.
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("Cannot write error-ownership statistics").Len() > 0 },
		time.Minute, 10*time.Millisecond, "the first failure is logged")

	done := make(chan error, 1)
	go func() { done <- proc.Shutdown(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Shutdown still waiting for the database a minute after a 200ms shutdown_timeout")
	}
	require.Error(t, err, "shutdown reports what it could not write")
	assert.Contains(t, err.Error(), "unwritten")
	select {
	case code := <-answered:
		assert.NotEqual(t, http.StatusOK, code, "the hints request cannot have been answered from the database")
	case <-time.After(time.Minute):
		t.Fatal("the hints request in flight still waits after shutdown")
	}
	assert.EqualValues(t, 1, p.storeSink.Writer.Stats().DroppedFlushes, "the last bucket, counted as dropped")
	assert.Equal(t, 1, logs.FilterMessageSnippet("Shutdown left error-ownership statistics unwritten").Len())
	checkLogsHidePassword(t, logs)
	if strings.Contains(err.Error(), testPassword) {
		t.Error("the shutdown error shows the password")
	}
}

// TestHintsBeforeTheFirstFlush: the schema is migrated at start, so the
// hints answer 200 as soon as the database is reachable, before any flush
// created it; while the database is down they answer 503.
func TestHintsBeforeTheFirstFlush(t *testing.T) {
	tests := []struct {
		name string
		down bool // the database is down when the processor starts
	}{
		{"database up at start", false},
		{"database down at start, then up", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cluster := pgtest.Start(t)
			ctx := context.Background()
			if tc.down {
				require.NoError(t, cluster.Stop(ctx))
			}
			base, _, tt := serveHints(t, storeConfig(cluster.DSN()))
			get := func() int {
				res, err := http.Get(base + ownership.HintsPath + "?service=checkout")
				require.NoError(t, err)
				res.Body.Close()
				return res.StatusCode
			}
			if tc.down {
				assert.Equal(t, http.StatusServiceUnavailable, get(), "the database is down")
				require.NoError(t, cluster.Start(ctx))
			}
			assert.Equal(t, http.StatusOK, get())
			assert.Zero(t, counter(t, tt, "store_flushes", attrOutcome("written")), "no flush made the schema")
			require.Eventually(t, func() bool {
				v, err := openStore(t, cluster.DSN()).SchemaVersion(ctx)
				return err == nil && v == store.SchemaVersionWanted()
			}, time.Minute, 50*time.Millisecond, "the schema, migrated without a flush")
		})
	}
}

// TestLongNamesCutAndCounted: a span named by an 8 KB statement is written
// with its name cut, and the cut is counted in the telemetry.
func TestLongNamesCutAndCounted(t *testing.T) {
	dsn := pgtest.Start(t).DSN()
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	proc, p := newTestProcessor(t, tt, testConfig(func(c *Config) {
		storeConfig(dsn)(c)
		c.DecisionWait = 10 * time.Millisecond
		c.FlushInterval = 50 * time.Millisecond
	}), new(consumertest.TracesSink))
	ctx := context.Background()
	require.NoError(t, proc.Start(ctx, hostFor(t, p.cfg)))
	long := "SELECT " + strings.Repeat("column_name, ", 8<<10/13)
	td := ptrace.NewTraces()
	appendTrace(td, traceID(1), span{service: "db-client", id: 1, kind: ptrace.SpanKindServer, name: long, failed: true, end: 10})
	require.NoError(t, proc.ConsumeTraces(ctx, td))
	require.Eventually(t, func() bool { return counter(t, tt, "store_flushes", attrOutcome("written")) == 1 },
		time.Minute, 10*time.Millisecond, "the flush with the long name is written")
	metadatatest.AssertEqualProcessorErrorownershipStoreNamesTruncated(t, tt,
		[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	require.NoError(t, proc.Shutdown(ctx))

	var stored string
	require.NoError(t, openStore(t, dsn).Pool().QueryRow(ctx, "SELECT operation FROM operation_stats WHERE service = 'db-client'").Scan(&stored))
	assert.Len(t, stored, store.MaxNameBytes)
	assert.True(t, strings.HasPrefix(long, stored[:store.MaxNameBytes-len("…")-10]), "the stored name begins the span's")
	assert.Contains(t, stored, "…")
}

// TestHintsAndVerdictsJudgeByTheStoresEdgeModel: the edge_model of the
// errorownership_store extension judges the merged counts for the verdicts
// of the processor that names it and the hints of the hints extension that
// names it alike; the processor's own edge model has no say.
func TestHintsAndVerdictsJudgeByTheStoresEdgeModel(t *testing.T) {
	dsn := pgtest.Start(t).DSN()
	runProcessor(t, storeConfig(dsn), scenarioBatches(t, "coincidental"))
	tests := []struct {
		name       string
		minSamples int
		want       ownership.Mode
	}{
		{"the default edge_model learns the edge", dependencyanalysis.DefaultConfig().EdgeModel.MinSamples, ownership.ModeFailOpen},
		{"an edge_model wanting more samples than the run had", 1_000_000, ownership.ModeUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			storeID := component.MustNewIDWithName("errorownership_store", "shared")
			sf := errorownershipstoreextension.NewFactory()
			scfg := sf.CreateDefaultConfig().(*errorownershipstoreextension.Config)
			scfg.DSN = configopaque.String(dsn)
			scfg.ModelRefresh = time.Second
			scfg.EdgeModel.MinSamples = tc.minSamples
			storeExt, err := sf.Create(ctx, extensiontest.NewNopSettings(sf.Type()), scfg)
			require.NoError(t, err)
			require.NoError(t, storeExt.Start(ctx, componenttest.NewNopHost()))
			t.Cleanup(func() { require.NoError(t, storeExt.Shutdown(ctx)) })
			stores := extensionHost{storeID: storeExt}

			_, base := startHintsExtension(t, func(c *errorownershiphintsextension.Config) {
				c.Store = errorownershipstoreextension.NewRef(storeID)
			}, stores)
			tt := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tt.Shutdown(ctx)) })
			cfg := testConfig(func(c *Config) { c.Store = errorownershipstoreextension.NewRef(storeID) })
			require.Equal(t, dependencyanalysis.DefaultConfig().EdgeModel, cfg.Engine().EdgeModel, "the processor's own edge_model stays the default")
			proc, p := newTestProcessor(t, tt, cfg, new(consumertest.TracesSink))
			require.NoError(t, proc.Start(ctx, stores))
			t.Cleanup(func() { require.NoError(t, proc.Shutdown(ctx)) })

			// The verdicts' model, in the hints' form, once it has been read.
			var verdicts map[string]ownership.Mode
			require.Eventually(t, func() bool {
				v, err := p.storeModel.View(ctx)
				if err != nil {
					return false
				}
				verdicts = modesOf(v.Edges("checkout"))
				return len(verdicts) > 0
			}, 10*time.Second, 20*time.Millisecond)
			var hints map[string]ownership.Mode
			require.Eventually(t, func() bool {
				res, err := http.Get(base + ownership.HintsPath + "?service=checkout")
				require.NoError(t, err)
				defer res.Body.Close()
				if res.StatusCode != http.StatusOK {
					return false
				}
				var doc ownership.Hints
				require.NoError(t, json.NewDecoder(res.Body).Decode(&doc))
				hints = modesOf(doc.Edges)
				return len(hints) > 0
			}, 10*time.Second, 20*time.Millisecond)
			assert.Equal(t, tc.want, verdicts["recommendations"], "the verdicts' mode")
			assert.Equal(t, verdicts, hints, "the hints judge as the verdicts do")
			// The modes the verdicts read, by the processor's symbols.
			table, ok := p.edges.Modes().(dependencyanalysis.ModeTable)
			require.True(t, ok)
			failOpen := 0
			for _, m := range table {
				if m == ownership.ModeFailOpen {
					failOpen++
				}
			}
			assert.Equal(t, tc.want == ownership.ModeFailOpen, failOpen > 0, "the verdicts' modes: %v", table)
		})
	}
}

// modesOf maps each edge's callee to its mode.
func modesOf(edges []ownership.HintEdge) map[string]ownership.Mode {
	m := map[string]ownership.Mode{}
	for _, e := range edges {
		m[e.PeerService] = e.Mode
	}
	return m
}
