// SPDX-License-Identifier: Apache-2.0

package scaleout

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store"
)

func TestCountsMinus(t *testing.T) {
	tests := []struct {
		name          string
		after, before Counts
		want          Counts
	}{
		{"nothing before", Counts{FigServed: {"a": 3}}, nil, Counts{FigServed: {"a": 3}}},
		{"what was added", Counts{FigServed: {"a": 5, "b": 2}}, Counts{FigServed: {"a": 3, "b": 2}}, Counts{FigServed: {"a": 2}}},
		{"keys left at zero are dropped", Counts{FigServed: {"a": 3}}, Counts{FigServed: {"a": 3}}, Counts{}},
		{"a key only before has is left out: counts only grow", Counts{FigServed: {}}, Counts{FigServed: {"a": 1}}, Counts{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.after.Minus(tt.before))
		})
	}
}

func TestCompare(t *testing.T) {
	gateway := Counts{FigServed: {"a": 10, "b": 5}, FigRetriesReceived: {"b": 4}}
	tests := []struct {
		name  string
		other Counts
		fig   string
		want  Drift
	}{
		{"equal", Counts{FigServed: {"a": 10, "b": 5}}, FigServed,
			Drift{Figure: FigServed, Gateway: 15, Other: 15, Keys: 2}},
		{"one key differs, the total too", Counts{FigServed: {"a": 10, "b": 2}}, FigServed,
			Drift{Figure: FigServed, Gateway: 15, Other: 12, Keys: 2, Differing: 1}},
		{"counts moved between keys, the total the same", Counts{FigServed: {"a": 12, "b": 3}}, FigServed,
			Drift{Figure: FigServed, Gateway: 15, Other: 15, Keys: 2, Differing: 2}},
		{"a key only the other has", Counts{FigServed: {"a": 10, "b": 5, "c": 1}}, FigServed,
			Drift{Figure: FigServed, Gateway: 15, Other: 16, Keys: 3, Differing: 1}},
		{"a figure the other lacks", Counts{}, FigRetriesReceived,
			Drift{Figure: FigRetriesReceived, Gateway: 4, Other: 0, Keys: 1, Differing: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			drifts := Compare(gateway, tt.other)
			assert.Len(t, drifts, len(Figs), "one row per figure")
			for _, d := range drifts {
				if d.Figure == tt.fig {
					assert.Equal(t, tt.want, d)
				}
			}
		})
	}
}

func TestDriftRelative(t *testing.T) {
	tests := []struct {
		name string
		d    Drift
		want float64
	}{
		{"equal", Drift{Gateway: 4, Other: 4}, 0},
		{"lower", Drift{Gateway: 4, Other: 3}, -0.25},
		{"both zero", Drift{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.d.Relative())
		})
	}
}

func edge(service, peer string, mode ownership.Mode) store.EdgeEstimate {
	return store.EdgeEstimate{Service: service, Operation: "GET /", PeerService: peer, PeerOperation: "GET /",
		Estimate: dependencyanalysis.Estimate{Mode: mode}}
}

func TestCompareModes(t *testing.T) {
	gateway := &Figures{Edges: []store.EdgeEstimate{
		edge("checkout", "payments", ownership.ModeFailClose),
		edge("checkout", "recommendations", ownership.ModeFailOpen),
	}}
	// The load balancer names recommendations by its address where its
	// span went to the other replica, and learns that edge apart.
	lb := &Figures{Edges: []store.EdgeEstimate{
		edge("checkout", "payments", ownership.ModeFailClose),
		edge("checkout", "recommendations", ownership.ModeUnknown),
		edge("checkout", "10.0.0.7:8080", ownership.ModeFailOpen),
	}}
	assert.Equal(t, []ModeDrift{
		{Mode: ownership.ModeFailClose, Gateway: 1, Other: 1},
		{Mode: ownership.ModeFailOpen, Gateway: 1, Other: 1, OnlyGateway: 1, OnlyOther: 1},
	}, CompareModes(gateway, lb))
}

func TestModelFree(t *testing.T) {
	op := store.ClaimAccuracy{Service: "checkout", Operation: "GET /checkout", ClaimFigures: store.ClaimFigures[float64]{Failed: 10, Correct: 7,
		ExpectedClaimed: 6, ExpectedUnclaimed: 4}}
	op.Verdicts[dependencyanalysis.VerdictOwn] = 5
	op.Verdicts[dependencyanalysis.VerdictPropagated] = 3
	op.Verdicts[dependencyanalysis.VerdictCoincidental] = 2
	op.Requests[ownership.ClaimClaimed][dependencyanalysis.VerdictOwn] = 5
	f := &Figures{Operations: []store.ClaimAccuracy{op}, Audit: []store.AuditRecord{{TraceID: "01"}}}

	want := store.ClaimAccuracy{Service: "checkout", Operation: "GET /checkout", ClaimFigures: store.ClaimFigures[float64]{Failed: 10}}
	want.Verdicts[dependencyanalysis.VerdictOwn] = 5
	got := f.ModelFree()
	assert.Equal(t, []store.ClaimAccuracy{want}, got.Operations, "failed requests and own verdicts, nothing the model decides")
	assert.Nil(t, got.Audit)
	assert.Len(t, f.Audit, 1, "the figures themselves are unchanged")
	assert.Equal(t, 2.0, f.Operations[0].Verdicts[dependencyanalysis.VerdictCoincidental])
}
