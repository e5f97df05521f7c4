// SPDX-License-Identifier: Apache-2.0

package hintsserver

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/errorownership/errorownership/internal/edges"
	"github.com/errorownership/errorownership/ownership"
)

// slowSource answers after a while, as a store being read does.
type slowSource struct{ delay time.Duration }

func (s slowSource) View(ctx context.Context) (*edges.View, error) {
	select {
	case <-time.After(s.delay):
		return nil, edges.ErrNoModelYet
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestShutdownWithConnectionsThatNeverAsk: a client that opened a
// connection and sent nothing does not hold the shutdown (net/http would
// wait five seconds for it), while a request in flight is still answered.
func TestShutdownWithConnectionsThatNeverAsk(t *testing.T) {
	cfg := confighttp.NewDefaultServerConfig()
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	core, logs := observer.New(zap.InfoLevel)
	s := New(cfg, 30*time.Second, ownership.DefaultRetryBudget(), slowSource{300 * time.Millisecond}, zap.New(core))
	require.NoError(t, s.Start(context.Background(), componenttest.NewNopHost(), componenttest.NewNopTelemetrySettings()))
	addr := logs.FilterMessage("Serving ownership hints").All()[0].ContextMap()["endpoint"].(string)

	silent, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer silent.Close()

	answered := make(chan int, 1)
	go func() {
		res, err := http.Get("http://" + addr + ownership.HintsPath + "?service=checkout")
		if err != nil {
			answered <- 0
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		answered <- res.StatusCode
	}()
	time.Sleep(100 * time.Millisecond) // the request is in flight

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, s.Shutdown(ctx), "nothing was left in flight")
	took := time.Since(start)
	assert.Equal(t, http.StatusServiceUnavailable, <-answered, "the request in flight was answered")
	assert.Less(t, took, 3*time.Second, "the silent connection held the shutdown")
}
