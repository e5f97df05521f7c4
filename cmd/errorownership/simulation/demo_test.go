// SPDX-License-Identifier: Apache-2.0

package simulation

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/store/pgtest"
)

// TestDemo runs a short demo — real servers, the real processor, a real
// PostgreSQL cluster from pgtest — and checks the figures against the
// theory of docs/design.md §1. Without PostgreSQL it skips, or fails when CI is set.
func TestDemo(t *testing.T) {
	pgtest.RequireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := Demo(ctx, DemoOptions{ChainRequests: 100, CheckoutRequests: 2000, Out: &out})
	t.Log("\n" + out.String())
	require.NoError(t, err)

	within := func(got, want, rel float64) bool { return math.Abs(got-want) <= rel*want }
	for i, svc := range ChainServices {
		for _, src := range []map[Policy][]float64{rep.ServedStore, rep.ServedServers} {
			every := src[RetryEveryHop][i]
			assert.True(t, within(every, ChainTheory[RetryEveryHop][i], 0.03), "retry_every_hop %s: %.3f Ƞ, want %.0f Ƞ ±3%%", svc, every, ChainTheory[RetryEveryHop][i])
			if i >= 3 {
				assert.LessOrEqual(t, src[BudgetPolicy][i], 1.331*1.03, "budget %s", svc)
				assert.LessOrEqual(t, src[Ownership][i], 1.10, "ownership %s", svc)
			} else {
				assert.True(t, within(src[Ownership][i], 1, 0.01), "ownership %s: %.3f Ƞ, want 1.00 Ƞ ±1%%", svc, src[Ownership][i])
			}
		}
	}
	assert.Equal(t, 3, rep.Radius[RetryEveryHop].StormRadiusMax, "retry-every-hop storm radius")
	assert.Equal(t, 1, rep.Radius[Ownership].StormRadiusMax, "ownership storm radius")

	checked := 0
	for _, a := range rep.Availability {
		if a.Theory <= 0.0005 { // too few failures in the sample to compare
			continue
		}
		checked++
		assert.True(t, within(a.Measured, a.Theory, 0.10), "e=%.3f: measured %.5f, theory %.5f ±10%%", a.Rate, a.Measured, a.Theory)
	}
	assert.Equal(t, 4, checked, "rates 5, 10, 20 and 30 %% are compared")

	require.Len(t, rep.Coincidental, 2)
	for _, c := range rep.Coincidental {
		if c.Detected > 0 { // while the model is learned, nothing may be audited yet
			assert.GreaterOrEqual(t, c.Precision, 0.99, "coincidental precision (hints %v)", c.Hints)
		}
	}
	learning := rep.Coincidental[0]
	require.False(t, learning.Hints)
	assert.GreaterOrEqual(t, learning.Recall, 0.95, "coincidental recall while the model is learned: judged again once it is")
	learned := rep.Coincidental[1]
	require.True(t, learned.Hints)
	assert.Greater(t, learned.TrueCoincidental, 10)
	assert.GreaterOrEqual(t, learned.Recall, 0.95, "coincidental recall once the model is learned")
	assert.Equal(t, learned.OwnFailures, learned.OwnClaimed, "with hints checkout claims every own failure")
	assert.Less(t, rep.Coincidental[0].OwnClaimed, rep.Coincidental[0].OwnFailures, "without hints some own failures go unclaimed")
	assert.Contains(t, out.String(), "Grafana dashboards: dashboards/json")
	assert.Contains(t, out.String(), "PostgreSQL cluster removed")
}

func TestParseTopology(t *testing.T) {
	for _, tc := range []struct{ name, yaml, err string }{
		{"chain", ChainYAML, ""},
		{"checkout", CheckoutYAML, ""},
		{"unknown callee", "root: a\nservices: [{name: a, edges: [{callee: z}]}]", `unknown service "z"`},
		{"cycle", "root: a\nservices: [{name: a, edges: [{callee: b}]}, {name: b, edges: [{callee: a}]}]", "cycle"},
		{"bad rate", "root: a\nservices: [{name: a, fault: {rate: 2}}]", "fault rate"},
		{"no root", "root: x\nservices: [{name: a}]", `root "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTopology([]byte(tc.yaml))
			if tc.err == "" {
				assert.NoError(t, err)
			} else if assert.Error(t, err) {
				assert.True(t, strings.Contains(err.Error(), tc.err), err.Error())
			}
		})
	}
}

func TestFaultSchedule(t *testing.T) {
	f := Fault{Rate: 0.1, Schedule: []FaultStep{{After: time.Second, Rate: 0.5}, {After: 2 * time.Second, Rate: 0}}}
	assert.Equal(t, 0.1, f.RateAt(0))
	assert.Equal(t, 0.5, f.RateAt(1500*time.Millisecond))
	assert.Equal(t, 0.0, f.RateAt(3*time.Second))
}

func TestTheoryAfter(t *testing.T) {
	assert.InDelta(t, 0.12, TheoryAfter(0.20, 0.10), 1e-12, "docs/design.md §1's example")
	assert.InDelta(t, 0.0025, TheoryAfter(0.05, 0.10), 1e-12)
}
