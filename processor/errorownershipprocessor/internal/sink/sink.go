// SPDX-License-Identifier: Apache-2.0

// Package sink is where the errorownership processor hands its statistics
// buckets: the Sink interface, and Store, which writes them to PostgreSQL.
package sink

import (
	"context"
	"time"

	"github.com/errorownership/errorownership/dependencyanalysis"
)

// Snapshot is one statistics bucket: what every worker analysed between
// Start and End, merged.
type Snapshot struct {
	// Stats are the merged figures. Their names are Symbols of Symbols.
	Stats *dependencyanalysis.Stats
	// Symbols resolves the names in Stats. It is shared and keeps growing;
	// it is safe for concurrent use.
	Symbols *dependencyanalysis.Symbols
	// Start and End bound the bucket: End of one flush is Start of the next.
	Start, End time.Time
	// Seq numbers the snapshots a processor hands its sink, from 1; with
	// the sink's own instance name it identifies the flush.
	Seq uint64
	// Corrects is, for the late snapshot of a bucket flushed before, the
	// Seq of that bucket's snapshot, whose provisional verdicts it
	// corrects (dependencyanalysis.Stats.Provisional); 0 otherwise.
	Corrects uint64
}

// Sink receives the statistics every flush_interval and once at shutdown.
// The processor calls Flush from one goroutine at a time, and only for
// non-empty buckets. The Snapshot's Stats are reused after Flush returns, so
// a Sink must copy what it keeps. An error is logged and the bucket dropped:
// the processor neither retries nor blocks the pipeline on a sink.
type Sink interface {
	Flush(ctx context.Context, s *Snapshot) error
}
