-- SPDX-License-Identifier: Apache-2.0

-- Version 4: estimates of all traffic beside the counts seen.
--
-- Each trace the collector analyses stands for its adjusted count of all
-- traffic (docs/design.md §8.1): 2^56/(2^56-T) for OpenTelemetry
-- probability sampling (tracestate ot=th:T), N for a "1 in N" sample-rate
-- attribute, 1 without either. Every counter keeps the count seen and, in
-- <counter>_est, the sum of the adjusted counts; readers report the
-- estimate and the count beside it, and take ratios of estimates.
--
-- Rows written before this version have NULL estimates: they counted every
-- trace once, so a reader reads COALESCE(x_est, x), and a writer merges
-- into such a row with COALESCE(t.x_est, t.x) + excluded.x_est. Adding a
-- nullable column, or one with a constant default, rewrites no row.
--
-- extrapolated counts what the estimates extrapolated: the requests (or
-- calls) seen whose trace's weight came from its sampling rather than
-- counting 1. A reader labels a figure "counted" when it is 0, "extrapolated"
-- when it equals the count seen, "mixed" otherwise.

-- +goose Up

ALTER TABLE operation_stats
    ADD COLUMN served_est               double precision,
    ADD COLUMN retries_received_est     double precision,
    ADD COLUMN failed_est               double precision,
    ADD COLUMN verdict_own_est          double precision,
    ADD COLUMN verdict_propagated_est   double precision,
    ADD COLUMN verdict_coincidental_est double precision,
    ADD COLUMN claims_correct_est       double precision,
    ADD COLUMN expected_claimed_est     double precision,
    ADD COLUMN expected_unclaimed_est   double precision,
    ADD COLUMN extrapolated             bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN operation_stats.served_est IS 'served estimated for all traffic: the sum of the requests'' adjusted counts (docs/design.md §8.1). NULL in rows written before schema version 4, which counted each request once: read COALESCE(served_est, served). Likewise every <counter>_est column.';
COMMENT ON COLUMN operation_stats.retries_received_est IS 'retries_received estimated for all traffic; NULL before schema version 4 (read COALESCE(retries_received_est, retries_received)).';
COMMENT ON COLUMN operation_stats.failed_est IS 'failed estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN operation_stats.verdict_own_est IS 'verdict_own estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN operation_stats.verdict_propagated_est IS 'verdict_propagated estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN operation_stats.verdict_coincidental_est IS 'verdict_coincidental estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN operation_stats.claims_correct_est IS 'claims_correct estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN operation_stats.expected_claimed_est IS 'expected_claimed estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN operation_stats.expected_unclaimed_est IS 'expected_unclaimed estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN operation_stats.extrapolated IS 'Of served, the requests whose trace''s weight came from its sampling (sampling.method extrapolated) rather than counting 1.';

ALTER TABLE claim_accuracy
    ADD COLUMN requests_est double precision,
    ADD COLUMN extrapolated bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN claim_accuracy.requests_est IS 'requests estimated for all traffic; NULL before schema version 4 (read COALESCE(requests_est, requests)).';
COMMENT ON COLUMN claim_accuracy.extrapolated IS 'Of requests, those whose trace''s weight came from its sampling.';

ALTER TABLE edge_stats
    ADD COLUMN calls_est                       double precision,
    ADD COLUMN failed_calls_est                double precision,
    ADD COLUMN attempts_est                    double precision,
    ADD COLUMN retries_est                     double precision,
    ADD COLUMN call_failed_request_failed_est  double precision,
    ADD COLUMN call_ok_request_failed_est      double precision,
    ADD COLUMN retried_est                     double precision,
    ADD COLUMN suppressed_unclaimed_est        double precision,
    ADD COLUMN suppressed_budget_est           double precision,
    ADD COLUMN no_policy_est                   double precision,
    ADD COLUMN exhausted_est                   double precision,
    ADD COLUMN failed_alone_est                double precision,
    ADD COLUMN failed_alone_request_failed_est double precision,
    ADD COLUMN extrapolated                    bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN edge_stats.calls_est IS 'calls estimated for all traffic: the sum of the calling requests'' adjusted counts. NULL before schema version 4 (read COALESCE(calls_est, calls)); likewise every <counter>_est column.';
