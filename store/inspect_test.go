// SPDX-License-Identifier: Apache-2.0

package store

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store/pgtest"
)

// TestWhatAReaderChecks: the schema check names what is missing without
// migrating; the data range and names say what a window holds.
func TestWhatAReaderChecks(t *testing.T) {
	ctx := testContext(t)
	cfg := DefaultConfig()
	cfg.DSN = configopaque.String(pgtest.NewDatabase(t))
	empty, err := Open(ctx, cfg)
	require.NoError(t, err)
	defer empty.Close()
	require.NoError(t, empty.Ping(ctx))
	var se *SchemaError
	require.True(t, errors.As(empty.CheckSchema(ctx), &se))
	assert.Equal(t, &SchemaError{Have: 0, Want: SchemaVersionWanted(), Missing: MigrationsAfter(0)}, se)
	assert.Len(t, se.Missing, int(SchemaVersionWanted()), "one file per version")
	require.True(t, errors.As(empty.CheckSchema(ctx), &se), "checking did not migrate")

	s := newStore(t)
	require.NoError(t, s.CheckSchema(ctx))
	_, _, ok, err := s.DataRange(ctx)
	require.NoError(t, err)
	assert.False(t, ok)
	_, err = s.Write(ctx, knownFlush("a", 1, t0))
	require.NoError(t, err)
	_, err = s.Write(ctx, knownFlush("a", 2, t0.Add(2*time.Hour)))
	require.NoError(t, err)
	first, last, ok, err := s.DataRange(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, t0, first)
	assert.Equal(t, t0.Add(2*time.Hour), last)

	names, err := s.Names(ctx, t0, t0.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, &Names{Services: []string{"backend", "frontend"}, Peers: []string{"backend", "cache", "unknown"},
		Operations: map[string][]string{"backend": {"/api"}, "frontend": {"GET /"}}}, names)
	names, err = s.Names(ctx, t0.Add(time.Minute), t0.Add(time.Hour))
	require.NoError(t, err)
	assert.Empty(t, names.Services)
}

// TestTraffic: requests per operation, calls per edge, and each edge
// judged on the window's evidence unweighted.
func TestTraffic(t *testing.T) {
	s := newStore(t)
	ctx := testContext(t)
	for seq, at := range []time.Time{t0, t0.Add(time.Hour)} {
		_, err := s.Write(ctx, knownFlush("a", uint64(seq+1), at))
		require.NoError(t, err)
	}
	cfg := dependencyanalysis.DefaultConfig().EdgeModel
	traffic, err := s.Traffic(ctx, t0, t0.Add(2*time.Hour), cfg)
	require.NoError(t, err)
	assert.Equal(t, counted(
		OperationTraffic{Service: "backend", Operation: "/api", OperationFigures: OperationFigures[float64]{Served: 2600}},
		OperationTraffic{Service: "frontend", Operation: "GET /", OperationFigures: OperationFigures[float64]{
			Served: 2000, Failed: 200, Own: 80, Propagated: 100, Coincidental: 20}},
	), traffic.Operations)
	require.Len(t, traffic.Edges, 3)
	api := traffic.Edges[1]
	assert.Equal(t, "frontend GET / backend /api", api.Service+" "+api.Operation+" "+api.PeerService+" "+api.PeerOperation)
	assert.Equal(t, CallFigures[float64]{2000, 400, 2600, 600}, api.CallFigures)
	assert.Equal(t, CallFigures[int64]{2000, 400, 2600, 600}, api.Seen)
	assert.Equal(t, SamplingCounted, api.Sampling)
	assert.Equal(t, ownership.ModeFailClose, api.Mode, "298 of 300 failed alone failed the request")
	assert.Equal(t, cfg.Judge(dependencyanalysis.EdgeCounts{Failed: 300, FailedRequestFailed: 298, Samples: 300, OK: 1600, OKRequestFailed: 2}), api.Estimate)
	cache := traffic.Edges[2]
	assert.Equal(t, ownership.ModeFailOpen, cache.Mode, "none of 500 failed alone failed the request")

	_, err = s.Traffic(ctx, t0, t0.Add(time.Hour), dependencyanalysis.ModelConfig{})
	assert.ErrorContains(t, err, "edge_model.min_samples")
}
