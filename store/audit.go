// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AuditFilter selects coincidental errors from the audit log: those dated
// in [From, To) of the service, operation and failed dependency named ("":
// any).
type AuditFilter struct {
	From, To    time.Time
	Service     string
	Operation   string
	PeerService string
	// Limit bounds AuditEntries' result; 0 returns every entry.
	Limit int
}

// AuditFigures count the coincidental errors of one service with one
// failed dependency, and the service's failed requests.
type AuditFigures[T Figure] struct {
	// Audited counts the audit entries: one per coincidental error, up to
	// the store's audit_per_service_per_minute; estimated, each entry
	// weighs its trace's adjusted count.
	Audited T
	// Failed counts the service's failed requests, and Coincidental those
	// judged coincidental whatever the dependency, from operation_stats
	// over the buckets that start in the window, of the operation filtered
	// for, if any. Coincidental is exact where Audited is rate-limited: an
	// Audited sum below it means entries were left out of the log.
	Failed, Coincidental T
}

// AuditGroup counts the coincidental errors of one service whose failed
// fail-open dependency was one peer service.
type AuditGroup struct {
	Service, PeerService string
	// AuditFigures are estimates of all traffic; Seen the counts seen.
	AuditFigures[float64]
	Seen AuditFigures[int64]
	// First and Last are the times of the first and last entry.
	First, Last time.Time
	// Sampling labels the audit entries: extrapolated ones weigh other
	// than 1.
	Sampling Sampling
}

// Share returns Audited / Failed, estimates: the share of the service's
// failed requests that were coincidental with a failure of this
// dependency. It is 0 without failed requests.
func (g *AuditGroup) Share() float64 { return ratio(g.Audited, g.Failed) }

// AuditGroups counts the coincidental errors that f selects per service and
// failed dependency, with the service's failed requests beside them,
// sorted by service and dependency.
func (s *Store) AuditGroups(ctx context.Context, f AuditFilter) ([]AuditGroup, error) {
	var out []AuditGroup
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		// One snapshot, so that a share never counts entries whose
		// request's statistics it does not.
		rows, err := tx.Query(ctx, `
WITH a AS (
    SELECT service, peer_service, sum(weight)::double precision AS audited_est, count(*) AS audited,
           count(*) FILTER (WHERE weight <> 1) AS extrapolated, min(time) AS first, max(time) AS last
    FROM coincidental_audit
    WHERE time >= $1 AND time < $2 AND ($3 = '' OR service = $3) AND ($4 = '' OR operation = $4)
      AND ($5 = '' OR peer_service = $5)
    GROUP BY service, peer_service
), o AS (
    SELECT service, `+est("failed")+` AS failed_est, `+est("verdict_coincidental")+` AS coincidental_est,
           sum(failed)::bigint AS failed, sum(verdict_coincidental)::bigint AS coincidental
    FROM operation_stats
    WHERE bucket >= $1 AND bucket < $2 AND ($3 = '' OR service = $3) AND ($4 = '' OR operation = $4)
    GROUP BY service
)
SELECT a.service, a.peer_service, a.audited_est, coalesce(o.failed_est, 0), coalesce(o.coincidental_est, 0),
       a.audited, coalesce(o.failed, 0), coalesce(o.coincidental, 0), a.extrapolated, a.first, a.last
FROM a LEFT JOIN o USING (service)
ORDER BY a.service, a.peer_service`, f.From, f.To, f.Service, f.Operation, f.PeerService)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditGroup, error) {
			var g AuditGroup
			var extrapolated int64
			err := r.Scan(&g.Service, &g.PeerService, &g.Audited, &g.Failed, &g.Coincidental,
				&g.Seen.Audited, &g.Seen.Failed, &g.Seen.Coincidental, &extrapolated, &g.First, &g.Last)
			g.Sampling = samplingOf(g.Seen.Audited, extrapolated)
			g.First, g.Last = g.First.UTC(), g.Last.UTC()
			return g, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: audit groups: %w", err)
	}
	return out, nil
}

// AuditEntries returns the coincidental errors f selects, oldest first, at
// most f.Limit of them (0: all).
func (s *Store) AuditEntries(ctx context.Context, f AuditFilter) ([]AuditRecord, error) {
	var limit *int
	if f.Limit > 0 {
		limit = &f.Limit
	}
	rows, err := s.pool.Query(ctx, `
SELECT time, trace_id, span_id, service, operation, peer_service, peer_operation, claim_sent, claim_expected, reason, weight
FROM coincidental_audit
WHERE time >= $1 AND time < $2 AND ($3 = '' OR service = $3) AND ($4 = '' OR operation = $4)
  AND ($5 = '' OR peer_service = $5)
ORDER BY time, trace_id, span_id
LIMIT $6`, f.From, f.To, f.Service, f.Operation, f.PeerService, limit)
	if err != nil {
		return nil, fmt.Errorf("store: audit entries: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanAuditRecord)
	if err != nil {
		return nil, fmt.Errorf("store: audit entries: %w", err)
	}
	return out, nil
}
