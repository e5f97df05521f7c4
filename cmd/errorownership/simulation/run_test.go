// SPDX-License-Identifier: Apache-2.0

package simulation

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunRate: with a rate, the root requests are spread over the run
// rather than sent at once: five at twenty a second take four intervals of
// 50ms. Only the lower bound is checked: a slow machine may take longer,
// never shorter.
func TestRunRate(t *testing.T) {
	otlp := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer otlp.Close()
	top, err := ParseTopology([]byte("root: a\nservices: [{name: a}]\n"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, RunConfig{Topology: top, Policy: RetryEveryHop, Route: "/rate",
		OTLPEndpoint: otlp.URL + "/v1/traces", Requests: 5, Concurrency: 2, Rate: 20, Seed: 1})
	require.NoError(t, err)
	assert.Equal(t, int64(5), res.Served["a"])
	assert.GreaterOrEqual(t, res.End.Sub(res.Start), 200*time.Millisecond)
}
