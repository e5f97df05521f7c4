// SPDX-License-Identifier: Apache-2.0

// Command scaledemo is `make scale-demo`: it runs the scale-out on Kafka
// with the built collectors — a front tier producing to a topic partitioned
// by trace ID on an in-process Kafka broker (kfake), and errorownership
// collectors consuming it in one consumer group — beside one gateway
// collector and two collectors behind a plain load balancer, each writing
// to a database of a throwaway PostgreSQL cluster (pgcluster), all fed the same
// spans by the simulator's services. It prints the figures per analysis
// collector and merged, side by side with the gateway's and the load
// balancer's, then what stopping one analysis collector and starting
// another while traffic flows costs. Everything it starts is stopped and
// removed at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/errorownership/errorownership/e2e/scaleout"
	"github.com/errorownership/errorownership/internal/pgcluster"
)

func main() {
	var o scaleout.Options
	flag.StringVar(&o.Collector, "otelcol", "bin/otelcol-errorownership", "the built collector (make otelcol)")
	flag.StringVar(&o.Configs, "configs", "testdata", "the directory of the shipped collector configurations")
	flag.IntVar(&o.Partitions, "partitions", 8, "partitions of the topic")
	flag.IntVar(&o.Replicas, "replicas", 2, "analysis collectors consuming the topic at first")
	flag.IntVar(&o.ChainRequests, "chain-requests", 150, "root requests per chain policy, in the warm-up, measured and scaled phases")
	flag.IntVar(&o.CheckoutRequests, "checkout-requests", 2000, "checkout root requests, in the warm-up, measured and scaled phases")
	flag.DurationVar(&o.Rebalance, "rebalance", 24*time.Second, "how long traffic flows while one analysis collector stops and another joins")
	flag.DurationVar(&o.Timings.DecisionWait, "decision-wait", 2*time.Second, "the collectors' decision_wait")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "scale-demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o scaleout.Options) (err error) {
	if _, err := os.Stat(o.Collector); err != nil {
		return fmt.Errorf("%w (build it with make otelcol)", err)
	}
	dir, err := os.MkdirTemp("", "scaledemo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	o.Dir = dir
	o.Progress = os.Stdout
	fmt.Println("starting a throwaway PostgreSQL cluster (pgcluster)…")
	if o.Cluster, err = pgcluster.StartCluster(ctx, pgcluster.Options{}); err != nil {
		return fmt.Errorf("start PostgreSQL: %w (apt-get install postgresql)", err)
	}
	defer func() {
		err = errors.Join(err, o.Cluster.Remove())
	}()
	rep, err := scaleout.Run(ctx, o)
	if err != nil {
		for name, log := range rep.Logs {
			fmt.Fprintf(os.Stderr, "\n== %s log (end)\n%s", name, log)
		}
		return err
	}
	rep.Print(os.Stdout)
	return nil
}
