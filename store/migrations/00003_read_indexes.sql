-- SPDX-License-Identifier: Apache-2.0

-- Version 3: indexes for the readers that ask about some services over a
-- time range (the Grafana dashboards, the Grafana data source, the hints of
-- one service), and an edge_model() that reads one caller's edges by index.
--
-- The statistics tables are keyed by bucket first, which suits the writers
-- and the readers of every service at once; but a reader of one service
-- would read every service's rows of its time range. Each index below leads
-- with the name such a reader filters on, then the time, so that it reads
-- its own rows only. Created on the partitioned parents, they are created
-- on every partition, present and future.

-- +goose Up

CREATE INDEX operation_stats_service_bucket ON operation_stats (service, bucket);
CREATE INDEX claim_accuracy_service_bucket ON claim_accuracy (service, bucket);
CREATE INDEX edge_stats_service_bucket ON edge_stats (service, bucket);
CREATE INDEX address_stats_service_bucket ON address_stats (service, bucket);
CREATE INDEX depth_stats_root_service_bucket ON depth_stats (root_service, bucket);
CREATE INDEX root_stats_root_service_bucket ON root_stats (root_service, bucket);
-- The audit log read by the failed dependency, and the audit entries of one
-- trace (a trace ID pasted from the trace backend).
CREATE INDEX coincidental_audit_peer_service_time ON coincidental_audit (peer_service, time DESC);
CREATE INDEX coincidental_audit_trace_id ON coincidental_audit (trace_id);

-- edge_model as in version 2, but one caller's edges are read through
-- edge_stats_service_bucket. A condition such as
-- (caller IS NULL OR e.service = caller) keeps the planner from using that
-- index whenever the plan is generic, as the plan of a prepared statement
-- becomes after a few executions; so the statement is built for the case at
-- hand and planned with its values (EXECUTE).
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
LANGUAGE sql STABLE AS $$
    WITH ref AS (
        SELECT least(max(e.bucket), now()) AS newest FROM edge_stats e WHERE e.bucket >= since
    ), weighted AS (
        SELECT e.*,
               CASE WHEN half_life IS NULL OR half_life <= interval '0' THEN 1.0::double precision
                    ELSE power(0.5::double precision,
                               least(greatest(extract(epoch FROM ref.newest - e.bucket)::double precision, 0)
                                     / extract(epoch FROM half_life)::double precision, 1000))
               END AS w
        FROM edge_stats e, ref
        WHERE e.bucket >= since AND (caller IS NULL OR e.service = caller)
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
$$;
-- +goose StatementEnd
DROP INDEX coincidental_audit_trace_id;
DROP INDEX coincidental_audit_peer_service_time;
DROP INDEX root_stats_root_service_bucket;
DROP INDEX depth_stats_root_service_bucket;
DROP INDEX address_stats_service_bucket;
DROP INDEX edge_stats_service_bucket;
DROP INDEX claim_accuracy_service_bucket;
DROP INDEX operation_stats_service_bucket;