COMMENT ON COLUMN edge_stats.failed_calls_est IS 'failed_calls estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN edge_stats.attempts_est IS 'attempts estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN edge_stats.retries_est IS 'retries estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN edge_stats.call_failed_request_failed_est IS 'call_failed_request_failed estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN edge_stats.call_ok_request_failed_est IS 'call_ok_request_failed estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN edge_stats.retried_est IS 'retried estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN edge_stats.suppressed_unclaimed_est IS 'suppressed_unclaimed estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN edge_stats.suppressed_budget_est IS 'suppressed_budget estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN edge_stats.no_policy_est IS 'no_policy estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN edge_stats.exhausted_est IS 'exhausted estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN edge_stats.failed_alone_est IS 'failed_alone estimated for all traffic: the edge model''s weighted evidence (failed_alone, counted, is what min_samples is compared with). NULL before schema version 4.';
COMMENT ON COLUMN edge_stats.failed_alone_request_failed_est IS 'failed_alone_request_failed estimated for all traffic; NULL before schema version 4.';
COMMENT ON COLUMN edge_stats.extrapolated IS 'Of calls, those made by requests whose trace''s weight came from its sampling.';

ALTER TABLE depth_stats
    ADD COLUMN served_est   double precision,
    ADD COLUMN extrapolated bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN depth_stats.served_est IS 'served estimated for all traffic; NULL before schema version 4 (read COALESCE(served_est, served)). Divide by root_stats.requests_est for requests per root request.';
COMMENT ON COLUMN depth_stats.extrapolated IS 'Of served, the requests whose trace''s weight came from its sampling.';

ALTER TABLE root_stats
    ADD COLUMN requests_est         double precision,
    ADD COLUMN storm_radius_sum_est double precision,
    ADD COLUMN extrapolated         bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN root_stats.requests_est IS 'requests estimated for all traffic; NULL before schema version 4 (read COALESCE(requests_est, requests)).';
COMMENT ON COLUMN root_stats.storm_radius_sum_est IS 'storm_radius_sum estimated for all traffic (each trace''s radius times its adjusted count); NULL before schema version 4. The mean radius is storm_radius_sum_est / requests_est.';
COMMENT ON COLUMN root_stats.extrapolated IS 'Of requests, the root requests whose trace''s weight came from its sampling.';

ALTER TABLE coincidental_audit
    ADD COLUMN weight double precision NOT NULL DEFAULT 1;
COMMENT ON COLUMN coincidental_audit.weight IS 'The adjusted count of the entry''s trace: how many coincidental errors of all traffic the entry stands for (1: counted, and every entry written before schema version 4).';

CREATE TABLE trace_stats (
    bucket                           timestamptz NOT NULL,
    traces                           bigint      NOT NULL DEFAULT 0,
    extrapolated                     bigint      NOT NULL DEFAULT 0,
    counted_failed                   bigint      NOT NULL DEFAULT 0,
    incomplete_missing_parent        bigint      NOT NULL DEFAULT 0,
    incomplete_missing_callee        bigint      NOT NULL DEFAULT 0,
    incomplete_inconsistent_sampling bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket)
) PARTITION BY RANGE (bucket);
COMMENT ON TABLE trace_stats IS 'Per bucket: the traces analysed, summed over collector replicas. Incomplete traces are counted here only: the other tables'' figures leave them out.';
COMMENT ON COLUMN trace_stats.traces IS 'Traces analysed, incomplete ones included.';
COMMENT ON COLUMN trace_stats.extrapolated IS 'Complete traces whose weight came from their sampling (sampling.method extrapolated); traces - extrapolated - incomplete_* were counted once each.';
COMMENT ON COLUMN trace_stats.counted_failed IS 'Counted (unsampled) traces with a failed request: a high share of them hints at a sampler upstream that keeps errors without saying so, which would inflate the failure rates.';
COMMENT ON COLUMN trace_stats.incomplete_missing_parent IS 'Traces set apart because a span''s parent was missing.';
COMMENT ON COLUMN trace_stats.incomplete_missing_callee IS 'Traces set apart because a called service''s spans were missing.';
COMMENT ON COLUMN trace_stats.incomplete_inconsistent_sampling IS 'Traces set apart because their spans disagreed on the sampling.';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION partitioned_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['operation_stats', 'claim_accuracy', 'edge_stats', 'depth_stats', 'root_stats', 'coincidental_audit', 'address_stats', 'trace_stats']
$$;
-- +goose StatementEnd

