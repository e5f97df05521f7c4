// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/internal/figures"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/metadatatest"
)

// recordingListener keeps what the processor hands a connector.
type recordingListener struct {
	mu       sync.Mutex // workers hand on verdicts concurrently
	panics   bool
	verdicts []figures.Verdict
	buckets  int
	served   uint64
}

func (l *recordingListener) Counted(v *figures.Verdict) {
	if l.panics {
		panic("a connector's bug")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.verdicts = append(l.verdicts, *v)
}

func (l *recordingListener) Flushed(b *figures.Bucket) {
	if l.panics {
		panic("a connector's bug")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buckets++
	for _, op := range b.Stats.Operations {
		l.served += op.Served
	}
}

// TestFiguresForConnectors: a processor created with a listener hands it
// every verdict as it is counted, with its trace, and every bucket, and
// does not publish itself; a listener that panics costs a count, not the
// spans or the analysis.
func TestFiguresForConnectors(t *testing.T) {
	for _, panics := range []bool{false, true} {
		name := map[bool]string{false: "listener", true: "panicking listener"}[panics]
		t.Run(name, func(t *testing.T) {
			tt := componenttest.NewTelemetry()
			defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
			l := &recordingListener{panics: panics}
			set := metadatatest.NewSettings(tt)
			next := &consumertest.TracesSink{}
			p, err := NewFactory().CreateTraces(figures.WithListener(context.Background(), l), set, testConfig(nil), next)
			require.NoError(t, err)
			assert.Empty(t, figures.Published(set.ID), "a processor a connector created is not published")
			require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
			td := ptrace.NewTraces()
			failingChain(td, traceID(1))
			require.NoError(t, p.ConsumeTraces(context.Background(), td))
			require.NoError(t, p.Shutdown(context.Background()))
			assert.Equal(t, 5, next.SpanCount(), "the spans passed on")
			if panics {
				assert.Positive(t, counter(t, tt, "panics_recovered"))
				return
			}
			require.Len(t, l.verdicts, 3, "frontend, api and db failed")
			for _, v := range l.verdicts {
				assert.Equal(t, traceID(1), v.TraceID)
				assert.NotEmpty(t, v.Symbols.Name(v.Service))
			}
			assert.Equal(t, 1, l.buckets)
			assert.Equal(t, uint64(3), l.served)
		})
	}
}

// TestPublishedUntilShutdown: a processor created by the collector is
// published under its ID from creation to shutdown, for the connectors
// that name it.
func TestPublishedUntilShutdown(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
	set := metadatatest.NewSettings(tt)
	p, err := NewFactory().CreateTraces(context.Background(), set, testConfig(nil), consumertest.NewNop())
	require.NoError(t, err)
	require.Len(t, figures.Published(set.ID), 1)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.Shutdown(context.Background()))
	assert.Empty(t, figures.Published(set.ID))
}
