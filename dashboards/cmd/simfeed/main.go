// SPDX-License-Identifier: Apache-2.0

// Command simfeed feeds a collector with the retry-storm simulator until it
// is stopped, for dashboards to show: in rounds, the chain of docs/design.md §1
// A→B→C→D→E→F→G with D failing under each retry policy, and the checkout
// scenario under error ownership, with the collector's hints once it
// serves them. Every service is real, on 127.0.0.1, instrumented with the
// OpenTelemetry SDK and exporting OTLP/HTTP to the collector
// (dashboards/docker-compose.yaml runs it beside the custom collector).
//
//	simfeed --otlp http://collector:4318/v1/traces --hints http://collector:4320
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/errorownership/errorownership/cmd/errorownership/simulation"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "simfeed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("simfeed", flag.ContinueOnError)
	otlp := fs.String("otlp", "http://127.0.0.1:4318/v1/traces", "the collector's OTLP/HTTP traces URL")
	hintsURL := fs.String("hints", "http://127.0.0.1:4320", "the collector's hints endpoint (hints.endpoint), for the hooks")
	rounds := fs.Int("rounds", 0, "rounds to run; 0 runs until stopped")
	requests := fs.Int("requests", 100, "root requests per chain policy in a round; checkout gets ten times as many")
	pause := fs.Duration("pause", 10*time.Second, "pause between rounds")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *requests < 1 {
		return fmt.Errorf("--requests %d: give at least 1", *requests)
	}
	if *rounds < 0 || *pause < 0 {
		return fmt.Errorf("--rounds %d, --pause %v: neither may be negative", *rounds, *pause)
	}
	// The checkout services keep their addresses from round to round, as
	// real ones do, so that the hints' addresses stay theirs.
	var checkoutAddrs map[string]string
	for round := 1; *rounds == 0 || round <= *rounds; round++ {
		for _, p := range simulation.ChainPolicies {
			r, err := simulation.Run(ctx, simulation.RunConfig{Topology: simulation.Chain(), Policy: p,
				Route: "/chain/" + string(p), OTLPEndpoint: *otlp, Requests: *requests, Concurrency: 4,
				BudgetRatio: simulation.BudgetRatio, Seed: uint64(round)})
			if err != nil {
				return fmt.Errorf("round %d, chain %s: %w", round, p, err)
			}
			fmt.Fprintf(out, "round %d: chain under %-15s %d root requests, %d failed\n", round, p, *requests, r.RootFailed)
		}
		cfg := simulation.RunConfig{Topology: simulation.Checkout(), Policy: simulation.Ownership, Route: "/checkout",
			Hints: round > 1, HintsURL: *hintsURL, OTLPEndpoint: *otlp, Requests: 10 * *requests, Concurrency: 4,
			BudgetRatio: simulation.BudgetRatio, Seed: uint64(round), Addrs: checkoutAddrs}
		r, err := simulation.Run(ctx, cfg)
		if err != nil && cfg.Hints && ctx.Err() == nil {
			// The collector may not serve hints yet (its store is not
			// read): the services run without them, as the hooks do.
			fmt.Fprintf(out, "round %d: checkout without hints: %v\n", round, err)
			cfg.Hints = false
			r, err = simulation.Run(ctx, cfg)
		}
		if err != nil {
			return fmt.Errorf("round %d, checkout: %w", round, err)
		}
		checkoutAddrs = r.Addrs
		fmt.Fprintf(out, "round %d: checkout (hints %v)     %d root requests, %d failed\n", round, cfg.Hints, cfg.Requests, r.RootFailed)
		if *rounds != 0 && round == *rounds {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(*pause):
		}
	}
	return nil
}
