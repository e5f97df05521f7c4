// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
)

// The read queries. Windows are half-open, [from, to), over bucket start
// times (audit entries: over their own time). Every figure is the sum over
// collector replicas: the rows are merged as they are written. Every
// figure is an estimate of all traffic, with the count seen beside it in
// the row's Seen, and ratios are ratios of estimates (see doc.go).

// EdgeEstimate is one edge of the learned edge model, merged across
// collectors, with the mode the engine's rule gives its counts.
type EdgeEstimate struct {
	Service, Operation, PeerService, PeerOperation string
	// Estimate's counts are estimates of all traffic, decayed by age; its
	// Counts.Samples is the count seen of failed-alone calls, which
	// min_samples is compared with.
	dependencyanalysis.Estimate
	// Sampling labels the calls the evidence comes from.
	Sampling Sampling
	// PeerAddresses are the addresses (server.address:port) the service used
	// to reach the peer in the window, sorted, when the peer is named
	// otherwise (address_stats).
	PeerAddresses []string
	// LastSeen is the start of the newest bucket with calls on the edge.
	LastSeen time.Time
}

// ModelWindow is how far back the merged edge model is read for decay
// half-life: seven half-lives, past which a bucket weighs under 1 % (2^-7),
// or an hour when nothing decays. The collector's verdicts and hints, and
// every reader that means to agree with them, read this window.
func ModelWindow(halfLife time.Duration) time.Duration {
	if halfLife <= 0 {
		return time.Hour
	}
	return 7 * halfLife
}

// EdgeModel returns the edge model learned since a time: per edge, the
// failed calls that were the only failed call of their request and how
// many of those requests failed (and likewise for successful calls),
// weighted by 2^(-age/halfLife) with age measured from the newest bucket
// (but never from later than the database's clock), judged by
// dependencyanalysis.ModelConfig.Judge with cfg. halfLife <= 0 weighs every
// bucket fully. Edges come sorted by service, operation, peer service and
// peer operation.
func (s *Store) EdgeModel(ctx context.Context, since time.Time, halfLife time.Duration, cfg dependencyanalysis.ModelConfig) ([]EdgeEstimate, error) {
	return s.edgeModel(ctx, nil, since, halfLife, cfg)
}

// EdgesFor is EdgeModel for the edges of one calling service, as the
// ownership hints need them.
func (s *Store) EdgesFor(ctx context.Context, service string, since time.Time, halfLife time.Duration, cfg dependencyanalysis.ModelConfig) ([]EdgeEstimate, error) {
	return s.edgeModel(ctx, &service, since, halfLife, cfg)
}

func (s *Store) edgeModel(ctx context.Context, caller *string, since time.Time, halfLife time.Duration, cfg dependencyanalysis.ModelConfig) ([]EdgeEstimate, error) {
	// Judge needs a valid rule; validate it as the engine does.
	ec := dependencyanalysis.Config{EdgeModel: cfg}
	if err := ec.Validate(); err != nil {
		return nil, fmt.Errorf("store: edge model: %w", err)
	}
	read := func() (out []EdgeEstimate, err error) {
		err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `
SELECT service, operation, peer_service, peer_operation,
       failed, failed_request_failed, samples, ok, ok_request_failed, last_seen, calls, extrapolated
FROM edge_model($1, $2::double precision * interval '1 second', $3)
ORDER BY service, operation, peer_service, peer_operation`, since, halfLife.Seconds(), caller)
			if err != nil {
				return err
			}
			out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (EdgeEstimate, error) {
				var e EdgeEstimate
				var c dependencyanalysis.EdgeCounts
				var samples, calls, extrapolated int64
				err := r.Scan(&e.Service, &e.Operation, &e.PeerService, &e.PeerOperation,
					&c.Failed, &c.FailedRequestFailed, &samples, &c.OK, &c.OKRequestFailed, &e.LastSeen, &calls, &extrapolated)
				c.Samples = float64(samples)
				e.Sampling = samplingOf(calls, extrapolated)
				e.Estimate = cfg.Judge(c)
				e.LastSeen = e.LastSeen.UTC()
				return e, err
			})
			if err != nil {
				return err
			}
			// One statement per case: ($2::text IS NULL OR service = $2)
			// would keep a generic plan from reading one caller's rows
			// through address_stats_service_bucket.
			if caller == nil {
				rows, err = tx.Query(ctx, addressesAll, since)
			} else {
				rows, err = tx.Query(ctx, addressesOf, since, *caller)
			}
			if err != nil {
				return err
			}
			type pair struct{ service, peer string }
			addresses := make(map[pair][]string)
			var svc, peer, addr string
			_, err = pgx.ForEachRow(rows, []any{&svc, &peer, &addr}, func() error {
				k := pair{svc, peer}
				addresses[k] = append(addresses[k], addr)
				return nil
			})
			for i := range out {
				out[i].PeerAddresses = addresses[pair{out[i].Service, out[i].PeerService}]
			}
			return err
		})
		return out, err
	}
	out, err := read()
	if schemaMissing(err) || schemaChanged(err) {
		// Readers such as the hints may ask before the writer has migrated
		// a new database, while it migrates, or after the schema was
		// dropped under a running collector: an empty model is the answer
		// then, not an error. Migrate waits for a migration under way.
		if _, merr := s.Migrate(ctx); merr != nil {
			return nil, fmt.Errorf("store: edge model: %w (and migrating: %w)", err, merr)
		}
		out, err = read()
	}
	if err != nil {
		return nil, fmt.Errorf("store: edge model: %w", err)
	}
	return out, nil
}

