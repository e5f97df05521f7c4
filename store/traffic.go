// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errorownership/errorownership/dependencyanalysis"
)

// OperationTraffic is what one inbound operation served over a window.
type OperationTraffic struct {
	Service, Operation string
	// Served counts requests, retries included; Failed those that failed,
	// Own, Propagated and Coincidental the failed ones by verdict.
	Served, Failed, Own, Propagated, Coincidental int64
}

// EdgeTraffic is one edge's calls over a window, with the mode the
// engine's rule gives the window's evidence.
type EdgeTraffic struct {
	Service, Operation, PeerService, PeerOperation string
	// Calls counts logical calls, FailedCalls those whose last attempt
	// failed; Attempts counts their attempts, Retries the attempts after a
	// call's first.
	Calls, FailedCalls, Attempts, Retries int64
	// Estimate is the edge model over the window, every bucket weighing
	// the same.
	dependencyanalysis.Estimate
}

// Traffic is the service graph's traffic over a window.
type Traffic struct {
	Operations []OperationTraffic
	Edges      []EdgeTraffic
}

// Traffic returns every operation's requests and every edge's calls in
// buckets that start in [from, to), each edge judged by cfg.Judge on the
// window's unweighted evidence (as `analyze` judges a file). Both lists
// are sorted by their keys.
func (s *Store) Traffic(ctx context.Context, from, to time.Time, cfg dependencyanalysis.ModelConfig) (*Traffic, error) {
	ec := dependencyanalysis.Config{EdgeModel: cfg}
	if err := ec.Validate(); err != nil {
		return nil, fmt.Errorf("store: traffic: %w", err)
	}
	t := &Traffic{}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
SELECT service, operation, sum(served)::bigint, sum(failed)::bigint,
       sum(verdict_own)::bigint, sum(verdict_propagated)::bigint, sum(verdict_coincidental)::bigint
FROM operation_stats WHERE bucket >= $1 AND bucket < $2
GROUP BY service, operation
ORDER BY service, operation`, from, to)
		if err != nil {
			return err
		}
		t.Operations, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (OperationTraffic, error) {
			var o OperationTraffic
			err := r.Scan(&o.Service, &o.Operation, &o.Served, &o.Failed, &o.Own, &o.Propagated, &o.Coincidental)
			return o, err
		})
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `
SELECT service, operation, peer_service, peer_operation,
       sum(calls)::bigint, sum(failed_calls)::bigint, sum(attempts)::bigint, sum(retries)::bigint,
       sum(failed_alone)::bigint, sum(failed_alone_request_failed)::bigint,
       sum(calls - failed_calls)::bigint, sum(call_ok_request_failed)::bigint
FROM edge_stats WHERE bucket >= $1 AND bucket < $2
GROUP BY service, operation, peer_service, peer_operation
ORDER BY service, operation, peer_service, peer_operation`, from, to)
		if err != nil {
			return err
		}
		t.Edges, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (EdgeTraffic, error) {
			var e EdgeTraffic
			var failed, failedReqFailed, ok, okReqFailed int64
			err := r.Scan(&e.Service, &e.Operation, &e.PeerService, &e.PeerOperation,
				&e.Calls, &e.FailedCalls, &e.Attempts, &e.Retries, &failed, &failedReqFailed, &ok, &okReqFailed)
			e.Estimate = cfg.Judge(dependencyanalysis.EdgeCounts{
				Failed: float64(failed), FailedRequestFailed: float64(failedReqFailed), Samples: float64(failed),
				OK: float64(ok), OKRequestFailed: float64(okReqFailed),
			})
			return e, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: traffic: %w", err)
	}
	return t, nil
}
