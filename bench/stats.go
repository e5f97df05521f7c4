// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// summary is a sample's median and range: on a shared machine the median
// of alternated rounds is the figure, the range says how much to trust it.
type summary struct {
	Median, Min, Max float64
	N                int
}

// summarize summarises xs; NaN figures (a run that measured nothing) are
// left out.
func summarize(xs []float64) summary {
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return summary{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return summary{Median: med, Min: s[0], Max: s[n-1], N: n}
}

// format writes the summary as "median [min–max]" with f for each figure.
func (s summary) format(f func(float64) string) string {
	if s.N == 0 {
		return "–"
	}
	if s.N == 1 || s.Min == s.Max {
		return f(s.Median)
	}
	return fmt.Sprintf("%s [%s–%s]", f(s.Median), f(s.Min), f(s.Max))
}

// target is a figure's target: the median must be at least (or at most)
// limit.
type target struct {
	atMost bool
	limit  float64
	text   string // "≥ 2"
}

func atLeast(limit float64, text string) target { return target{limit: limit, text: "≥ " + text} }
func atMost(limit float64, text string) target {
	return target{atMost: true, limit: limit, text: "≤ " + text}
}

// verdict says whether the median meets the target.
func (t target) verdict(s summary) string {
	switch {
	case s.N == 0:
		return "not measured"
	case t.atMost && s.Median <= t.limit, !t.atMost && s.Median >= t.limit:
		return "holds"
	default:
		return "misses"
	}
}

// rate formats spans per second: 1.23M, 456k.
func rate(x float64) string {
	switch {
	case math.IsNaN(x):
		return "–"
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.0fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}

// fixed returns a formatter with prec decimals.
func fixed(prec int) func(float64) string {
	return func(x float64) string { return fmt.Sprintf("%.*f", prec, x) }
}

// mib formats bytes in MiB.
func mib(x float64) string { return fmt.Sprintf("%.0f MiB", x/(1<<20)) }

// table is a Markdown table.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) String() string {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + c + " |")
		}
		b.WriteString("\n")
	}
	line(t.header)
	sep := make([]string, len(t.header))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
	return b.String()
}
