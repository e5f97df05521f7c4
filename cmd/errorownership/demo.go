// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/errorownership/errorownership/cmd/errorownership/simulation"
)

func newDemoCommand() *cobra.Command {
	var o simulation.DemoOptions
	var topology, report string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the retry-storm simulator: a service chain under three retry policies, and coincidental errors",
		Long: `demo starts real HTTP services on loopback, instrumented with OpenTelemetry and exporting
OTLP/HTTP to an in-process errorownership processor that writes to PostgreSQL. It runs the
chain A→B→C→D→E→F→G of Uber's "How Uber Protects Against Retry Storms" with D failing, under
retry-every-hop, a 10% retry budget and error ownership, then a checkout service with a
fail-open and a fail-close dependency, and prints the measured figures beside the theory
(docs/design.md §1).

--sample P keeps a share P of the traces, in (0, 1]: contrib's probabilistic_sampler
processor (proportional mode, which writes the sampling threshold ot=th into each kept span)
runs in front of the errorownership processor, which weighs each kept trace by it
(docs/design.md §8.1), and the store's figures are estimates of all traffic. Without
--chain-requests the chain then runs as many root requests as the estimates need to be
within ±5% of the theory at 4 standard errors (11800 for the budget policy at 0.1).

--topology FILE runs a topology of your own (the simulator's YAML) under the three policies
instead of the chain, beside what docs/design.md §11 predicts for it. --report DIR also
writes the figures as SVG charts (amplification by depth per policy, the availability
curve) and the service graph, with an index.html to open in a browser.

Without --dsn it starts a throwaway PostgreSQL cluster (the server binaries must be installed:
apt-get install postgresql) and removes it at the end unless --keep.`,
		Example: `  errorownership demo
  errorownership demo --topology shop.yaml --report demo-report && xdg-open demo-report/index.html
  errorownership demo --sample 0.1

  # The topology format:
  #   root: web
  #   services:
  #     - {name: web, edges: [{callee: api}, {callee: ads, fail_open: true}]}
  #     - {name: api, fault: {rate: 0.05}, latency: 1ms}
  #     - {name: ads, fault: {rate: 0.2}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !(o.Sample > 0 && o.Sample <= 1) {
				return fmt.Errorf("--sample %v: give the share of traces to keep, in (0, 1]: 0.1 keeps one trace in ten, 1 all", o.Sample)
			}
			if topology != "" {
				b, err := os.ReadFile(topology) //nolint:gosec // G304: the file the user named with --topology
				if err != nil {
					return fmt.Errorf("--topology: %w", err)
				}
				if o.Topology, err = simulation.ParseTopology(b); err != nil {
					return fmt.Errorf("--topology %s: %w", topology, err)
				}
			}
			var text bytes.Buffer
			o.Out = io.MultiWriter(cmd.OutOrStdout(), &text)
			rep, err := simulation.Demo(cmd.Context(), o)
			if err != nil || report == "" {
				return err
			}
			if err := writeReport(cmd.Context(), report, rep, text.String()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Report: %s (charts %s, %s and %s)\n", report+"/"+reportPage, reportAmplification, reportAvailability, reportGraph)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DSN, "dsn", "", "use this PostgreSQL database instead of a throwaway cluster")
	f.BoolVar(&o.Keep, "keep", false, "leave the throwaway PostgreSQL cluster running and print how to stop it")
	f.StringVar(&topology, "topology", "", "run this topology (the simulator's YAML) under the three policies instead of the chain A→…→G")
	f.StringVar(&report, "report", "", "also write the figures as SVG charts, the service graph and an index.html into this directory")
	f.IntVar(&o.ChainRequests, "chain-requests", 0, "root requests per chain policy (0: 200, or with --sample below 1 as many as the estimates need)")
	f.Float64Var(&o.Sample, "sample", 1, "share of traces the probabilistic_sampler keeps in front of the processor, in (0, 1]; 1: no sampling")
	f.IntVar(&o.CheckoutRequests, "checkout-requests", 0, "root requests per checkout phase, without and with hints (0: 3000, or 1400/--sample if more)")
	f.IntVar(&o.AvailabilityRequests, "availability-requests", 100000, "calls per error rate in the availability table")
	f.IntVar(&o.Concurrency, "concurrency", 4, "root requests in flight at once")
	_ = cmd.MarkFlagFilename("topology", "yaml", "yml")
	_ = cmd.MarkFlagDirname("report")
	return cmd
}
