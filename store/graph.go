// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ServiceEdgeFigures are what one service's calls to one peer service did
// over a window.
type ServiceEdgeFigures[T Figure] struct {
	// Calls counts the logical calls, FailedCalls those whose last attempt
	// failed, Attempts their attempts and Retries the attempts after a
	// call's first.
	Calls, FailedCalls, Attempts, Retries T
	// The caller's retry decisions (error_ownership.retry.decision): suppressed ones are the
	// storm prevented.
	Retried, SuppressedUnclaimed, SuppressedBudget, NoPolicy, Exhausted T
}

// Suppressed returns the retries the caller's hooks held back.
func (e *ServiceEdgeFigures[T]) Suppressed() T { return e.SuppressedUnclaimed + e.SuppressedBudget }

// ServiceEdge is what one service's calls to one peer service did over a
// window, summed over both sides' operations: an edge of the service graph.
type ServiceEdge struct {
	Service, PeerService string
	// ServiceEdgeFigures are estimates of all traffic; Seen the counts
	// seen.
	ServiceEdgeFigures[float64]
	Seen ServiceEdgeFigures[int64]
	// Sampling labels the calls.
	Sampling Sampling
}

// ServiceEdges returns every service's calls to each of its peer services
// in [from, to), sorted by service and peer service.
func (s *Store) ServiceEdges(ctx context.Context, from, to time.Time) ([]ServiceEdge, error) {
	rows, err := s.pool.Query(ctx, `
SELECT service, peer_service,
       `+both("calls", "failed_calls", "attempts", "retries", "retried", "suppressed_unclaimed", "suppressed_budget",
		"no_policy", "exhausted")+`, sum(extrapolated)::bigint
FROM edge_stats WHERE bucket >= $1 AND bucket < $2
GROUP BY service, peer_service
ORDER BY service, peer_service`, from, to)
	if err != nil {
		return nil, fmt.Errorf("store: service edges: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ServiceEdge, error) {
		var e ServiceEdge
		var extrapolated int64
		err := r.Scan(&e.Service, &e.PeerService, &e.Calls, &e.FailedCalls, &e.Attempts, &e.Retries,
			&e.Retried, &e.SuppressedUnclaimed, &e.SuppressedBudget, &e.NoPolicy, &e.Exhausted,
			&e.Seen.Calls, &e.Seen.FailedCalls, &e.Seen.Attempts, &e.Seen.Retries,
			&e.Seen.Retried, &e.Seen.SuppressedUnclaimed, &e.Seen.SuppressedBudget, &e.Seen.NoPolicy, &e.Seen.Exhausted, &extrapolated)
		e.Sampling = samplingOf(e.Seen.Calls, extrapolated)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: service edges: %w", err)
	}
	return out, nil
}
