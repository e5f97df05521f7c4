// SPDX-License-Identifier: Apache-2.0

package simulation

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPredictChain: on the chain of docs/design.md §1, D failing, the predictions are
// docs/design.md §1's tables: 1, 2, 4, 8, 8, 8, 8 with one retry at every
// hop; 1, 1.1, 1.21, 1.331 … within a 10 % budget; 1, 1, 1, 1.1 … with
// error ownership; and the storm radius 3, 3 and 1.
func TestPredictChain(t *testing.T) {
	m := Chain().Model()
	for _, tc := range []struct {
		policy RetryPolicy
		served []float64
		radius int
	}{
		{RetryPolicy{Policy: NoRetries}, []float64{1, 1, 1, 1, 1, 1, 1}, 0},
		{RetryPolicy{Policy: RetryEveryHop, Retries: 1}, ChainTheory[RetryEveryHop], 3},
		{RetryPolicy{Policy: BudgetPolicy, Retries: 1, Budget: BudgetRatio}, ChainTheory[BudgetPolicy], 3},
		{RetryPolicy{Policy: Ownership, Retries: 1, Budget: BudgetRatio}, ChainTheory[Ownership], 1},
		// Two retries: 3^d at every hop, 1 + 0.1 per hop within a budget
		// (no second retry once the first used the budget up).
		{RetryPolicy{Policy: RetryEveryHop, Retries: 2}, []float64{1, 3, 9, 27, 27, 27, 27}, 3},
		{RetryPolicy{Policy: BudgetPolicy, Retries: 2, Budget: BudgetRatio}, ChainTheory[BudgetPolicy], 3},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			p, err := m.Predict(tc.policy)
			require.NoError(t, err)
			for i, svc := range ChainServices {
				assert.InDelta(t, tc.served[i], p.Served[svc], 1e-12, svc)
				assert.InDelta(t, tc.served[i], p.ServedByDepth[i], 1e-12, "depth %d", i)
			}
			assert.Equal(t, 0.0, p.Availability, "D always fails")
			assert.Equal(t, tc.radius, p.StormRadius)
		})
	}
}

// TestPredictAvailabilityAfterRetries: a caller retrying once within
// budget B a callee failing at rate e fails e_after = (e − min(e,B)) +
// min(e,B)·e of its calls (docs/design.md §1): TheoryAfter.
func TestPredictAvailabilityAfterRetries(t *testing.T) {
	for _, e := range AvailabilityRates {
		t.Run(fmt.Sprint(e), func(t *testing.T) {
			top, err := ParseTopology(fmt.Appendf(nil, "root: caller\nservices:\n  - {name: caller, edges: [{callee: callee}]}\n  - {name: callee, fault: {rate: %v}}\n", e))
			require.NoError(t, err)
			for _, pol := range []Policy{BudgetPolicy, Ownership} {
				p, err := top.Model().Predict(RetryPolicy{Policy: pol, Retries: 1, Budget: BudgetRatio})
				require.NoError(t, err)
				assert.InDelta(t, TheoryAfter(e, BudgetRatio), 1-p.Availability, 1e-12, pol)
				assert.InDelta(t, 1+math.Min(e, BudgetRatio), p.Served["callee"], 1e-12, pol)
			}
			p, err := top.Model().Predict(RetryPolicy{Policy: NoRetries})
			require.NoError(t, err)
			assert.InDelta(t, e, 1-p.Availability, 1e-12)
		})
	}
}

