// SPDX-License-Identifier: Apache-2.0

package simulation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/internal/pgcluster"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
)

// SimulateOptions configure Simulate. Zero values take the defaults in
// brackets.
type SimulateOptions struct {
	Topology *Topology
	Policies []RetryPolicy
	// Requests are root requests per policy [1000]; Concurrency root
	// requests at once [4].
	Requests, Concurrency int
	// DSN is an existing database; empty starts a throwaway PostgreSQL
	// cluster, removed at the end.
	DSN  string
	Seed uint64
	// Out receives progress lines.
	Out io.Writer
}

// Simulated is what the simulator measured under one policy.
type Simulated struct {
	Policy   RetryPolicy
	Requests int
	// Served is the requests each service's server handled per root
	// request, retries included.
	Served map[string]float64
	// Availability is the share of root requests answered without a
	// server fault.
	Availability float64
	// StormRadiusMax and StormRadiusMean are the processor's, from the
	// store (store.Roots).
	StormRadiusMax  int
	StormRadiusMean float64
}

// Simulate runs the topology under each policy with the real simulator —
// services on loopback, the processor in process, PostgreSQL — as the
// demo does, and returns what it measured. Under error ownership it first
// runs the topology once for the processor to learn which calls are
// tolerated, and waits for the hints to say so, so that the measured run
// is the steady state the predictions assume (docs/design.md §11, A4).
func Simulate(ctx context.Context, o SimulateOptions) (_ []Simulated, err error) {
	if o.Requests <= 0 {
		o.Requests = 1000
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	begin := time.Now()
	progress := func(format string, args ...any) {
		fmt.Fprintf(o.Out, "[%5.1fs] %s\n", time.Since(begin).Seconds(), fmt.Sprintf(format, args...))
	}
	budget := BudgetRatio
	for _, p := range o.Policies {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if p.Policy == Ownership {
			budget = p.Budget // the hints announce it, and the hooks keep it
		}
	}
	dsn, prefix, _, cleanup, err := database(ctx, o.DSN, false, begin, progress)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cleanup()) }()

	col, err := StartCollector(ctx, CollectorConfig{DSN: dsn, DecisionWait: decisionWait,
		FlushInterval: time.Second, BudgetRatio: budget, BudgetMin: 0})
	if err != nil {
		return nil, err
	}
	collectorUp := true
	defer func() {
		if collectorUp {
			_ = col.Shutdown(context.Background())
		}
	}()

	var out []Simulated
	routes := map[int]string{}
	// Each service keeps the address of its first run in every run after
	// it. The hints name a callee by the addresses it was called at, and a
	// port the system handed one service in one run and another service
	// in a later run would list the second under both: a hook asking by
	// that address is then told unknown, as it should be.
	var addrs map[string]string
	for i, p := range o.Policies {
		route := fmt.Sprintf("%s/whatif/%d/%s", prefix, i, p.Policy)
		routes[i] = route
		cfg := RunConfig{Topology: o.Topology, Policy: p.Policy, Route: route, HintsURL: col.HintsURL,
			OTLPEndpoint: col.OTLPEndpoint, Requests: o.Requests, Concurrency: o.Concurrency,
			BudgetRatio: p.Budget, BudgetMin: 0, MaxAttempts: p.Retries + 1, Seed: o.Seed + uint64(i),
			Addrs: addrs}
		if p.Policy == Ownership {
			if tolerated := o.Topology.tolerated(); len(tolerated) > 0 {
				progress("  %s: a first run, for the processor to learn the tolerated calls…", p)
				learn, err := Run(ctx, cfg)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", p, err)
				}
				for _, e := range tolerated {
					if err := waitFailOpen(ctx, col.HintsURL, e[0], "GET "+route, learn.Addrs[e[1]], time.Minute); err != nil {
						return nil, fmt.Errorf("%s: %w; a longer run (more requests) gives the edge model more evidence", p, err)
					}
				}
				cfg.Hints, cfg.Addrs = true, learn.Addrs
			}
		}
		r, err := Run(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		addrs = r.Addrs
		s := Simulated{Policy: p, Requests: o.Requests, Served: map[string]float64{},
			Availability: 1 - float64(r.RootFailed+r.Errors)/float64(o.Requests)}
		for svc, n := range r.Served {
			s.Served[svc] = float64(n) / float64(o.Requests)
		}
		progress("  %-32s %d root requests in %.2fs, %d root failures", p, o.Requests, r.End.Sub(r.Start).Seconds(), r.RootFailed+r.Errors)
		out = append(out, s)
	}

	collectorUp = false
	if err := col.Shutdown(ctx); err != nil {
		return nil, fmt.Errorf("processor shutdown: %w", err)
	}
	st, err := store.OpenDSN(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	roots, err := st.Roots(ctx, begin.Add(-2*time.Minute), time.Now().Add(2*time.Minute))
	if err != nil {
		return nil, err
	}
	for i := range out {
		for _, r := range roots {
			if r.RootService == o.Topology.Root && r.RootOperation == "GET "+routes[i] {
				out[i].StormRadiusMax, out[i].StormRadiusMean = r.StormRadiusMax, r.StormRadiusMean
			}
		}
	}
	return out, nil
}