-- The days that have partitions get the new table's too.
-- +goose StatementBegin
DO $$
DECLARE
    day date;
BEGIN
    FOR day IN
        SELECT DISTINCT to_date(right(c.relname, 8), 'YYYYMMDD')
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'edge_stats'::regclass AND c.relname ~ '^edge_stats_p[0-9]{8}$'
    LOOP
        PERFORM ensure_partitions(day);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- edge_model as in version 3, on the estimates: the evidence is weighted
-- by each request's adjusted count as well as by age, while samples stays
-- the count seen, which min_samples is compared with (a trace that stands
-- for 100 is still one request of evidence). calls and extrapolated, the
-- counts seen, tell a reader whether the evidence was extrapolated.
DROP FUNCTION edge_model(timestamptz, interval, text);
-- +goose StatementBegin
CREATE FUNCTION edge_model(since timestamptz, half_life interval, caller text DEFAULT NULL)
RETURNS TABLE (
    service               text,
    operation             text,
    peer_service          text,
    peer_operation        text,
    failed                double precision,
    failed_request_failed double precision,
    samples               bigint,
    ok                    double precision,
    ok_request_failed     double precision,
    last_seen             timestamptz,
    calls                 bigint,
    extrapolated          bigint
)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY EXECUTE format($q$
        WITH ref AS (
            SELECT least(max(e.bucket), now()) AS newest FROM edge_stats e WHERE e.bucket >= $1
        ), weighted AS (
            SELECT e.*,
                   CASE WHEN $2 IS NULL OR $2 <= interval '0' THEN 1.0::double precision
                        -- Past 1000 half-lives the weight is nil; power()
                        -- would raise an underflow error instead of 0.
                        ELSE power(0.5::double precision,
                                   least(greatest(extract(epoch FROM ref.newest - e.bucket)::double precision, 0)
                                         / extract(epoch FROM $2)::double precision, 1000))
                   END AS w
            FROM edge_stats e, ref
            WHERE e.bucket >= $1 %s
        )
        SELECT service, operation, peer_service, peer_operation,
               sum(coalesce(failed_alone_est, failed_alone) * w),
               sum(coalesce(failed_alone_request_failed_est, failed_alone_request_failed) * w),
               sum(failed_alone)::bigint,
               sum((coalesce(calls_est, calls) - coalesce(failed_calls_est, failed_calls)) * w),
               sum(coalesce(call_ok_request_failed_est, call_ok_request_failed) * w),
               max(bucket),
               sum(calls)::bigint,
               sum(extrapolated)::bigint
        FROM weighted
        GROUP BY service, operation, peer_service, peer_operation
    $q$, CASE WHEN caller IS NULL THEN '' ELSE 'AND e.service = $3' END)
    USING since, half_life, caller;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION edge_model(timestamptz, interval, text) IS 'The edge model''s evidence merged across replicas since a time, estimated for all traffic (each request weighing its trace''s adjusted count) and each bucket weighted by 2^(-age/half_life), age measured from the newest bucket but never from later than now(); samples is the count seen, unweighted; calls and extrapolated, unweighted, say whether the evidence was extrapolated. caller, if not NULL, restricts it to one calling service. The mode is judged in Go (store.EdgeModel).';

