// SPDX-License-Identifier: Apache-2.0

package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelpGolden: every command's --help, so that a change to a flag or a
// text shows in review and the README's copies can follow it.
func TestHelpGolden(t *testing.T) {
	commands := []string{""}
	for _, c := range newRootCommand().Commands() {
		commands = append(commands, c.Name())
	}
	slices.Sort(commands)
	assert.Equal(t, []string{"", "analyze", "audit", "demo", "graph", "hints", "whatif"}, commands)
	for _, name := range commands {
		t.Run("help_"+name, func(t *testing.T) {
			args := []string{"--help"}
			if name != "" {
				args = []string{name, "--help"}
			}
			out, _, err := runCLI(t, args...)
			require.NoError(t, err)
			golden(t, "help/"+nameOr(name, "errorownership")+".txt", out)
		})
	}
}

// TestCompletion: shell completion scripts, and values completed from the
// flags' choices and from the store.
func TestCompletion(t *testing.T) {
	out, _, err := runCLI(t, "completion", "bash")
	require.NoError(t, err)
	assert.Contains(t, out, "__start_errorownership")

	dsn := fixtureDSN(t, fixtureBucket)
	recent := fixtureDSN(t, time.Now())
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"audit formats", []string{"audit", "--format", ""}, []string{"table", "json", "csv"}},
		{"audit views", []string{"audit", "--view", ""}, []string{"grouped", "detail"}},
		{"whatif policies", []string{"whatif", "--policies", ""}, []string{"no_retries", "retry_every_hop", "budget", "ownership"}},
		{"graph formats", []string{"graph", "--format", ""}, []string{"dot", "mermaid", "svg", "png"}},
		{"services from the store", append(append([]string{"audit", "--dsn", dsn}, fixtureWindow...), "--service", "c"), []string{"c", "checkout"}},
		{"dependencies from the store", append(append([]string{"audit", "--dsn", dsn}, fixtureWindow...), "--dependency", "re"), []string{"recommendations"}},
		{"hints' service", []string{"hints", "--dsn", recent, "pay"}, []string{"payments"}},
		{"hints' service outside the model's window", []string{"hints", "--dsn", dsn, "pay"}, nil},
		{"no store, no names", []string{"audit", "--dsn", "postgres://nobody@127.0.0.1:1/none", "--service", ""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runCLI(t, append([]string{"__complete"}, tc.args...)...)
			require.NoError(t, err)
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasPrefix(l, ":") {
					got = append(got, l)
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
