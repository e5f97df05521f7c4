// SPDX-License-Identifier: Apache-2.0

// Package store keeps the error-ownership statistics in PostgreSQL: the
// time-bucketed figures of the dependency analysis, the edge model learned
// from them, and the audit log of coincidental errors. Several collector
// replicas write to one database; readers (the hints endpoint, the CLI,
// the dashboards) see one merged view.
//
// # Schema
//
// The schema is versioned goose migrations embedded in the binary (Migrate;
// the writer applies them as soon as it starts, in the background and
// again until the database answers, replicas taking turns on an advisory
// lock; a reader of the edge model that finds the schema missing applies
// them too). SELECT * FROM schema_version shows the version.
//
// The statistics tables hold sums per time bucket (Config.Bucket, one minute
// by default) and key:
//
//	operation_stats  (bucket, service, operation): served, retries_received,
//	                 failed, verdict_own|propagated|coincidental,
//	                 claims_correct, expected_claimed, expected_unclaimed
//	claim_accuracy   (bucket, service, operation, claim_sent, verdict): requests
//	edge_stats       (bucket, service, operation, peer_service, peer_operation):
//	                 calls, failed_calls, attempts, retries,
//	                 call_failed_request_failed, call_ok_request_failed,
//	                 failed_alone, failed_alone_request_failed and one
//	                 column per error_ownership.retry.decision
//	address_stats    (bucket, service, peer_service, address): calls
//	depth_stats      (bucket, root_service, root_operation, depth, service): served
//	root_stats       (bucket, root_service, root_operation): requests,
//	                 storm_radius_max, storm_radius_sum
//	trace_stats      (bucket): traces, extrapolated, counted_failed,
//	                 incomplete_missing_parent, incomplete_missing_callee,
//	                 incomplete_inconsistent_sampling
//
// coincidental_audit holds one row per coincidental error, with its trace's
// weight, and flushes one row per flush written.
//
// # Estimates beside the counts
//
// Each trace stands for its adjusted count of all traffic (docs/design.md
// §8.1): 2^56/(2^56-T) for OpenTelemetry probability sampling (tracestate
// ot=th:T), N for a "1 in N" sample-rate attribute, 1 without either
// (counted). Since schema version 4 every count above but storm_radius_max
// and address_stats.calls has beside it <count>_est, double precision: the
// sum of the adjusted counts of the requests (or calls) it counts
// (dependencyanalysis's Estimate()). Every table but address_stats and
// trace_stats has extrapolated: of its requests or calls, those seen whose
// weight came from their trace's sampling. coincidental_audit.weight is the
// entry's trace's adjusted count. trace_stats counts the traces analysed,
// the incomplete ones, which no other table counts, by reason.
//
// Rows written before version 4 have NULL estimates, extrapolated 0 and
// weight 1: they counted every trace once, so readers read
// COALESCE(x_est, x), and a flush merged into such a row adds with
// COALESCE(t.x_est, t.x) + excluded.x_est. No row is rewritten.
//
// Every reader reports estimates of all traffic, float64, in the fields
// its result types have always had, and beside them, in a field named
// Seen of the same figures type with int64 counts, the requests or calls
// the traces seen hold (e.g. OperationTraffic.Served and .Seen.Served).
// Ratios — claim accuracy, requests per root request, mean storm radius,
// an audit group's share — are ratios of estimates. Each result row has a
// Sampling label: "counted" when no extrapolated request contributed,
// "extrapolated" when all did, "mixed" otherwise (an audit group: by its
// entries' weights). The edge model weighs its evidence by the estimates
// while its Samples, which min_samples is compared with, stays the count
// of failed-alone calls seen: a trace that stands for 100 requests is one
// request of evidence. TraceStats reads trace_stats. Besides its key, each statistics table is indexed
// by the name its readers of some services filter on, then the bucket
// (operation_stats, claim_accuracy, edge_stats and address_stats by
// service, depth_stats and root_stats by root_service), and the audit log
// by service, by peer_service and by trace_id. Names are strings (an absent callee is "unknown"),
// so figures from collectors with different symbol tables merge. A name
// longer than MaxNameBytes (512 bytes) is cut on a UTF-8 boundary and ends
// in "…" and ten hex digits of the SHA-256 of the whole name, so that it
// fits in an index entry and distinct long names stay distinct.
//
// Every statistics table and the audit log is range-partitioned by day
// (UTC) into <table>_pYYYYMMDD. The writer creates the partitions of the
// day it writes and the next (ensure_partitions) and, once an hour, drops
// those older than Config.Retention (DropPartitionsBefore), which costs a
// DROP TABLE, not a DELETE.
//
// # Merging replicas
//
// Rows are merged when written: one row per key and bucket holds the sum
// over every flush of every replica (storm_radius_max holds the maximum),
// so a reader sums over buckets for a window and never over replicas. The
// first flush of a bucket inserts its rows; later ones merge with INSERT …
// ON CONFLICT DO UPDATE SET x = t.x + excluded.x. The writers of one bucket
// take turns on an advisory lock held until they commit, which lets the
// first insert plainly (merging costs an index probe a row) and keeps
// concurrent writers from waiting for each other's row locks. Partitions
// leave half of each page free so that merges update rows in place.
//
// The edge model is read from edge_stats (EdgeModel, EdgesFor; or SQL:
// SELECT * FROM edge_model(since, half_life)): per edge, the failed calls
// that were the only failed call of their request and those whose request
// failed too, summed with weights that halve every half-life back from the
// newest bucket (but never from later than the database's clock), with the
// unweighted count min_samples is compared with, judged by the engine's own
// rule (dependencyanalysis.ModelConfig.Judge); and the addresses from
// address_stats.
//
// # Exactly once
//
// A flush is identified by its collector instance and sequence number
// (Flush.Instance, Flush.Seq) and written in one transaction that first
// inserts that pair into flushes (ON CONFLICT DO NOTHING). If the pair is
// there already, the transaction writes nothing and the flush counts as a
// duplicate. So a flush whose outcome is unknown — the connection was lost
// during COMMIT — can be written again: if the first COMMIT took effect the
// retry is a duplicate, and if not the retry writes it. Instance must
// therefore be unique per process lifetime (NewInstanceID), or Seq must
// survive restarts. A flush counts as written once its COMMIT returned,
// so that COMMIT must outlive a crash of the server: where the session
// would commit asynchronously (synchronous_commit = off), the flush's
// transaction waits for its write-ahead log to reach the server's disk.
// Schema changes a crash undid that way, or a restore from an older
// backup, are repaired as a dropped schema is (see Writer).
//
// # Corrections
//
// A failed request whose verdict rests on edges the model has not judged
// yet is counted at once by that first verdict, provisionally
// (dependencyanalysis.Stats.Provisional), and judged again later; its
// final verdict is written as a correction: a later flush of the same
// bucket (Flush.Corrects names the flush it corrects) holding the final
// counts less the provisional ones. Signed, they merge into the rows as
// every flush does (t.x + excluded.x); a claim_accuracy cell taken to zero
// is deleted; audit entries withdrawn (dependencyanalysis.Stats.Unaudit)
// are deleted, one row each, by time, trace_id and span_id, before those
// added. A correction that changes nothing makes no rows, and the Writer
// writes nothing for it. A correction is written only if the flush it
// corrects was (ErrCorrectsUnwritten): that flush may have been dropped
// by the queue bound or rejected, and taking back what it would have
// added would leave negative counts.
//
// # Never blocking the pipeline
//
// Writer takes flushes from the processor with Enqueue, which appends to a
// queue and returns: it never waits for the database and never fails. A
// goroutine writes the queue in order and retries failures with exponential
// backoff (100 ms doubling to 30 s, with jitter), keeping each flush's
// identity, so a database down for minutes is caught up with when it
// returns. The queue, with the flush being written, is bounded by
// Config.MaxPendingRows: past it the oldest flushes are dropped and counted
// (WriterStats). The processor bounds the audit entries it keeps per
// service (Config.AuditPerServicePerMinute).
//
// A flush the database refuses with an error no retry can fix (SQLSTATE
// classes 22, 23, 42 and 54, after the repairs Writer describes) is
// rejected and counted rather than retried, so that it never holds up the
// flushes behind it. Failures are logged without flooding the log: the
// first at once, then a line a minute at most, then the recovery.
// Writer.Shutdown writes what is queued for at most
// Config.ShutdownTimeout, then drops, counts and logs the rest.
//
// Connection strings never appear in errors with their password: the store
// describes a database by host, port, database and user only.
package store