// tolerated returns the topology's tolerated calls as (caller, callee).
func (t *Topology) tolerated() [][2]string {
	var out [][2]string
	for _, s := range t.Services {
		for _, e := range s.Edges {
			if e.FailOpen {
				out = append(out, [2]string{s.Name, e.Callee})
			}
		}
	}
	return out
}

// database returns the DSN to write to: dsn, with a prefix for the routes
// that keeps this run's operations apart from earlier ones in the user's
// database, or a new database in a throwaway pgcluster cluster, which cleanup
// removes unless keep.
func database(ctx context.Context, dsn string, keep bool, begin time.Time, progress func(string, ...any)) (_, prefix string, _ *pgcluster.Cluster, cleanup func() error, _ error) {
	if dsn != "" {
		prefix = "/run-" + begin.UTC().Format("20060102T150405")
		progress("using the database given by --dsn; this run's routes start with %s", prefix)
		return dsn, prefix, nil, func() error { return nil }, nil
	}
	progress("starting a throwaway PostgreSQL cluster (pgcluster)…")
	cluster, err := pgcluster.StartCluster(ctx, pgcluster.Options{})
	if err != nil {
		return "", "", nil, nil, fmt.Errorf("start PostgreSQL: %w (or pass --dsn)", err)
	}
	cleanup = func() error {
		if keep {
			return nil
		}
		if err := cluster.Remove(); err != nil {
			return fmt.Errorf("remove PostgreSQL cluster: %w", err)
		}
		progress("PostgreSQL cluster removed")
		return nil
	}
	dsn, err = cluster.CreateDatabase(ctx, "errorownership")
	if err != nil {
		return "", "", nil, nil, errors.Join(err, cleanup())
	}
	return dsn, "", cluster, cleanup, nil
}

// waitFailOpen polls the hints endpoint until service's call from op to
// the peer at addr is fail-open, asked as the service's hooks will ask: by
// the address they call.
func waitFailOpen(ctx context.Context, base, service, op, addr string, limit time.Duration) error {
	// A client of its own, whose connections close with it: see Run.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	c := hints.New(base, service, hints.WithHTTPClient(hc))
	deadline := time.Now().Add(limit)
	for {
		if _, err := c.Refresh(ctx); err == nil && c.Mode(op, addr, op) == ownership.ModeFailOpen {
			return nil
		}
		if time.Now().After(deadline) {
			h, _ := c.Hints()
			return fmt.Errorf("the hints did not call %s → %s fail-open within %v (hints: %+v)", service, addr, limit, h)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