// TestPredictFanOut works a topology with a tolerated and a blocking
// call by hand.
func TestPredictFanOut(t *testing.T) {
	top, err := ParseTopology([]byte(`
root: web
services:
  - {name: web, edges: [{callee: ads, fail_open: true}, {callee: api}], fault: {rate: 0.1}}
  - {name: ads, fault: {rate: 0.5}}
  - {name: api, edges: [{callee: db}]}
  - {name: db, fault: {rate: 0.2}}
`))
	require.NoError(t, err)
	p, err := top.Model().Predict(RetryPolicy{Policy: RetryEveryHop, Retries: 1})
	require.NoError(t, err)
	// api → db: 1 + 0.2 attempts, fails 0.04; api fails 0.04.
	// web → api: 1 + 0.04 attempts, each 1.2 db requests; fails 0.0016.
	// web → ads: 1.5 attempts; tolerated.
	assert.InDelta(t, 1.5, p.Served["ads"], 1e-12)
	assert.InDelta(t, 1.04, p.Served["api"], 1e-12)
	assert.InDelta(t, 1.04*1.2, p.Served["db"], 1e-12)
	assert.InDelta(t, (1-0.0016)*0.9, p.Availability, 1e-12)
	assert.Equal(t, 2, p.StormRadius, "db's failures: api retries them, then web retries api")
	assert.Equal(t, []float64{1, 1.5 + 1.04, 1.04 * 1.2}, roundAll(p.ServedByDepth))

	o, err := top.Model().Predict(RetryPolicy{Policy: Ownership, Retries: 1, Budget: 0.1})
	require.NoError(t, err)
	// web → ads: ads' failures are claimed, 0.5 wanted, 0.1 granted.
	assert.InDelta(t, 1.1, o.Served["ads"], 1e-12)
	// api's failures are db's, unclaimed: web does not retry api.
	assert.InDelta(t, 1, o.Served["api"], 1e-12)
	assert.InDelta(t, 1.1, o.Served["db"], 1e-12)
	assert.Equal(t, 1, o.StormRadius)
}

func roundAll(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Round(x*1e9) / 1e9
	}
	return out
}

func TestPredictRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model Model
		pol   RetryPolicy
		want  string
	}{
		{"cycle", Model{Root: "a", Nodes: []ModelNode{{Name: "a", Calls: []ModelCall{{Callee: "b", PerRequest: 1}}}, {Name: "b", Calls: []ModelCall{{Callee: "a", PerRequest: 1}}}}},
			RetryPolicy{Policy: NoRetries}, "the calls form a cycle: a → b → a"},
		{"unknown callee", Model{Root: "a", Nodes: []ModelNode{{Name: "a", Calls: []ModelCall{{Callee: "z", PerRequest: 1}}}}}, RetryPolicy{Policy: NoRetries}, `calls "z"`},
		{"no root", Model{Root: "x", Nodes: []ModelNode{{Name: "a"}}}, RetryPolicy{Policy: NoRetries}, `root "x"`},
		{"rate", Model{Root: "a", Nodes: []ModelNode{{Name: "a", OwnRate: 1.5}}}, RetryPolicy{Policy: NoRetries}, "own failure rate 1.5"},
		{"policy", Model{Root: "a", Nodes: []ModelNode{{Name: "a"}}}, RetryPolicy{Policy: "hope"}, `policy "hope"`},
		{"budget", Model{Root: "a", Nodes: []ModelNode{{Name: "a"}}}, RetryPolicy{Policy: BudgetPolicy, Retries: 1, Budget: 2}, "budget 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.model.Predict(tc.pol)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestTraceTruthCoincidental: the service failed on its own while a call
// it tolerates failed and none it needs did.
func TestTraceTruthCoincidental(t *testing.T) {
	top := Checkout()
	for _, tc := range []struct {
		name   string
		own    int
		failed map[string]int
		want   bool
	}{
		{"own, tolerated call failed", 1, map[string]int{"checkout>recommendations": 1}, true},
		{"own, no call failed", 1, nil, false},
		{"own, a needed call failed too", 1, map[string]int{"checkout>recommendations": 1, "checkout>payments": 1}, false},
		{"tolerated call failed, not own", 0, map[string]int{"checkout>recommendations": 1}, false},
		{"another service's failed call", 1, map[string]int{"recommendations>x": 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &TraceTruth{OwnFaults: map[string]int{"checkout": tc.own}, FailedCalls: tc.failed}
			assert.Equal(t, tc.want, tr.Coincidental(top, "checkout"))
		})
	}
	assert.False(t, (&TraceTruth{OwnFaults: map[string]int{"x": 1}}).Coincidental(top, "x"), "not in the topology")
}
