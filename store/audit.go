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

// AuditGroup counts the coincidental errors of one service whose failed
// fail-open dependency was one peer service.
type AuditGroup struct {
	Service, PeerService string
	// Audited counts the audit entries: one per coincidental error, up to
	// the store's audit_per_service_per_minute.
	Audited int64
	// First and Last are the times of the first and last entry.
	First, Last time.Time
	// Failed counts the service's failed requests, and Coincidental those
	// judged coincidental whatever the dependency, from operation_stats
	// over the buckets that start in the window, of the operation filtered
	// for, if any. Coincidental is exact where Audited is rate-limited: an
	// Audited sum below it means entries were left out of the log.
	Failed, Coincidental int64
}

// Share returns Audited / Failed: the share of the service's failed
// requests that were coincidental with a failure of this dependency. It is
// 0 without failed requests.
func (g *AuditGroup) Share() float64 {
	if g.Failed == 0 {
		return 0
	}
	return float64(g.Audited) / float64(g.Failed)
}

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
    SELECT service, peer_service, count(*) AS audited, min(time) AS first, max(time) AS last
    FROM coincidental_audit
    WHERE time >= $1 AND time < $2 AND ($3 = '' OR service = $3) AND ($4 = '' OR operation = $4)
      AND ($5 = '' OR peer_service = $5)
    GROUP BY service, peer_service
), o AS (
    SELECT service, sum(failed)::bigint AS failed, sum(verdict_coincidental)::bigint AS coincidental
    FROM operation_stats
    WHERE bucket >= $1 AND bucket < $2 AND ($3 = '' OR service = $3) AND ($4 = '' OR operation = $4)
    GROUP BY service
)
SELECT a.service, a.peer_service, a.audited, a.first, a.last, coalesce(o.failed, 0), coalesce(o.coincidental, 0)
FROM a LEFT JOIN o USING (service)
ORDER BY a.service, a.peer_service`, f.From, f.To, f.Service, f.Operation, f.PeerService)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditGroup, error) {
			var g AuditGroup
			err := r.Scan(&g.Service, &g.PeerService, &g.Audited, &g.First, &g.Last, &g.Failed, &g.Coincidental)
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
SELECT time, trace_id, span_id, service, operation, peer_service, peer_operation, claim_sent, claim_expected, reason
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
