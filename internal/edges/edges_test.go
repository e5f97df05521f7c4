// SPDX-License-Identifier: Apache-2.0

package edges

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"
	"go.uber.org/zap"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/store"
	"github.com/errorownership/errorownership/store/pgtest"
)

// TestStoreViewSharesOneRead: before the model could ever be read, hints
// requests share one read of a database that hangs, and each returns when
// its own context ends rather than queueing behind the others' reads.
func TestStoreViewSharesOneRead(t *testing.T) {
	cfg := store.DefaultConfig()
	cfg.DSN = configopaque.String(fmt.Sprintf("postgres://collector@127.0.0.1:%d/stats?sslmode=disable&connect_timeout=30", pgtest.Unresponsive(t)))
	st, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const interval = 20 * time.Second // how long one read may take
	var mu sync.RWMutex
	m := NewStore(st, dependencyanalysis.DefaultConfig().EdgeModel, dependencyanalysis.NewSymbols(0), &mu, interval, zap.NewNop())

	// One request is ready to wait 3s for the database; the others, which
	// come while its read is under way, 100ms.
	long := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := m.View(ctx)
		long <- err
	}()
	time.Sleep(50 * time.Millisecond)
	const requests = 9
	var wg sync.WaitGroup
	took := make(chan time.Duration, requests)
	for range requests {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			if _, err := m.View(ctx); !errors.Is(err, ErrNoModelYet) {
				t.Errorf("View = %v, want ErrNoModelYet", err)
			}
			took <- time.Since(start)
		})
	}
	wg.Wait()
	close(took)
	for d := range took {
		// Queued behind the first request's read, it would wait 3s.
		if d > 1500*time.Millisecond {
			t.Errorf("a request waited %v for another's read; it asked to wait 100ms", d)
		}
	}
	if err := <-long; !errors.Is(err, ErrNoModelYet) {
		t.Errorf("the first request: View = %v, want ErrNoModelYet", err)
	}
	done := make(chan struct{})
	go func() { m.Shutdown(); close(done) }()
	select {
	case <-done:
	case <-time.After(interval / 2):
		t.Fatal("Shutdown did not cut the shared read short")
	}
}
