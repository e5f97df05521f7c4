// SPDX-License-Identifier: Apache-2.0

package sink

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/metadata"
	"github.com/errorownership/errorownership/store"
)

// Store hands every bucket to a store.Writer, which writes it exactly once
// from its own goroutine: Flush never waits for the database. Each flush's
// identity is the Store's instance name and the snapshot's Seq, so that a
// late snapshot can name the flush it corrects (Snapshot.Corrects).
type Store struct {
	// Writer writes the buckets; the processor starts and shuts it down.
	Writer *store.Writer

	once     sync.Once
	instance string
}

// NewStore writes to st, logging the writer's failures to logger.
func NewStore(st *store.Store, logger *zap.Logger, opts ...store.WriterOption) *Store {
	return &Store{Writer: store.NewWriter(st, append([]store.WriterOption{store.WithLogger(logger)}, opts...)...)}
}

// Flush queues the bucket; the writer turns it into rows before it
// returns, so the processor may reuse the statistics at once.
func (s *Store) Flush(_ context.Context, snap *Snapshot) error {
	f := store.Flush{Bucket: snap.Start, Stats: snap.Stats, Names: snap.Symbols}
	if snap.Seq != 0 {
		// Named once per Store, and so per process lifetime, as the
		// exactly-once identity requires (store.NewInstanceID). A
		// snapshot without a Seq gets the writer's identity, and can
		// name no flush it corrects.
		s.once.Do(func() { s.instance = store.NewInstanceID() })
		f.Instance, f.Seq, f.Corrects = s.instance, snap.Seq, snap.Corrects
	}
	s.Writer.Enqueue(f)
	return nil
}

// RegisterTelemetry publishes the writer's counters.
func (s *Store) RegisterTelemetry(tb *metadata.TelemetryBuilder) error {
	outcome := func(v string) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", v)))
	}
	written, duplicate, dropped, rejected := outcome("written"), outcome("duplicate"), outcome("dropped"), outcome("rejected")
	return errors.Join(
		tb.RegisterProcessorErrorownershipStoreFlushesCallback(func(_ context.Context, o metric.Int64Observer) error {
			st := s.Writer.Stats()
			o.Observe(int64(st.WrittenFlushes), written)
			o.Observe(int64(st.DuplicateFlushes), duplicate)
			o.Observe(int64(st.DroppedFlushes), dropped)
			o.Observe(int64(st.RejectedFlushes), rejected)
			return nil
		}),
		tb.RegisterProcessorErrorownershipStoreNamesTruncatedCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(s.Writer.Stats().NamesCut))
			return nil
		}),
		tb.RegisterProcessorErrorownershipStoreRetriesCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(s.Writer.Stats().Retries))
			return nil
		}),
		tb.RegisterProcessorErrorownershipStoreRowsDroppedCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(s.Writer.Stats().DroppedRows))
			return nil
		}),
		tb.RegisterProcessorErrorownershipStoreRowsPendingCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(s.Writer.Stats().PendingRows))
			return nil
		}),
	)
}
