// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ServiceEdge is what one service's calls to one peer service did over a
// window, summed over both sides' operations: an edge of the service graph.
type ServiceEdge struct {
	Service, PeerService string
	// Calls counts the logical calls, FailedCalls those whose last attempt
	// failed, Attempts their attempts and Retries the attempts after a
	// call's first.
	Calls, FailedCalls, Attempts, Retries int64
	// The caller's retry decisions (error_ownership.retry.decision): suppressed ones are the
	// storm prevented.
	Retried, SuppressedUnclaimed, SuppressedBudget, NoPolicy, Exhausted int64
}

// Suppressed returns the retries the caller's hooks held back.
func (e *ServiceEdge) Suppressed() int64 { return e.SuppressedUnclaimed + e.SuppressedBudget }

// ServiceEdges returns every service's calls to each of its peer services
// in [from, to), sorted by service and peer service.
func (s *Store) ServiceEdges(ctx context.Context, from, to time.Time) ([]ServiceEdge, error) {
	rows, err := s.pool.Query(ctx, `
SELECT service, peer_service,
       sum(calls)::bigint, sum(failed_calls)::bigint, sum(attempts)::bigint, sum(retries)::bigint,
       sum(retried)::bigint, sum(suppressed_unclaimed)::bigint, sum(suppressed_budget)::bigint,
       sum(no_policy)::bigint, sum(exhausted)::bigint
FROM edge_stats WHERE bucket >= $1 AND bucket < $2
GROUP BY service, peer_service
ORDER BY service, peer_service`, from, to)
	if err != nil {
		return nil, fmt.Errorf("store: service edges: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ServiceEdge, error) {
		var e ServiceEdge
		err := r.Scan(&e.Service, &e.PeerService, &e.Calls, &e.FailedCalls, &e.Attempts, &e.Retries,
			&e.Retried, &e.SuppressedUnclaimed, &e.SuppressedBudget, &e.NoPolicy, &e.Exhausted)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: service edges: %w", err)
	}
	return out, nil
}
