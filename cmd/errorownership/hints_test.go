// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/ownership"
)

// TestHintsGolden: the table over the fixture written now (the model's
// window ends now), for a service with a fail-open and a fail-close edge,
// one on the chain, and a service that calls nobody.
func TestHintsGolden(t *testing.T) {
	dsn := fixtureDSN(t, time.Now())
	for _, service := range []string{"checkout", "c", "payments"} {
		t.Run(service, func(t *testing.T) {
			out, stderr, err := runCLI(t, "hints", service, "--dsn", dsn)
			require.NoError(t, err, stderr)
			golden(t, "hints/"+service+".txt", out)
		})
	}
}

// TestHintsFormats: json is the hints document; evidence adds the counts
// that decided each mode.
func TestHintsFormats(t *testing.T) {
	dsn := fixtureDSN(t, time.Now())
	out, stderr, err := runCLI(t, "hints", "checkout", "--dsn", dsn, "--format", "json", "--ttl", "10s", "--retry-ratio", "0.05")
	require.NoError(t, err, stderr)
	var doc ownership.Hints
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.NoError(t, doc.Validate("checkout"))
	assert.Equal(t, 10, doc.TTLSeconds)
	assert.Equal(t, ownership.RetryBudget{Ratio: 0.05, MinRetriesPerSecond: 10}, *doc.RetryBudget)
	assert.WithinDuration(t, time.Now(), doc.GeneratedAt, time.Minute)
	require.Len(t, doc.Edges, 2)
	assert.Equal(t, "payments", doc.Edges[0].PeerService)
	assert.Equal(t, ownership.ModeFailClose, doc.Edges[0].Mode)
	assert.Equal(t, "recommendations", doc.Edges[1].PeerService)
	assert.Equal(t, ownership.ModeFailOpen, doc.Edges[1].Mode)
	assert.EqualValues(t, 170, doc.Edges[1].Samples, "the scenario: 160 survived a recommendations failure alone, 10 failed on their own")

	out, stderr, err = runCLI(t, "hints", "checkout", "--dsn", dsn, "--format", "evidence")
	require.NoError(t, err, stderr)
	var ev struct {
		Hints    ownership.Hints `json:"hints"`
		Evidence []edgeEvidence  `json:"evidence"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &ev))
	require.Len(t, ev.Evidence, 2)
	rec := ev.Evidence[1]
	assert.Equal(t, "recommendations", rec.PeerService)
	assert.InDelta(t, 170, rec.FailedAlone, 1e-9, "one bucket weighs 1")
	assert.InDelta(t, 10, rec.FailedAloneRequestFailed, 1e-9)
	assert.Less(t, rec.Upper, 0.2)
	assert.Contains(t, rec.Why, "≤ fail_open_threshold 0.2")
}

// TestHintsInputErrors: a misspelt service names the near ones; bad flags
// name the collector's key they stand for.
func TestHintsInputErrors(t *testing.T) {
	dsn := fixtureDSN(t, time.Now())
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"misspelt service", []string{"checkuot"}, `hints checkuot: no service "checkuot" in the edge model's window (the last 1h10m0s: seven half-lives); did you mean "checkout"?`},
		{"ttl", []string{"checkout", "--ttl", "500ms"}, "--ttl 500ms: the errorownership_hints extension's ttl is at least 1s"},
		{"budget", []string{"checkout", "--retry-ratio", "2"}, "retry budget out of range"},
		{"thresholds", []string{"checkout", "--fail-open-threshold", "0.9"}, "edge_model: fail_open_threshold (0.9) must be below fail_close_threshold (0.8)"},
		{"format", []string{"checkout", "--format", "yaml"}, `--format "yaml": use table, json or evidence`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, append(append([]string{"hints"}, tc.args...), "--dsn", dsn)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, _, err := runCLI(t, "hints", "checkout", "--dsn", pgtestEmptyDatabase(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no errorownership schema (this code reads version")
}
