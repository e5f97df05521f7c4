// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/errorownership/errorownership/store"
)

// Shell completion: cobra's completion command writes the scripts; these
// complete flag values, names from the store included.

// completeFixed completes a flag with fixed values.
func completeFixed(cmd *cobra.Command, flag string, values ...string) {
	_ = cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
}

// completeNames completes a flag with names from the store over the window
// the other flags give.
func completeNames(cmd *cobra.Command, db *storeFlags, win *windowFlags, flag string, pick func(*store.Names) []string) {
	_ = cmd.RegisterFlagCompletionFunc(flag, func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return storeNames(cmd, db, win, toComplete, pick)
	})
}

// storeNames returns the names pick chooses that start with toComplete,
// from the store over the window; none when the store cannot be read
// quickly, since a shell waits for the answer.
func storeNames(cmd *cobra.Command, db *storeFlags, win *windowFlags, toComplete string, pick func(*store.Names) []string) ([]cobra.Completion, cobra.ShellCompDirective) {
	const patience = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	from, to, err := win.window(cmd.Flags(), time.Now())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	quick := *db
	quick.timeout = min(quick.timeout, patience)
	st, err := quick.open(ctx)
	if err != nil {
		cobra.CompErrorln(err.Error())
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer st.Close()
	names, err := st.Names(ctx, from, to)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, n := range pick(names) {
		if strings.HasPrefix(n, toComplete) {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
