// SPDX-License-Identifier: Apache-2.0

package pgtest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// startTimeout bounds initdb plus start, which take about a second.
const startTimeout = 2 * time.Minute

// Start starts a private cluster for one test, removed when the test ends.
// Use it when the test stops or restarts the server; otherwise NewDatabase
// is faster. Without the server binaries the test is skipped, or fails when
// the environment variable CI is set: CI must not pass by testing nothing.
func Start(tb testing.TB) *Cluster {
	tb.Helper()
	return StartWith(tb, Options{})
}

// StartWith is Start with options; opts.Dir is ignored (the cluster always
// lives in a temporary directory).
func StartWith(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	RequireBinaries(tb)
	opts.Dir = ""
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := StartCluster(ctx, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Remove(); err != nil {
			tb.Errorf("pgtest: removing the cluster: %v", err)
		}
	})
	return c
}

// RequireBinaries skips the test, or fails it when CI is set, if the
// PostgreSQL server binaries are missing. With -short (make test-unit, the
// everyday loop) it skips the test, or fails it when CI is set: make test,
// which CI runs, never passes -short.
func RequireBinaries(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		if InCI() {
			tb.Fatal("needs a PostgreSQL server, which -short leaves out; CI must not pass by testing nothing: run make test, without -short")
		}
		tb.Skip("needs a PostgreSQL server, which -short (make test-unit) leaves out; make test runs it")
	}
	if _, err := FindBinaries(); err != nil {
		if InCI() {
			tb.Fatalf("%v (CI is set, so this is a failure, not a skip)", err)
		}
		tb.Skip(err)
	}
}

// InCI reports whether the environment variable CI is set to anything but
// "", "0" or "false", as CI services do.
func InCI() bool {
	switch strings.ToLower(os.Getenv("CI")) {
	case "", "0", "false":
		return false
	}
	return true
}

// The cluster shared by a test binary's NewDatabase calls.
var (
	mainCalled   atomic.Bool
	sharedOnce   sync.Once
	shared       *Cluster
	sharedErr    error
	databaseSeq  atomic.Int64
	nonNameChars = regexp.MustCompile(`[^a-z0-9_]+`)
)

// Main runs the tests and then stops the cluster shared by NewDatabase. Call
// it from TestMain of every package that uses NewDatabase:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	mainCalled.Store(true)
	code := m.Run()
	if shared != nil {
		if err := shared.Remove(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// Shared returns the test binary's shared cluster, starting it on first use.
// The package's TestMain must call Main, which stops it.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	RequireBinaries(tb)
	if !mainCalled.Load() {
		tb.Fatal("pgtest: the shared cluster needs func TestMain(m *testing.M) { pgtest.Main(m) } in this package, which stops it after the tests")
	}
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		shared, sharedErr = StartCluster(ctx, Options{})
	})
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	return shared
}

// NewDatabase creates an empty database in the shared cluster, dropped when
// the test ends, and returns its connection string.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	c := Shared(tb)
	name := nonNameChars.ReplaceAllString(strings.ToLower(tb.Name()), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	name = fmt.Sprintf("t_%s_%d", name, databaseSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// FORCE: a test that failed may have left connections open.
		if err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return c.DSNFor(name)
}
