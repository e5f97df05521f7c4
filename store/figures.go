// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/errorownership/errorownership/dependencyanalysis"
)

// Figure is what a reader's figure counts in: requests or calls seen
// (int64), or their estimate of all traffic (float64).
type Figure interface{ ~int64 | ~float64 }

// Sampling says how a result row's estimates were made from the requests
// (or calls) seen: the span-metrics connector's sampling.method, with
// "mixed" for a row that sums both.
type Sampling uint8

const (
	// SamplingCounted says no request whose trace was weighed by its
	// sampling contributed; each counted once, and the estimates are the
	// counts.
	SamplingCounted Sampling = iota
	// SamplingExtrapolated says every request contributed was weighed by
	// its trace's sampling (docs/design.md §8.1).
	SamplingExtrapolated
	// SamplingMixed says some were counted, some extrapolated.
	SamplingMixed
)

var samplingNames = [...]string{"counted", "extrapolated", "mixed"}

func (s Sampling) String() string {
	if int(s) < len(samplingNames) {
		return samplingNames[s]
	}
	return fmt.Sprintf("Sampling(%d)", s)
}

// MarshalText spells s as String does, in JSON too.
func (s Sampling) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// samplingOf labels figures of which extrapolated of seen were weighed by
// their sampling.
func samplingOf(seen, extrapolated int64) Sampling {
	switch {
	case extrapolated <= 0:
		return SamplingCounted
	case extrapolated >= seen:
		return SamplingExtrapolated
	}
	return SamplingMixed
}

// est is the SQL for the estimate of a column summed over rows: a row
// written before schema version 4 has none, and counted each trace once.
func est(col string) string {
	return fmt.Sprintf("coalesce(sum(coalesce(%[1]s_est, %[1]s)), 0)::double precision", col)
}

// seen is the SQL for the count of a column summed over rows.
func seen(col string) string { return fmt.Sprintf("coalesce(sum(%s), 0)::bigint", col) }

// both is est and seen of each column, the estimates first.
func both(cols ...string) string {
	out := make([]string, 0, 2*len(cols))
	for _, c := range cols {
		out = append(out, est(c))
	}
	for _, c := range cols {
		out = append(out, seen(c))
	}
	return strings.Join(out, ", ")
}

// TraceStats counts the traces the collectors analysed over a window.
type TraceStats struct {
	// Traces counts every trace analysed, incomplete ones included.
	Traces int64
	// Extrapolated counts the complete traces weighed by their sampling;
	// Counted those without sampling information, counted once each.
	Extrapolated, Counted int64
	// CountedFailed counts the counted traces with a failed request: a
	// large share of them (CountedFailedShare) suggests a sampler upstream
	// that keeps failed traces without saying so, which inflates every
	// failure rate.
	CountedFailed int64
	// Incomplete counts the traces set apart, not judged, by
	// dependencyanalysis.Incomplete (index 0 unused).
	Incomplete [4]int64
}

// Complete returns the traces judged: Traces less the incomplete ones.
func (t *TraceStats) Complete() int64 { return t.Extrapolated + t.Counted }

// IncompleteTotal returns the traces set apart for any reason.
func (t *TraceStats) IncompleteTotal() int64 {
	var n int64
	for _, c := range t.Incomplete {
		n += c
	}
	return n
}

// ExtrapolatedShare returns Extrapolated / Complete (0 without traces).
func (t *TraceStats) ExtrapolatedShare() float64 {
	return ratio(float64(t.Extrapolated), float64(t.Complete()))
}

// CountedFailedShare returns CountedFailed / Counted (0 without traces).
func (t *TraceStats) CountedFailedShare() float64 {
	return ratio(float64(t.CountedFailed), float64(t.Counted))
}

// Sampling labels the complete traces.
func (t *TraceStats) Sampling() Sampling { return samplingOf(t.Complete(), t.Extrapolated) }

// ratio returns a / b, or 0 when b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// TraceStats returns the traces analysed in buckets that start in
// [from, to), summed over collector replicas. A window before schema
// version 4 has no trace_stats rows and reads as zeros.
func (s *Store) TraceStats(ctx context.Context, from, to time.Time) (TraceStats, error) {
	var t TraceStats
	err := s.pool.QueryRow(ctx, `
SELECT coalesce(sum(traces), 0)::bigint, coalesce(sum(extrapolated), 0)::bigint, coalesce(sum(counted_failed), 0)::bigint,
       coalesce(sum(incomplete_missing_parent), 0)::bigint, coalesce(sum(incomplete_missing_callee), 0)::bigint,
       coalesce(sum(incomplete_inconsistent_sampling), 0)::bigint
FROM trace_stats WHERE bucket >= $1 AND bucket < $2`, from, to).Scan(&t.Traces, &t.Extrapolated, &t.CountedFailed,
		&t.Incomplete[dependencyanalysis.IncompleteMissingParent], &t.Incomplete[dependencyanalysis.IncompleteMissingCallee],
		&t.Incomplete[dependencyanalysis.IncompleteSampling])
	if err != nil {
		return TraceStats{}, fmt.Errorf("store: trace stats: %w", err)
	}
	t.Counted = max(t.Traces-t.Extrapolated-t.IncompleteTotal(), 0)
	return t, nil
}
