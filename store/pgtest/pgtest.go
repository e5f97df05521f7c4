// SPDX-License-Identifier: Apache-2.0

// Package pgtest gives tests throwaway PostgreSQL clusters: Start for a
// private cluster a test may stop, restart or crash (Cluster.Kill),
// NewDatabase for a fresh database in one cluster shared by the test binary
// (which then needs Main in TestMain), SmallDisk for a file system that
// fills up, Unresponsive for a database host that hangs.
//
// The clusters themselves are internal/pgcluster's, which the demo and
// `make db` use without linking the testing package. Without the server
// binaries a test is skipped, or fails when the environment variable CI is
// set.
package pgtest

import (
	"context"

	"github.com/errorownership/errorownership/internal/pgcluster"
)

// Cluster is one PostgreSQL cluster.
type Cluster = pgcluster.Cluster

// Options configure StartCluster.
type Options = pgcluster.Options

// InstallHint tells what to do when the server binaries are missing.
const InstallHint = pgcluster.InstallHint

// ErrNotInstalled is returned when no PostgreSQL server binaries are found.
var ErrNotInstalled = pgcluster.ErrNotInstalled

// StartCluster initialises (if needed) and starts a cluster that the
// caller stops and removes.
func StartCluster(ctx context.Context, opts Options) (*Cluster, error) {
	return pgcluster.StartCluster(ctx, opts)
}

// FindBinaries returns the directory of the newest PostgreSQL server
// binaries, or ErrNotInstalled.
func FindBinaries() (string, error) { return pgcluster.FindBinaries() }
