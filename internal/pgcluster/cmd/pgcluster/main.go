// SPDX-License-Identifier: Apache-2.0

// Command pgcluster runs a local PostgreSQL cluster for development: the
// store's tests do not need it (they start their own), but the CLI, the
// dashboards and a collector under test do.
//
//	pgcluster start [-listen 127.0.0.1] [-port 5432] DIR   initialise if needed, start, print the DSN
//	pgcluster stop DIR                                     stop (the data stays)
//	pgcluster status DIR                                   print the DSN if running
//
// The cluster lives in DIR (make db uses ./.db), listens on a unix socket
// there (and on TCP only with -listen), trusts local connections, and runs
// without fsync: it is for development, not for data that matters.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/errorownership/errorownership/internal/pgcluster"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "pgcluster:", err)
		os.Exit(1)
	}
}

func usage() error {
	return errors.New("usage: pgcluster start [-listen ADDR] [-port N] DIR | stop DIR | status DIR")
}

func run(args []string) error {
	if len(args) < 1 {
		return usage()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	listen := fs.String("listen", "", "also listen on TCP at this address, such as 127.0.0.1")
	port := fs.Int("port", 0, "port (0: 5432 on the socket alone, a free one with -listen)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usage()
	}
	dir := fs.Arg(0)
	switch args[0] {
	case "start":
		if c, err := pgcluster.Existing(dir); err == nil && c.Running() {
			report(c, "already running")
			return nil
		}
		c, err := pgcluster.StartCluster(ctx, pgcluster.Options{Dir: dir, Port: *port, ListenAddresses: *listen})
		if err != nil {
			return err
		}
		// Keep the cluster out of version control without touching the
		// repository's .gitignore.
		if err := os.WriteFile(filepath.Join(c.Dir(), ".gitignore"), []byte("*\n"), 0o644); err != nil {
			return err
		}
		report(c, "started")
		return nil
	case "stop":
		c, err := pgcluster.Existing(dir)
		if err != nil {
			return err
		}
		if !c.Running() {
			fmt.Println("not running")
			return nil
		}
		if err := c.Stop(ctx); err != nil {
			return err
		}
		fmt.Printf("stopped; the data stays in %s (rm -rf it to start afresh)\n", c.Dir())
		return nil
	case "status":
		c, err := pgcluster.Existing(dir)
		if err != nil {
			return err
		}
		if !c.Running() {
			return fmt.Errorf("not running; start it with: pgcluster start %s", dir)
		}
		report(c, "running")
		return nil
	}
	return usage()
}

func report(c *pgcluster.Cluster, state string) {
	fmt.Printf("PostgreSQL %s in %s\n", state, c.Dir())
	fmt.Printf("DSN:  %s\n", c.DSN())
	fmt.Printf("psql: psql '%s'\n", c.DSN())
	fmt.Printf("stop: make db-stop (or go run ./store/pgtest/cmd/pgcluster stop %s)\n", c.Dir())
}
