// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errorownership/errorownership/dependencyanalysis"
)

// OperationFigures are what one inbound operation served over a window.
type OperationFigures[T Figure] struct {
	// Served counts requests, retries included; Failed those that failed,
	// Own, Propagated and Coincidental the failed ones by verdict.
	Served, Failed, Own, Propagated, Coincidental T
}

// OperationTraffic is what one inbound operation served over a window.
type OperationTraffic struct {
	Service, Operation string
	// OperationFigures are estimates of all traffic; Seen the counts seen.
	OperationFigures[float64]
	Seen OperationFigures[int64]
	// Sampling labels the requests served.
	Sampling Sampling
}

// CallFigures are one edge's calls over a window.
type CallFigures[T Figure] struct {
	// Calls counts logical calls, FailedCalls those whose last attempt
	// failed; Attempts counts their attempts, Retries the attempts after a
	// call's first.
	Calls, FailedCalls, Attempts, Retries T
}

// EdgeTraffic is one edge's calls over a window, with the mode the
// engine's rule gives the window's evidence.
type EdgeTraffic struct {
	Service, Operation, PeerService, PeerOperation string
	// CallFigures are estimates of all traffic; Seen the counts seen.
	CallFigures[float64]
	Seen CallFigures[int64]
	// Sampling labels the calls.
	Sampling Sampling
	// Estimate is the edge model over the window, every bucket weighing
	// the same: estimated evidence, judged over the failed-alone calls
	// seen (Counts.Samples).
	dependencyanalysis.Estimate
}

// Traffic is the service graph's traffic over a window.
type Traffic struct {
	Operations []OperationTraffic
	Edges      []EdgeTraffic
}

// Traffic returns every operation's requests and every edge's calls in
// buckets that start in [from, to), each edge judged by cfg.Judge on the
// window's evidence without decay (as `analyze` judges a file). Both lists
// are sorted by their keys.
func (s *Store) Traffic(ctx context.Context, from, to time.Time, cfg dependencyanalysis.ModelConfig) (*Traffic, error) {
	ec := dependencyanalysis.Config{EdgeModel: cfg}
	if err := ec.Validate(); err != nil {
		return nil, fmt.Errorf("store: traffic: %w", err)
	}
	t := &Traffic{}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
SELECT service, operation, `+both("served", "failed", "verdict_own", "verdict_propagated", "verdict_coincidental")+`,
       sum(extrapolated)::bigint
FROM operation_stats WHERE bucket >= $1 AND bucket < $2
GROUP BY service, operation
ORDER BY service, operation`, from, to)
		if err != nil {
			return err
		}
		t.Operations, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (OperationTraffic, error) {
			var o OperationTraffic
			var extrapolated int64
			err := r.Scan(&o.Service, &o.Operation, &o.Served, &o.Failed, &o.Own, &o.Propagated, &o.Coincidental,
				&o.Seen.Served, &o.Seen.Failed, &o.Seen.Own, &o.Seen.Propagated, &o.Seen.Coincidental, &extrapolated)
			o.Sampling = samplingOf(o.Seen.Served, extrapolated)
			return o, err
		})
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `
SELECT service, operation, peer_service, peer_operation,
       `+both("calls", "failed_calls", "attempts", "retries")+`, sum(extrapolated)::bigint,
       `+est("failed_alone")+`, `+est("failed_alone_request_failed")+`, sum(failed_alone)::bigint,
       `+est("call_ok_request_failed")+`
FROM edge_stats WHERE bucket >= $1 AND bucket < $2
GROUP BY service, operation, peer_service, peer_operation
ORDER BY service, operation, peer_service, peer_operation`, from, to)
		if err != nil {
			return err
		}
		t.Edges, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (EdgeTraffic, error) {
			var e EdgeTraffic
			var extrapolated, samples int64
			var failed, failedReqFailed, okReqFailed float64
			err := r.Scan(&e.Service, &e.Operation, &e.PeerService, &e.PeerOperation,
				&e.Calls, &e.FailedCalls, &e.Attempts, &e.Retries,
				&e.Seen.Calls, &e.Seen.FailedCalls, &e.Seen.Attempts, &e.Seen.Retries, &extrapolated,
				&failed, &failedReqFailed, &samples, &okReqFailed)
			e.Sampling = samplingOf(e.Seen.Calls, extrapolated)
			e.Estimate = cfg.Judge(dependencyanalysis.EdgeCounts{
				Failed: failed, FailedRequestFailed: failedReqFailed, Samples: float64(samples),
				OK: e.Calls - e.FailedCalls, OKRequestFailed: okReqFailed,
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
