-- SPDX-License-Identifier: Apache-2.0

-- Version 2: the edge model judged on unconfounded evidence, the addresses
-- callers use to reach their peers, and decay bounded by the database's clock.

-- +goose Up

-- A failed call that was the only failed call of its request is the edge
-- model's evidence: a request that failed because another blocking call
-- failed says nothing about whether this edge is tolerated.
ALTER TABLE edge_stats
    ADD COLUMN failed_alone                bigint NOT NULL DEFAULT 0,
    ADD COLUMN failed_alone_request_failed bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN edge_stats.failed_alone IS 'Failed logical calls that were the only failed call of their inbound request: the edge model''s evidence.';
COMMENT ON COLUMN edge_stats.failed_alone_request_failed IS 'Of failed_alone, those whose inbound request failed too.';

CREATE TABLE address_stats (
    bucket       timestamptz NOT NULL,
    service      text        NOT NULL,
    peer_service text        NOT NULL,
    address      text        NOT NULL,
    calls        bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, service, peer_service, address)
) PARTITION BY RANGE (bucket);
COMMENT ON TABLE address_stats IS 'Per bucket: logical calls by the address (server.address:port) a service used to reach a peer service named otherwise. The ownership hints carry these addresses, which is all the SDK hooks know of a callee at call time.';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION partitioned_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['operation_stats', 'claim_accuracy', 'edge_stats', 'depth_stats', 'root_stats', 'coincidental_audit', 'address_stats']
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

-- edge_model merges the edge model's evidence from edge_stats since a time,
-- across replicas, weighting each bucket by 2^(-age/half_life). Age is
-- measured from the newest bucket in the window, but never from later than
-- the database's clock: a collector whose clock runs ahead writes buckets
-- in the future, and they must not age everyone else's (they weigh as if
-- written now). A NULL or non-positive half_life weighs every bucket fully.
-- samples counts the evidence unweighted: min_samples is compared with it.
-- caller, if not NULL, restricts the result to one calling service. The
-- mode is judged by the engine's rule in Go (store.EdgeModel), so that
-- there is one rule in one place.
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
                    -- Past 1000 half-lives the weight is nil; power() would
                    -- raise an underflow error instead of returning 0.
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

-- +goose Down

DROP FUNCTION edge_model(timestamptz, interval, text);
-- +goose StatementBegin
CREATE FUNCTION edge_model(since timestamptz, half_life interval, caller text DEFAULT NULL)
RETURNS TABLE (
    service                    text,
    operation                  text,
    peer_service               text,
    peer_operation             text,
    call_failed                double precision,
    call_failed_request_failed double precision,
    call_ok                    double precision,
    call_ok_request_failed     double precision,
    last_seen                  timestamptz
)
LANGUAGE sql STABLE AS $$
    WITH ref AS (
        SELECT max(e.bucket) AS newest FROM edge_stats e WHERE e.bucket >= since
    ), weighted AS (
        SELECT e.*,
               CASE WHEN half_life IS NULL OR half_life <= interval '0' THEN 1.0::double precision
                    ELSE power(0.5::double precision,
                               least(extract(epoch FROM ref.newest - e.bucket)::double precision
                                     / extract(epoch FROM half_life)::double precision, 1000))
               END AS w
        FROM edge_stats e, ref
        WHERE e.bucket >= since AND (caller IS NULL OR e.service = caller)
    )
    SELECT service, operation, peer_service, peer_operation,
           sum(failed_calls * w),
           sum(call_failed_request_failed * w),
           sum((calls - failed_calls) * w),
           sum(call_ok_request_failed * w),
           max(bucket)
    FROM weighted
    GROUP BY service, operation, peer_service, peer_operation
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION partitioned_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['operation_stats', 'claim_accuracy', 'edge_stats', 'depth_stats', 'root_stats', 'coincidental_audit']
$$;
-- +goose StatementEnd
DROP TABLE address_stats;
ALTER TABLE edge_stats DROP COLUMN failed_alone_request_failed, DROP COLUMN failed_alone;