// The addresses callers used to reach their peers, of every caller or of one.
const (
	addressesAll = `
SELECT service, peer_service, address FROM address_stats
WHERE bucket >= $1
GROUP BY service, peer_service, address
ORDER BY service, peer_service, address`
	addressesOf = `
SELECT service, peer_service, address FROM address_stats
WHERE bucket >= $1 AND service = $2
GROUP BY service, peer_service, address
ORDER BY service, peer_service, address`
)

// DepthFigures are the requests a service served at one depth below a root
// operation, and the root operation's requests.
type DepthFigures[T Figure] struct {
	// Served counts the requests the service served at that depth.
	Served T
	// RootRequests counts the root operation's requests.
	RootRequests T
}

// RootDepth is how many requests a service served at one depth below a
// root (user-facing) operation, per root request: Ƞ, 2Ƞ, 4Ƞ … (docs/design.md §1)
type RootDepth struct {
	RootService, RootOperation string
	Depth                      int
	Service                    string
	// DepthFigures are estimates of all traffic; Seen the counts seen.
	DepthFigures[float64]
	Seen DepthFigures[int64]
	// PerRoot is Served / RootRequests, estimates (0 without root
	// requests).
	PerRoot float64
	// Sampling labels the requests served.
	Sampling Sampling
}

