// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/cmd/errorownership/simulation"
	"github.com/errorownership/errorownership/store/pgtest"
)

const (
	chainTopology = "testdata/topologies/chain.yaml"
	shopTopology  = "testdata/topologies/shop.yaml"
)

// TestChainTopologyFile: the committed chain is the simulator's.
func TestChainTopologyFile(t *testing.T) {
	b, err := os.ReadFile(chainTopology)
	require.NoError(t, err)
	top, err := simulation.ParseTopology(b)
	require.NoError(t, err)
	assert.Equal(t, simulation.Chain(), top)
}

// TestWhatifGolden: the tables, for topologies and for the store's
// measured graph (the fixture: the chain under ownership and checkout).
func TestWhatifGolden(t *testing.T) {
	dsn := fixtureDSN(t, fixtureBucket)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"chain", []string{"--topology", chainTopology}},
		{"chain_two_retries", []string{"--topology", chainTopology, "--retries", "2", "--budget", "0.2", "--policies", "retry_every_hop,budget"}},
		{"shop", []string{"--topology", shopTopology}},
		{"store_chain", append([]string{"--dsn", dsn, "--root", "a"}, fixtureWindow...)},
		{"store_busiest_root", append([]string{"--dsn", dsn}, fixtureWindow...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := runCLI(t, append([]string{"whatif"}, tc.args...)...)
			require.NoError(t, err, stderr)
			golden(t, "whatif/"+tc.name+".txt", out)
		})
	}
}

// whatifJSON runs whatif with --format json.
func whatifJSON(t *testing.T, args ...string) whatifReport {
	t.Helper()
	out, stderr, err := runCLI(t, append([]string{"whatif", "--format", "json"}, args...)...)
	require.NoError(t, err, stderr)
	var rep whatifReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	return rep
}

// TestWhatifChainTables: on the chain of docs/design.md §1, D failing, whatif gives
// docs/design.md §1's tables exactly, from the YAML and from the store's
// measured graph alike.
func TestWhatifChainTables(t *testing.T) {
	dsn := fixtureDSN(t, fixtureBucket)
	for name, args := range map[string][]string{
		"topology": {"--topology", chainTopology},
		"store":    append([]string{"--dsn", dsn, "--root", "a"}, fixtureWindow...),
	} {
		t.Run(name, func(t *testing.T) {
			rep := whatifJSON(t, args...)
			require.Len(t, rep.Policies, 4)
			// The inputs: seven nodes, D failing on its own every time,
			// one blocking call per request down the chain.
			require.Len(t, rep.Inputs, 7)
			for i, in := range rep.Inputs {
				assert.Equal(t, simulation.ChainServices[i], in.Service)
				assert.Equal(t, map[bool]float64{true: 1, false: 0}[in.Service == "d"], in.OwnRate, in.Node)
				if i < 6 {
					require.Len(t, in.Calls, 1, in.Node)
					assert.Equal(t, 1.0, in.Calls[0].PerRequest, in.Node)
					assert.False(t, in.Calls[0].Tolerated, in.Node)
				}
			}
			for _, p := range rep.Policies {
				want, ok := simulation.ChainTheory[simulation.Policy(p.Policy)]
				if !ok {
					want = []float64{1, 1, 1, 1, 1, 1, 1} // no retries
				}
				for i, svc := range simulation.ChainServices {
					assert.InDelta(t, want[i], p.Served[svc], 1e-9, "%s %s", p.Policy, svc)
				}
				assert.Equal(t, map[string]int{"no_retries": 0, "retry_every_hop": 3, "budget": 3, "ownership": 1}[p.Policy], p.StormRadius, p.Policy)
				assert.Zero(t, p.Availability)
			}
		})
	}
}

// TestWhatifSimulateAgrees: on a topology with fan-out, tolerated calls
// and a service called twice, the predictions agree with the real
// simulator — services on loopback, the processor, PostgreSQL — within
// ±5 % for every service's load and the availability. The radius predicted
// is the longest chain of hops that can retry; a sample of 1500 requests
// holds a shorter one at least, and none longer.
func TestWhatifSimulateAgrees(t *testing.T) {
	pgtest.RequireBinaries(t)
	rep := whatifJSON(t, "--topology", shopTopology, "--simulate", "--requests", "1500")
	require.Len(t, rep.Policies, 4)
	within := func(got, want float64) bool { return math.Abs(got-want) <= 0.05*want }
	for _, p := range rep.Policies {
		s := p.Simulated
		require.NotNil(t, s, p.Policy)
		require.Equal(t, 1500, s.Requests)
		for _, svc := range rep.Services {
			pred, sim := p.Served[svc.Service], s.Served[svc.Service]
			assert.True(t, within(sim, pred), "%s %s: predicted %.3f Ƞ, simulated %.3f Ƞ", p.Policy, svc.Service, pred, sim)
		}
		assert.True(t, within(s.Availability, p.Availability), "%s: availability predicted %.4f, simulated %.4f", p.Policy, p.Availability, s.Availability)
		assert.LessOrEqual(t, s.StormRadiusMax, p.StormRadius, "%s: storm radius", p.Policy)
		if p.StormRadius > 0 {
			assert.Positive(t, s.StormRadiusMax, "%s: storm radius", p.Policy)
		}
		t.Logf("%-16s availability predicted %.4f simulated %.4f; load predicted %.3f simulated %.3f", p.Policy, p.Availability, s.Availability, sum(p.Served), sum(s.Served))
	}
}

// TestWhatifInputErrors: what a person can get wrong says what to write.
func TestWhatifInputErrors(t *testing.T) {
	dsn := fixtureDSN(t, fixtureBucket)
	store := append([]string{"--dsn", dsn}, fixtureWindow...)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"simulate without topology", append([]string{"--simulate"}, store...), "--simulate runs the simulator on a topology: give --topology FILE"},
		{"unknown policy", []string{"--topology", chainTopology, "--policies", "budget,hope"}, `--policies: "hope" is not a policy; use no_retries, retry_every_hop, budget, ownership`},
		{"no retries", []string{"--topology", chainTopology, "--retries", "0"}, "--retries 0: use 1 to 10"},
		{"budget", []string{"--topology", chainTopology, "--budget", "10"}, "--budget 10: use a ratio in (0, 1]"},
		{"missing file", []string{"--topology", "testdata/topologies/none.yaml"}, "--topology: open testdata/topologies/none.yaml: no such file"},
		{"root with topology", []string{"--topology", chainTopology, "--root", "a"}, "a topology names its root itself"},
		{"misspelt root", append([]string{"--root", "chekout"}, store...), `--root chekout: no root service "chekout" from 2026-11-01T00:00:00Z to 2026-11-01T01:00:00Z; did you mean "checkout"?`},
		{"not a root", append([]string{"--root", "payments"}, store...), `--root payments: payments served no root requests from 2026-11-01T00:00:00Z to 2026-11-01T01:00:00Z; the root services are "a", "checkout"`},
		{"root operation", append([]string{"--root", "checkout", "--root-operation", "GET /checkout"}, store...), `did you mean "POST /checkout"?`},
		{"format", []string{"--topology", chainTopology, "--format", "csv"}, `--format "csv": use table or json`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"whatif"}, tc.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
