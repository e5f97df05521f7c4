// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configopaque"

	da "github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/store"
	"github.com/errorownership/errorownership/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or writes it there with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path) //nolint:gosec // G304: a golden file of testdata, named by the test
	require.NoError(t, err, "run go test ./cmd/errorownership -run %s -update to write it", t.Name())
	if !bytes.Equal(want, []byte(got)) {
		t.Errorf("%s is out of date: run go test ./cmd/errorownership -run '%s' -update, and review the diff\n--- got:\n%s", path, t.Name(), got)
	}
}

// fixtureBucket is when the fixture's statistics were written: the
// scenarios' own day, so that their audit entries (dated by span time)
// fall in the window the golden files ask for.
var fixtureBucket = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// fixtureWindow are --from and --to around fixtureBucket.
var fixtureWindow = []string{"--from", "2026-11-01T00:00:00Z", "--to", "2026-11-01T01:00:00Z"}

// fixtureScenarios are analysed into the fixture: the coincidental-error
// story and the chain of docs/design.md §1 under error ownership.
var fixtureScenarios = []string{"coincidental.json", "chain_ownership.json"}

// fixtureDSN returns a new database holding the fixture scenarios'
// statistics as a collector would have written them in one bucket at
// bucket: the engine's figures over the committed OTLP files, so every
// number in a golden file can be traced to a scenario's story.
func fixtureDSN(t *testing.T, bucket time.Time) string {
	t.Helper()
	return fixtureDSNWith(t, bucket, nil)
}

// fixtureDSNWith is fixtureDSN with the statistics changed by edit before
// they are written.
func fixtureDSNWith(t *testing.T, bucket time.Time, edit func(*da.Stats)) string {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	cfg := da.DefaultConfig()
	cfg.EdgeModel.HalfLife = 0
	var files []string
	for _, f := range fixtureScenarios {
		files = append(files, filepath.Join(scenarioDir, f))
	}
	rep, err := analyzeFiles(cfg, files, io.Discard)
	require.NoError(t, err)
	if edit != nil {
		edit(rep.stats)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sc := store.DefaultConfig()
	sc.DSN = configopaque.String(dsn)
	st, err := store.Open(ctx, sc)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Migrate(ctx)
	require.NoError(t, err)
	_, err = st.Write(ctx, store.Flush{Instance: "fixture", Seq: 1, Bucket: bucket, Stats: rep.stats, Names: rep.syms})
	require.NoError(t, err)
	return dsn
}

// pgtestEmptyDatabase returns a database without the schema.
func pgtestEmptyDatabase(t *testing.T) string { return pgtest.NewDatabase(t) }