// ServedPerRoot returns, per root operation, depth and service, the
// requests served per root request, sorted by root, depth and service.
func (s *Store) ServedPerRoot(ctx context.Context, from, to time.Time) ([]RootDepth, error) {
	rows, err := s.pool.Query(ctx, `
WITH d AS (
    SELECT root_service, root_operation, depth, service, sum(served)::bigint AS served, sum(coalesce(served_est, served))::double precision AS served_est,
           sum(extrapolated)::bigint AS extrapolated
    FROM depth_stats WHERE bucket >= $1 AND bucket < $2
    GROUP BY root_service, root_operation, depth, service
), r AS (
    SELECT root_service, root_operation, sum(requests)::bigint AS requests,
           sum(coalesce(requests_est, requests))::double precision AS requests_est
    FROM root_stats WHERE bucket >= $1 AND bucket < $2
    GROUP BY root_service, root_operation
)
SELECT d.root_service, d.root_operation, d.depth, d.service, d.served_est, coalesce(r.requests_est, 0),
       d.served, coalesce(r.requests, 0), d.extrapolated
FROM d LEFT JOIN r USING (root_service, root_operation)
ORDER BY d.root_service, d.root_operation, d.depth, d.service`, from, to)
	if err != nil {
		return nil, fmt.Errorf("store: served per root: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RootDepth, error) {
		var d RootDepth
		var depth int16
		var extrapolated int64
		err := r.Scan(&d.RootService, &d.RootOperation, &depth, &d.Service, &d.Served, &d.RootRequests,
			&d.Seen.Served, &d.Seen.RootRequests, &extrapolated)
		d.Depth = int(depth)
		d.PerRoot = ratio(d.Served, d.RootRequests)
		d.Sampling = samplingOf(d.Seen.Served, extrapolated)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: served per root: %w", err)
	}
	return out, nil
}

// RootFigures are a root operation's requests and the sum of their
// retry-storm radius.
type RootFigures[T Figure] struct {
	Requests       T
	StormRadiusSum T
}

// RootSummary is a root operation's requests and retry-storm radius.
type RootSummary struct {
	RootService, RootOperation string
	// RootFigures are estimates of all traffic; Seen the counts seen.
	RootFigures[float64]
	Seen RootFigures[int64]
	// StormRadiusMax is the longest chain of consecutive hops that retried
	// one failure; StormRadiusMean its mean per root request, a ratio of
	// estimates.
	StormRadiusMax  int
	StormRadiusMean float64
	// Sampling labels the root requests.
	Sampling Sampling
}

// Roots returns the root operations' requests and storm radius, sorted by
// root service and operation.
func (s *Store) Roots(ctx context.Context, from, to time.Time) ([]RootSummary, error) {
	rows, err := s.pool.Query(ctx, `
SELECT root_service, root_operation, `+both("requests", "storm_radius_sum")+`,
       max(storm_radius_max), sum(extrapolated)::bigint
FROM root_stats WHERE bucket >= $1 AND bucket < $2
GROUP BY root_service, root_operation
ORDER BY root_service, root_operation`, from, to)
	if err != nil {
		return nil, fmt.Errorf("store: roots: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RootSummary, error) {
		var rs RootSummary
		var radiusMax int32
		var extrapolated int64
		err := r.Scan(&rs.RootService, &rs.RootOperation, &rs.Requests, &rs.StormRadiusSum,
			&rs.Seen.Requests, &rs.Seen.StormRadiusSum, &radiusMax, &extrapolated)
		rs.StormRadiusMax = int(radiusMax)
		rs.StormRadiusMean = ratio(rs.StormRadiusSum, rs.Requests)
		rs.Sampling = samplingOf(rs.Seen.Requests, extrapolated)
		return rs, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: roots: %w", err)
	}
	return out, nil
}

// ClaimFigures are an inbound operation's failed requests by the claim its
// service sent and the verdict.
type ClaimFigures[T Figure] struct {
	// Failed counts failed requests; Correct those whose sent claim is the
	// one the rules expect.
	Failed, Correct T
	// Verdicts counts failed requests by verdict, indexed by
	// dependencyanalysis.VerdictKind (index 0 unused).
	Verdicts [4]T
	// Requests counts failed requests by the claim sent (error_ownership.claim.sent,
	// indexed by ownership.Claim) and the verdict (indexed by
	// dependencyanalysis.VerdictKind).
	Requests [3][4]T
	// ExpectedClaimed and ExpectedUnclaimed count failed requests by the
	// claim the rules expect.
	ExpectedClaimed, ExpectedUnclaimed T
}

// ClaimAccuracy is one inbound operation's claim-accuracy confusion matrix.
type ClaimAccuracy struct {
	Service, Operation string
	// ClaimFigures are estimates of all traffic; Seen the counts seen.
	ClaimFigures[float64]
	Seen ClaimFigures[int64]
	// Sampling labels the failed requests (the matrix's cells).
	Sampling Sampling
}

// Accuracy returns Correct / Failed, estimates, or 1 without failures.
func (c *ClaimAccuracy) Accuracy() float64 {
	if c.Failed <= 0 {
		return 1
	}
	return c.Correct / c.Failed
}

// ClaimAccuracy returns the confusion matrix of every inbound operation
// with failed requests, sorted by service and operation.
func (s *Store) ClaimAccuracy(ctx context.Context, from, to time.Time) ([]ClaimAccuracy, error) {
	type opKey struct{ service, operation string }
	var out []ClaimAccuracy
	index := make(map[opKey]int)
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		// One snapshot for both queries, so the matrix adds up to the totals.
		rows, err := tx.Query(ctx, `
SELECT service, operation, `+both("failed", "claims_correct", "verdict_own", "verdict_propagated", "verdict_coincidental",
			"expected_claimed", "expected_unclaimed")+`
FROM operation_stats WHERE bucket >= $1 AND bucket < $2
GROUP BY service, operation HAVING sum(failed) > 0
ORDER BY service, operation`, from, to)
		if err != nil {
			return err
		}
		var c ClaimAccuracy
		figures := func(f any) []any {
			switch f := f.(type) {
			case *ClaimFigures[float64]:
				return []any{&f.Failed, &f.Correct, &f.Verdicts[dependencyanalysis.VerdictOwn], &f.Verdicts[dependencyanalysis.VerdictPropagated],
					&f.Verdicts[dependencyanalysis.VerdictCoincidental], &f.ExpectedClaimed, &f.ExpectedUnclaimed}
			case *ClaimFigures[int64]:
				return []any{&f.Failed, &f.Correct, &f.Verdicts[dependencyanalysis.VerdictOwn], &f.Verdicts[dependencyanalysis.VerdictPropagated],
					&f.Verdicts[dependencyanalysis.VerdictCoincidental], &f.ExpectedClaimed, &f.ExpectedUnclaimed}
			}
			return nil
		}
		scan := append(append([]any{&c.Service, &c.Operation}, figures(&c.ClaimFigures)...), figures(&c.Seen)...)
		_, err = pgx.ForEachRow(rows, scan, func() error {
			index[opKey{c.Service, c.Operation}] = len(out)
			out = append(out, c)
			return nil
		})
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `
SELECT service, operation, claim_sent, verdict, `+both("requests")+`, sum(extrapolated)::bigint
FROM claim_accuracy WHERE bucket >= $1 AND bucket < $2
GROUP BY service, operation, claim_sent, verdict`, from, to)
		if err != nil {
			return err
		}
		var svc, op, sent, verdict string
		var estimate float64
		var n, extrapolated int64
		cells := make([]int64, len(out))
		extrapolatedCells := make([]int64, len(out))
		_, err = pgx.ForEachRow(rows, []any{&svc, &op, &sent, &verdict, &estimate, &n, &extrapolated}, func() error {
			i, ok := index[opKey{svc, op}]
			v := verdictIndex(verdict)
			if !ok || v == 0 {
				return nil
			}
			claim := ownership.ParseClaim(sent)
			out[i].Requests[claim][v] += estimate
			out[i].Seen.Requests[claim][v] += n
			cells[i] += n
			extrapolatedCells[i] += extrapolated
			return nil
		})
		for i := range out {
			out[i].Sampling = samplingOf(cells[i], extrapolatedCells[i])
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim accuracy: %w", err)
	}
	return out, nil
}

func verdictIndex(name string) dependencyanalysis.VerdictKind {
	for v := dependencyanalysis.VerdictOwn; v <= dependencyanalysis.VerdictCoincidental; v++ {
		if v.String() == name {
			return v
		}
	}
	return 0
}

// AmplificationFigures are one service's traffic and retries.
type AmplificationFigures[T Figure] struct {
	// Served counts the inbound requests the service served, retries
	// included; RetriesReceived those that were retries.
	Served, RetriesReceived T
	// Calls counts the service's outbound logical calls, Attempts their
	// attempts and RetriesSent the attempts after a call's first.
	Calls, Attempts, RetriesSent T
	// The service's retry decisions (error_ownership.retry.decision): suppressed ones are
	// the storm prevented.
	Retried, SuppressedUnclaimed, SuppressedBudget, NoPolicy, Exhausted T
}

// Suppressed returns the retries the hooks held back.
func (a *AmplificationFigures[T]) Suppressed() T { return a.SuppressedUnclaimed + a.SuppressedBudget }

// Amplification is one service's traffic and retries.
type Amplification struct {
	Service string
	// AmplificationFigures are estimates of all traffic; Seen the counts
	// seen.
	AmplificationFigures[float64]
	Seen AmplificationFigures[int64]
	// Sampling labels the requests served and the calls made.
	Sampling Sampling
}

// Amplification returns every service's traffic and retries, sorted by
// service.
func (s *Store) Amplification(ctx context.Context, from, to time.Time) ([]Amplification, error) {
	// Each side's columns: the estimates, the counts seen, extrapolated.
	opCols := []string{"served", "retries_received"}
	edgeCols := []string{"calls", "attempts", "retries", "retried", "suppressed_unclaimed", "suppressed_budget", "no_policy", "exhausted"}
	var outer []string
	for _, side := range []struct {
		name string
		cols []string
	}{{"o", opCols}, {"e", edgeCols}} {
		for _, c := range side.cols {
			outer = append(outer, fmt.Sprintf("coalesce(%s.%s_est, 0)", side.name, c))
		}
		for _, c := range side.cols {
			outer = append(outer, fmt.Sprintf("coalesce(%s.%s, 0)", side.name, c))
		}
		outer = append(outer, fmt.Sprintf("coalesce(%s.extrapolated, 0)", side.name))
	}
	named := func(cols []string) string {
		var out []string
		for _, c := range cols {
			out = append(out, est(c)+" AS "+c+"_est")
		}
		for _, c := range cols {
			out = append(out, seen(c)+" AS "+c)
		}
		return strings.Join(out, ", ")
	}
	rows, err := s.pool.Query(ctx, `
WITH o AS (
    SELECT service, `+named(opCols)+`, sum(extrapolated)::bigint AS extrapolated
    FROM operation_stats WHERE bucket >= $1 AND bucket < $2 GROUP BY service
), e AS (
    SELECT service, `+named(edgeCols)+`, sum(extrapolated)::bigint AS extrapolated
    FROM edge_stats WHERE bucket >= $1 AND bucket < $2 GROUP BY service
)
SELECT service, `+strings.Join(outer, ", ")+`
FROM o FULL JOIN e USING (service)
ORDER BY service`, from, to)
	if err != nil {
		return nil, fmt.Errorf("store: amplification: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Amplification, error) {
		var a Amplification
		var opExtrapolated, edgeExtrapolated int64
		err := r.Scan(&a.Service,
			&a.Served, &a.RetriesReceived, &a.Seen.Served, &a.Seen.RetriesReceived, &opExtrapolated,
			&a.Calls, &a.Attempts, &a.RetriesSent, &a.Retried, &a.SuppressedUnclaimed, &a.SuppressedBudget, &a.NoPolicy, &a.Exhausted,
			&a.Seen.Calls, &a.Seen.Attempts, &a.Seen.RetriesSent, &a.Seen.Retried, &a.Seen.SuppressedUnclaimed,
			&a.Seen.SuppressedBudget, &a.Seen.NoPolicy, &a.Seen.Exhausted, &edgeExtrapolated)
		a.Sampling = samplingOf(a.Seen.Served+a.Seen.Calls, opExtrapolated+edgeExtrapolated)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: amplification: %w", err)
	}
	return out, nil
}

// AuditRecord is one coincidental error from the audit log.
type AuditRecord struct {
	Time            time.Time
	TraceID, SpanID string // lower-case hex
	Service         string
	Operation       string
	// PeerService and PeerOperation name the failed fail-open dependency.
	PeerService, PeerOperation string
	// ClaimSent is the claim the service sent; ClaimExpected the one the
	// rules expect (claimed: the error is the service's own).
	ClaimSent, ClaimExpected ownership.Claim
	Reason                   string
	// Weight is the adjusted count of the entry's trace: how many such
	// errors of all traffic the entry stands for (1: counted).
	Weight float64
}

// DefaultAuditLimit is how many entries Audit returns when asked for none
// or fewer.
const DefaultAuditLimit = 100

// Audit returns up to limit coincidental errors in [from, to), newest first,
// of one service or (service "") all.
func (s *Store) Audit(ctx context.Context, from, to time.Time, service string, limit int) ([]AuditRecord, error) {
	if limit <= 0 {
		limit = DefaultAuditLimit
	}
	// One statement per case: ($3 = '' OR service = $3) would keep a
	// generic plan from reading one service's entries through
	// coincidental_audit_service_time.
	var rows pgx.Rows
	var err error
	if service == "" {
		rows, err = s.pool.Query(ctx, auditAll, from, to, limit)
	} else {
		rows, err = s.pool.Query(ctx, auditOf, from, to, limit, service)
	}
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanAuditRecord)
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	return out, nil
}

// scanAuditRecord reads a row of coincidental_audit's columns, in the
// order time, trace_id, span_id, service, operation, peer_service,
// peer_operation, claim_sent, claim_expected, reason, weight.
func scanAuditRecord(r pgx.CollectableRow) (AuditRecord, error) {
	var a AuditRecord
	var sent, want string
	err := r.Scan(&a.Time, &a.TraceID, &a.SpanID, &a.Service, &a.Operation, &a.PeerService, &a.PeerOperation, &sent, &want, &a.Reason, &a.Weight)
	a.ClaimSent, a.ClaimExpected = ownership.ParseClaim(sent), ownership.ParseClaim(want)
	a.Time = a.Time.UTC()
	return a, err
}

// The audit log of every service, or of one.
const (
	auditAll = `
SELECT time, trace_id, span_id, service, operation, peer_service, peer_operation, claim_sent, claim_expected, reason, weight
FROM coincidental_audit
WHERE time >= $1 AND time < $2
ORDER BY time DESC, trace_id, span_id
LIMIT $3`
	auditOf = `
SELECT time, trace_id, span_id, service, operation, peer_service, peer_operation, claim_sent, claim_expected, reason, weight
FROM coincidental_audit
WHERE time >= $1 AND time < $2 AND service = $4
ORDER BY time DESC, trace_id, span_id
LIMIT $3`
)

// SchemaVersion returns the applied schema version (0: none).
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	var v *int64
	if err := s.pool.QueryRow(ctx, "SELECT version FROM schema_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("store: schema version: %w", err)
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}