-- +goose Down

DROP FUNCTION edge_model(timestamptz, interval, text);
-- +goose StatementBegin
CREATE FUNCTION edge_model(since timestamptz, half_life interval, caller text DEFAULT NULL)
RETURNS TABLE (
    service               text,
    operation             text,
    peer_service          text,
    peer_operation        text,
    failed                double precision,
    failed_request_failed double precision,
    samples               bigint,
    ok                    double precision,
    ok_request_failed     double precision,
    last_seen             timestamptz
)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY EXECUTE format($q$
        WITH ref AS (
            SELECT least(max(e.bucket), now()) AS newest FROM edge_stats e WHERE e.bucket >= $1
        ), weighted AS (
            SELECT e.*,
                   CASE WHEN $2 IS NULL OR $2 <= interval '0' THEN 1.0::double precision
                        ELSE power(0.5::double precision,
                                   least(greatest(extract(epoch FROM ref.newest - e.bucket)::double precision, 0)
                                         / extract(epoch FROM $2)::double precision, 1000))
                   END AS w
            FROM edge_stats e, ref
            WHERE e.bucket >= $1 %s
        )
        SELECT service, operation, peer_service, peer_operation,
               sum(failed_alone * w),
               sum(failed_alone_request_failed * w),
               sum(failed_alone)::bigint,
               sum((calls - failed_calls) * w),
               sum(call_ok_request_failed * w),
               max(bucket)
        FROM weighted
        GROUP BY service, operation, peer_service, peer_operation
    $q$, CASE WHEN caller IS NULL THEN '' ELSE 'AND e.service = $3' END)
    USING since, half_life, caller;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION edge_model(timestamptz, interval, text) IS 'The edge model''s evidence merged across replicas since a time, each bucket weighted by 2^(-age/half_life), age measured from the newest bucket but never from later than now(); samples is the unweighted count. caller, if not NULL, restricts it to one calling service. The mode is judged in Go (store.EdgeModel).';
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION partitioned_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['operation_stats', 'claim_accuracy', 'edge_stats', 'depth_stats', 'root_stats', 'coincidental_audit', 'address_stats']
$$;
-- +goose StatementEnd
DROP TABLE trace_stats;
ALTER TABLE coincidental_audit DROP COLUMN weight;
ALTER TABLE root_stats DROP COLUMN extrapolated, DROP COLUMN storm_radius_sum_est, DROP COLUMN requests_est;
ALTER TABLE depth_stats DROP COLUMN extrapolated, DROP COLUMN served_est;
ALTER TABLE edge_stats
    DROP COLUMN extrapolated, DROP COLUMN failed_alone_request_failed_est, DROP COLUMN failed_alone_est,
    DROP COLUMN exhausted_est, DROP COLUMN no_policy_est, DROP COLUMN suppressed_budget_est,
    DROP COLUMN suppressed_unclaimed_est, DROP COLUMN retried_est, DROP COLUMN call_ok_request_failed_est,
    DROP COLUMN call_failed_request_failed_est, DROP COLUMN retries_est, DROP COLUMN attempts_est,
    DROP COLUMN failed_calls_est, DROP COLUMN calls_est;
ALTER TABLE claim_accuracy DROP COLUMN extrapolated, DROP COLUMN requests_est;
ALTER TABLE operation_stats
    DROP COLUMN extrapolated, DROP COLUMN expected_unclaimed_est, DROP COLUMN expected_claimed_est,
    DROP COLUMN claims_correct_est, DROP COLUMN verdict_coincidental_est, DROP COLUMN verdict_propagated_est,
    DROP COLUMN verdict_own_est, DROP COLUMN failed_est, DROP COLUMN retries_received_est, DROP COLUMN served_est;
