package main

import (
	"github.com/spf13/cobra"

	"github.com/errorownership/errorownership/simulation"
)

func newDemoCommand() *cobra.Command {
	var o simulation.DemoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the retry-storm simulator: a service chain under three retry policies, and coincidental errors",
		Long: `demo starts real HTTP services on loopback, instrumented with OpenTelemetry and exporting
OTLP/HTTP to an in-process errorownership processor that writes to PostgreSQL. It runs the
chain A→B→C→D→E→F→G of Uber's "How Uber Protects Against Retry Storms" with D failing, under
retry-every-hop, a 10% retry budget and error ownership, then a checkout service with a
fail-open and a fail-close dependency, and prints the measured figures beside the theory
(docs/design.md §1).

Without --dsn it starts a throwaway PostgreSQL cluster (the server binaries must be installed:
apt-get install postgresql) and removes it at the end unless --keep.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Out = cmd.OutOrStdout()
			_, err := simulation.Demo(cmd.Context(), o)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DSN, "dsn", "", "use this PostgreSQL database instead of a throwaway cluster")
	f.BoolVar(&o.Keep, "keep", false, "leave the throwaway PostgreSQL cluster running and print how to stop it")
	f.IntVar(&o.ChainRequests, "chain-requests", 200, "root requests per chain policy")
	f.IntVar(&o.CheckoutRequests, "checkout-requests", 3000, "root requests per checkout phase (without and with hints)")
	f.IntVar(&o.AvailabilityRequests, "availability-requests", 100000, "calls per error rate in the availability table")
	f.IntVar(&o.Concurrency, "concurrency", 4, "root requests in flight at once")
	return cmd
}
