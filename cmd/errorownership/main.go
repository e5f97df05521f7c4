// SPDX-License-Identifier: Apache-2.0

// Command errorownership analyses traces for error ownership: which service
// originated each error, which only passed it on, and how much retrying
// multiplied the load.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries a process exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	root := newRootCommand()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "errorownership:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "errorownership",
		Short:         "Error ownership: stop retry storms by retrying only where an error began",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newAnalyzeCommand())
	root.AddCommand(newDemoCommand())
	root.AddCommand(newAuditCommand())
	root.AddCommand(newHintsCommand())
	root.AddCommand(newWhatifCommand())
	root.AddCommand(newGraphCommand())
	return root
}
