package errorownershipprocessor

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/store"
	"github.com/errorownership/errorownership/store/pgtest"
)

// storeConfig points a processor at dsn.
func storeConfig(dsn string) func(*Config) {
	return func(c *Config) {
		sc := store.DefaultConfig()
		sc.DSN = dsn
		c.Store = configoptional.Some(sc)
	}
}

// runProcessor feeds batches through a processor with the given config
// and shuts it down, which analyses everything and writes the last bucket.
func runProcessor(t *testing.T, mutate func(*Config), batches []ptrace.Traces) {
	t.Helper()
	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
	proc, p := newTestProcessor(t, tt, testConfig(mutate), new(consumertest.TracesSink))
	ctx := context.Background()
	require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
	for _, td := range batches {
		require.NoError(t, proc.ConsumeTraces(ctx, td))
	}
	require.NoError(t, proc.Shutdown(ctx))
	assert.EqualValues(t, 1, p.storeSink.writer.Stats().WrittenFlushes, "the last bucket was written")
}

func openStore(t *testing.T, dsn string) *store.Store {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.DSN = dsn
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

	// The article's table, read back from the store: 1, 2, 4, 8, 8, 8, 8 Ƞ.
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
		r, err := http.Get(base + hints.Path + "?service=checkout")
		require.NoError(t, err)
		if r.StatusCode != http.StatusOK {
			r.Body.Close()
			return false
		}
		res = r
		return true
	}, 10*time.Second, 20*time.Millisecond)
	defer res.Body.Close()
	var doc hints.Hints
	require.NoError(t, json.NewDecoder(res.Body).Decode(&doc))
	modes := map[string]hooks.Mode{}
	for _, e := range doc.Edges {
		modes[e.PeerService] = e.Mode
	}
	assert.Equal(t, hooks.ModeFailOpen, modes["recommendations"])
	assert.Equal(t, hooks.ModeFailClose, modes["payments"])
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
	require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
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
	// The first names the services here, so that the merged model's
	// edges map to them when it is read.
	require.NoError(t, proc.ConsumeTraces(ctx, coincidentalTrace(1)))
	require.Eventually(t, func() bool { return counter(t, tt, "traces_analyzed") == 1 }, 10*time.Second, time.Millisecond)
	p.storeModel.read(ctx)

	require.NoError(t, proc.ConsumeTraces(ctx, coincidentalTrace(2)))
	require.Eventually(t, func() bool { return counter(t, tt, "traces_analyzed") == 2 }, 10*time.Second, time.Millisecond)
	assert.Positive(t, counter(t, tt, "verdicts", coincidental), "judged by the merged model, not by its own two traces")
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
	require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
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
	st := p.storeSink.writer.Stats()
	assert.Zero(t, st.WrittenFlushes)
	assert.Positive(t, st.DroppedFlushes)
	assert.Positive(t, st.DroppedRows)
	assert.NotContains(t, err.Error(), "password")
}

func attrOutcome(v string) attribute.KeyValue { return attribute.String("outcome", v) }
