// SPDX-License-Identifier: Apache-2.0

package simulation

import (
	"math"
	"math/rand/v2"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/ownership"
)

// AvailabilityRow is one base error rate's failure rate after retries.
type AvailabilityRow struct {
	// Rate is the callee's independent failure rate e; Budget is B.
	Rate, Budget float64
	// Measured is the share of calls still failing after the caller's one
	// budgeted retry; Theory is e_after = (e − min(e,B)) + min(e,B)·e.
	Measured, Theory float64
	// Retries is the share of calls that were retried.
	Retries  float64
	Requests int
}

// TheoryAfter is the failure rate after one budgeted retry (docs/design.md §1).
func TheoryAfter(e, b float64) float64 {
	m := math.Min(e, b)
	return (e - m) + m*e
}

// Availability measures, in process, a caller that retries a callee failing
// independently at each rate once, within a hooks.Budget of ratio budget
// (no min-retries floor), over requests calls per rate.
func Availability(rates []float64, budget float64, requests int, seed uint64) []AvailabilityRow {
	var rows []AvailabilityRow
	for i, e := range rates {
		rng := rand.New(rand.NewPCG(seed, uint64(i))) //nolint:gosec // G404: a seeded simulation, reproducible on purpose
		b := hooks.NewBudget(hooks.Limits{Ratio: budget, MinRetriesPerSecond: 0})
		failed, retries := 0, 0
		for range requests {
			b.Deposit()
			if rng.Float64() >= e {
				continue
			}
			if hooks.Retry(ownership.ClaimMissing, true, true, b) == ownership.DecisionRetried {
				retries++
				if rng.Float64() >= e {
					continue
				}
			}
			failed++
		}
		rows = append(rows, AvailabilityRow{Rate: e, Budget: budget, Requests: requests,
			Measured: float64(failed) / float64(requests), Retries: float64(retries) / float64(requests),
			Theory: TheoryAfter(e, budget)})
	}
	return rows
}
