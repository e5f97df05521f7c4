// SPDX-License-Identifier: Apache-2.0

// Package simtest fills a store for the dashboards' and the plugin's tests
// with a short retry-storm simulator run: real services instrumented with
// the OpenTelemetry SDK, the real errorownership processor, PostgreSQL.
package simtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/errorownership/errorownership/cmd/errorownership/simulation"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
)

// The routes the run serves; operations are "GET " + route.
const (
	RetryRoute     = "/chain/retry_every_hop"
	OwnershipRoute = "/chain/ownership"
	CheckoutRoute  = "/checkout"
)

// Store is a store filled by Run, with the collector that wrote it still
// running: it serves hints and keeps writing (empty) buckets.
type Store struct {
	DSN       string
	Collector *simulation.Collector
	// Begin is when the run began.
	Begin time.Time
}

// Run runs, through a collector writing to dsn: the chain of docs/design.md §1
// A→B→C→D→E→F→G with D failing under retry-every-hop and under ownership;
// the checkout scenario until the collector has learned checkout →
// recommendations is fail-open, and again with the hints, so that
// coincidental errors are audited. It returns once the store holds every
// figure. The caller shuts the collector down.
func Run(ctx context.Context, dsn string) (s *Store, err error) {
	s = &Store{DSN: dsn, Begin: time.Now()}
	// A trace is analysed decision_wait after its last span: on a loaded
	// machine a callee's spans can come later than the demo's 300ms, and
	// the callee would be named by its address. The tests want names.
	s.Collector, err = simulation.StartCollector(ctx, simulation.CollectorConfig{DSN: dsn,
		DecisionWait: 2 * time.Second, FlushInterval: time.Second, BudgetRatio: simulation.BudgetRatio})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = s.Collector.Shutdown(context.Background())
		}
	}()
	run := func(top *simulation.Topology, p simulation.Policy, route string, n int, hints bool, addrs map[string]string) (*simulation.RunResult, error) {
		r, err := simulation.Run(ctx, simulation.RunConfig{Topology: top, Policy: p, Route: route, Hints: hints,
			HintsURL: s.Collector.HintsURL, OTLPEndpoint: s.Collector.OTLPEndpoint, Requests: n, Concurrency: 4,
			BudgetRatio: simulation.BudgetRatio, Seed: 1, Addrs: addrs})
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", route, p, err)
		}
		return r, nil
	}
	if _, err := run(simulation.Chain(), simulation.RetryEveryHop, RetryRoute, 60, false, nil); err != nil {
		return nil, err
	}
	if _, err := run(simulation.Chain(), simulation.Ownership, OwnershipRoute, 60, false, nil); err != nil {
		return nil, err
	}
	learning, err := run(simulation.Checkout(), simulation.Ownership, CheckoutRoute, 1000, false, nil)
	if err != nil {
		return nil, err
	}
	if err := until(ctx, 45*time.Second, func() (bool, error) {
		h, err := s.Hints(ctx, "checkout")
		return err == nil && slices.ContainsFunc(h.Edges, func(e ownership.HintEdge) bool {
			return e.PeerService == "recommendations" && e.Mode == ownership.ModeFailOpen
		}), err
	}); err != nil {
		return nil, fmt.Errorf("the collector did not learn checkout → recommendations fail-open: %w", err)
	}
	// Once the model is learned, checkout's own failures that coincide
	// with a failed recommendations call are judged coincidental.
	if _, err := run(simulation.Checkout(), simulation.Ownership, CheckoutRoute, 500, true, learning.Addrs); err != nil {
		return nil, err
	}
	// The collector analyses a trace decision_wait after its last span and
	// writes every second: wait for the audit, then for the last flushes.
	st, err := store.OpenDSN(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if err := until(ctx, 30*time.Second, func() (bool, error) {
		audit, err := st.Audit(ctx, s.Begin.Add(-time.Minute), time.Now().Add(time.Minute), "checkout", 1)
		return len(audit) > 0, err
	}); err != nil {
		return nil, fmt.Errorf("no coincidental error of checkout was audited: %w", err)
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(3 * time.Second):
	}
	return s, nil
}

// Hints asks the collector's hints endpoint for a service's hints.
func (s *Store) Hints(ctx context.Context, service string) (ownership.Hints, error) {
	var h ownership.Hints
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Collector.HintsURL+ownership.HintsPath+"?service="+service, nil)
	if err != nil {
		return h, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return h, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return h, fmt.Errorf("hints: %s", res.Status)
	}
	return h, json.NewDecoder(res.Body).Decode(&h)
}

// until polls done every quarter second until it reports true, for at
// most limit.
func until(ctx context.Context, limit time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := done()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("not within %v", limit)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
