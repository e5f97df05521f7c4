// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want summary
	}{
		{"odd", []float64{3, 1, 2}, summary{Median: 2, Min: 1, Max: 3, N: 3}},
		{"even", []float64{4, 1, 3, 2}, summary{Median: 2.5, Min: 1, Max: 4, N: 4}},
		{"one", []float64{7}, summary{Median: 7, Min: 7, Max: 7, N: 1}},
		{"not a number left out", []float64{1, math.NaN(), math.Inf(1), 3}, summary{Median: 2, Min: 1, Max: 3, N: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, summarize(tc.xs))
		})
	}
	empty := summarize(nil)
	assert.Zero(t, empty.N)
	assert.True(t, math.IsNaN(empty.Median))
	assert.Equal(t, "–", empty.format(fixed(1)))
}

func TestSummaryFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    summary
		f    func(float64) string
		want string
	}{
		{"range", summary{Median: 2, Min: 1, Max: 3, N: 3}, fixed(1), "2.0 [1.0–3.0]"},
		{"single", summary{Median: 2, Min: 2, Max: 2, N: 1}, fixed(0), "2"},
		{"rates", summary{Median: 1.5e6, Min: 950e3, Max: 2e6, N: 9}, rate, "1.50M [950k–2.00M]"},
		{"no spread", summary{Median: 3 << 20, Min: 3 << 20, Max: 3 << 20, N: 2}, mib, "3 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.s.format(tc.f))
		})
	}
}

func TestTargetVerdict(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target target
		median float64
		want   string
	}{
		{"at least, met", atLeast(2, "2"), 2, "holds"},
		{"at least, missed", atLeast(2, "2"), 1.99, "misses"},
		{"at most, met", atMost(71, "71 B"), 70, "holds"},
		{"at most, missed", atMost(71, "71 B"), 72, "misses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.target.verdict(summary{Median: tc.median, Min: tc.median, Max: tc.median, N: 1}))
		})
	}
	assert.Equal(t, "not measured", atLeast(1, "1").verdict(summary{}))
}

func TestPipelineRow(t *testing.T) {
	rounds := []pipelineRound{
		{Spans: 1000, Without: time.Millisecond, With: 2 * time.Millisecond},
		{Spans: 1000, Without: time.Millisecond, With: 1250 * time.Microsecond},
		{Spans: 1000, Without: time.Millisecond, With: 1100 * time.Microsecond},
	}
	extra := atMost(100, "100 ns")
	row := pipelineRow(rounds, "1", atLeast(0.75, "0.75"), &extra)
	assert.Equal(t, []string{"1", "1.00M", "800k [500k–909k]", "0.80 [0.50–0.91] holds", "250 [100–1000] misses"}, row)
}

func TestTable(t *testing.T) {
	tb := table{header: []string{"a", "b"}}
	tb.add("1", "2")
	assert.Equal(t, "| a | b |\n| --- | --- |\n| 1 | 2 |\n", tb.String())
}
