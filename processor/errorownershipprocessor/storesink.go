package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/metadata"
	"github.com/errorownership/errorownership/store"
)

// storeSink hands every bucket to a store.Writer, which writes it exactly
// once from its own goroutine: Flush never waits for the database.
type storeSink struct {
	writer   *store.Writer
	instance string
	seq      uint64
}

// newStoreSink writes to st, logging the writer's failures to logger.
func newStoreSink(st *store.Store, logger *zap.Logger) *storeSink {
	return &storeSink{writer: store.NewWriter(st, store.WithLogger(logger)), instance: store.NewInstanceID()}
}

// Flush copies the bucket, since the writer keeps it until it is written
// and the processor reuses its statistics.
func (s *storeSink) Flush(_ context.Context, snap *Snapshot) error {
	stats := dependencyanalysis.NewStats()
	stats.Merge(snap.Stats)
	s.seq++
	s.writer.Enqueue(store.Flush{Instance: s.instance, Seq: s.seq, Bucket: snap.Start, Stats: stats, Names: snap.Symbols})
	return nil
}

// registerTelemetry publishes the writer's counters.
func (s *storeSink) registerTelemetry(tb *metadata.TelemetryBuilder) error {
	outcome := func(v string) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", v)))
	}
	written, duplicate, dropped, rejected := outcome("written"), outcome("duplicate"), outcome("dropped"), outcome("rejected")
	return errors.Join(
		tb.RegisterProcessorErrorownershipStoreFlushesCallback(func(_ context.Context, o metric.Int64Observer) error {
			st := s.writer.Stats()
			o.Observe(int64(st.WrittenFlushes), written)
			o.Observe(int64(st.DuplicateFlushes), duplicate)
			o.Observe(int64(st.DroppedFlushes), dropped)
			o.Observe(int64(st.RejectedFlushes), rejected)
			return nil
		}),
		tb.RegisterProcessorErrorownershipStoreNamesTruncatedCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(s.writer.Stats().NamesCut))
			return nil
		}),
		tb.RegisterProcessorErrorownershipStoreRetriesCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(s.writer.Stats().Retries))
			return nil
		}),
		tb.RegisterProcessorErrorownershipStoreRowsDroppedCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(s.writer.Stats().DroppedRows))
			return nil
		}),
		tb.RegisterProcessorErrorownershipStoreRowsPendingCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(s.writer.Stats().PendingRows))
			return nil
		}),
	)
}
