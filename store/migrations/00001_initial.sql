-- SPDX-License-Identifier: Apache-2.0

-- The error-ownership statistics store. See store/doc.go for how the tables
-- are written and merged.
--
-- Every statistics table is keyed by a time bucket (one minute by default)
-- and range-partitioned by it into daily partitions named <table>_pYYYYMMDD
-- (UTC days), which ensure_partitions creates ahead of need and
-- drop_partitions_before drops for retention. Rows hold sums: several
-- collector replicas add into the same row with
-- INSERT ... ON CONFLICT DO UPDATE SET x = t.x + excluded.x,
-- so a reader sees one merged view and sums over buckets for a window.

-- +goose Up

CREATE TABLE operation_stats (
    bucket               timestamptz NOT NULL,
    service              text        NOT NULL,
    operation            text        NOT NULL,
    served               bigint      NOT NULL DEFAULT 0,
    retries_received     bigint      NOT NULL DEFAULT 0,
    failed               bigint      NOT NULL DEFAULT 0,
    verdict_own          bigint      NOT NULL DEFAULT 0,
    verdict_propagated   bigint      NOT NULL DEFAULT 0,
    verdict_coincidental bigint      NOT NULL DEFAULT 0,
    claims_correct       bigint      NOT NULL DEFAULT 0,
    expected_claimed     bigint      NOT NULL DEFAULT 0,
    expected_unclaimed   bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, service, operation)
) PARTITION BY RANGE (bucket);
COMMENT ON TABLE operation_stats IS 'Per bucket and inbound operation: requests served, retries among them, failures and their verdicts, claim accuracy. Sums over collector replicas.';
COMMENT ON COLUMN operation_stats.retries_received IS 'Served requests whose calling attempt was a retry.';
COMMENT ON COLUMN operation_stats.claims_correct IS 'Failed requests whose sent claim (error_ownership.claim.sent) is the one the rules expect.';

CREATE TABLE claim_accuracy (
    bucket     timestamptz NOT NULL,
    service    text        NOT NULL,
    operation  text        NOT NULL,
    claim_sent text        NOT NULL CHECK (claim_sent IN ('claimed', 'unclaimed', 'missing')),
    verdict    text        NOT NULL CHECK (verdict IN ('own', 'propagated', 'coincidental')),
    requests   bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, service, operation, claim_sent, verdict)
) PARTITION BY RANGE (bucket);
COMMENT ON TABLE claim_accuracy IS 'Claim-accuracy confusion matrix: failed requests by the claim the service sent and the verdict of the analysis. Only non-zero cells are stored.';

CREATE TABLE edge_stats (
    bucket                     timestamptz NOT NULL,
    service                    text        NOT NULL,
    operation                  text        NOT NULL,
    peer_service               text        NOT NULL,
    peer_operation             text        NOT NULL,
    calls                      bigint      NOT NULL DEFAULT 0,
    failed_calls               bigint      NOT NULL DEFAULT 0,
    attempts                   bigint      NOT NULL DEFAULT 0,
    retries                    bigint      NOT NULL DEFAULT 0,
    call_failed_request_failed bigint      NOT NULL DEFAULT 0,
    call_ok_request_failed     bigint      NOT NULL DEFAULT 0,
    retried                    bigint      NOT NULL DEFAULT 0,
    suppressed_unclaimed       bigint      NOT NULL DEFAULT 0,
    suppressed_budget          bigint      NOT NULL DEFAULT 0,
    no_policy                  bigint      NOT NULL DEFAULT 0,
    exhausted                  bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, service, operation, peer_service, peer_operation)
) PARTITION BY RANGE (bucket);
COMMENT ON TABLE edge_stats IS 'Per bucket and edge (service, operation) -> (peer_service, peer_operation): logical calls, attempts, the edge model''s observations and the callers'' retry decisions (error_ownership.retry.decision).';
COMMENT ON COLUMN edge_stats.call_failed_request_failed IS 'Failed logical calls whose inbound request failed too: with failed_calls, the edge model''s evidence for fail-close.';
COMMENT ON COLUMN edge_stats.call_ok_request_failed IS 'Successful logical calls whose inbound request failed anyway.';

CREATE TABLE depth_stats (
    bucket         timestamptz NOT NULL,
    root_service   text        NOT NULL,
    root_operation text        NOT NULL,
    depth          smallint    NOT NULL,
    service        text        NOT NULL,
    served         bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, root_service, root_operation, depth, service)
) PARTITION BY RANGE (bucket);
COMMENT ON TABLE depth_stats IS 'Requests a service served at a depth below a root (user-facing) operation; divide by root_stats.requests for requests per root request.';

CREATE TABLE root_stats (
    bucket           timestamptz NOT NULL,
    root_service     text        NOT NULL,
    root_operation   text        NOT NULL,
    requests         bigint      NOT NULL DEFAULT 0,
    storm_radius_max integer     NOT NULL DEFAULT 0,
    storm_radius_sum bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, root_service, root_operation)
) PARTITION BY RANGE (bucket);
COMMENT ON TABLE root_stats IS 'Root requests and their retry-storm radius (the longest chain of consecutive hops that retried one failure). storm_radius_max merges with GREATEST, the rest by sum.';

CREATE TABLE coincidental_audit (
    time           timestamptz NOT NULL,
    trace_id       text        NOT NULL,
    span_id        text        NOT NULL,
    service        text        NOT NULL,
    operation      text        NOT NULL,
    peer_service   text        NOT NULL,
    peer_operation text        NOT NULL,
    claim_sent     text        NOT NULL,
    claim_expected text        NOT NULL,
    reason         text        NOT NULL
) PARTITION BY RANGE (time);
CREATE INDEX coincidental_audit_time ON coincidental_audit (time DESC);
CREATE INDEX coincidental_audit_service_time ON coincidental_audit (service, time DESC);
COMMENT ON TABLE coincidental_audit IS 'Coincidental errors: the service failed for its own reason while a dependency it tolerates (fail-open edge; peer_*) failed too. Rate-limited per service.';

-- flushes makes writes exactly-once: a flush's transaction first inserts
-- (instance, seq) here and writes nothing if the row exists. It also tells
-- a writer whether its bucket has rows yet (see store.write).
CREATE TABLE flushes (
    instance     text        NOT NULL,
    seq          bigint      NOT NULL,
    bucket       timestamptz NOT NULL,
    rows         integer     NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance, seq)
);
CREATE INDEX flushes_bucket ON flushes (bucket);
COMMENT ON TABLE flushes IS 'One row per flush written, by collector instance and sequence number: a retried flush finds its row and is skipped.';

-- partitioned_tables lists the tables partitioned by day.
-- +goose StatementBegin
CREATE FUNCTION partitioned_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['operation_stats', 'claim_accuracy', 'edge_stats', 'depth_stats', 'root_stats', 'coincidental_audit']
$$;
-- +goose StatementEnd

-- ensure_partitions creates the partitions for one UTC day of every
-- partitioned table, unless they exist. An advisory lock serialises
-- replicas that create the same day at once.
-- +goose StatementBegin
CREATE FUNCTION ensure_partitions(day date) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    parent text;
    child  text;
    lo     timestamptz := day::timestamp AT TIME ZONE 'UTC';
    hi     timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
BEGIN
    FOREACH parent IN ARRAY partitioned_tables() LOOP
        child := parent || '_p' || to_char(day, 'YYYYMMDD');
        IF to_regclass(child) IS NULL THEN
            PERFORM pg_advisory_xact_lock(hashtext('errorownership.partitions'));
            -- Statistics rows are updated in place as flushes merge: free
            -- space in each page lets an update stay on its page and skip
            -- the index (a HOT update).
            EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = %s)',
                           child, parent, lo, hi, CASE WHEN parent = 'coincidental_audit' THEN 100 ELSE 50 END);
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- drop_partitions_before drops every daily partition that ends at or
-- before cutoff and returns the names of those it dropped.
-- +goose StatementBegin
CREATE FUNCTION drop_partitions_before(cutoff timestamptz) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    parent text;
    child  text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('errorownership.partitions'));
    FOREACH parent IN ARRAY partitioned_tables() LOOP
        FOR child IN
            SELECT c.relname
            FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = parent::regclass
              AND c.relname ~ ('^' || parent || '_p[0-9]{8}$')
              AND (to_date(right(c.relname, 8), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC' <= cutoff
            ORDER BY c.relname
        LOOP
            EXECUTE format('DROP TABLE %I', child);
            RETURN NEXT child;
        END LOOP;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- edge_model merges the edge model's observations from edge_stats since a
-- time, across replicas, weighting each bucket by 2^(-age/half_life) where
-- age is measured from the newest bucket in the window (as the engine
-- measures from the newest span it saw), so the model follows changes in
-- behaviour. A NULL or non-positive half_life weighs every bucket fully.
-- caller, if not NULL, restricts the result to one calling service. The
-- mode (fail_close, fail_open, unknown) is judged by the engine's rule in Go
-- (store.EdgeModel), so that there is one rule in one place.
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
                    -- Past 1000 half-lives the weight is nil; power() would
                    -- raise an underflow error instead of returning 0.
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

-- schema_version shows the applied migration version.
CREATE VIEW schema_version AS
    SELECT max(version_id) AS version, max(tstamp) AS applied_at
    FROM errorownership_migrations
    WHERE is_applied;

-- +goose Down

DROP VIEW schema_version;
DROP FUNCTION edge_model(timestamptz, interval, text);
DROP FUNCTION drop_partitions_before(timestamptz);
DROP FUNCTION ensure_partitions(date);
DROP FUNCTION partitioned_tables();
DROP TABLE flushes;
DROP TABLE coincidental_audit;
DROP TABLE root_stats;
DROP TABLE depth_stats;
DROP TABLE edge_stats;
DROP TABLE claim_accuracy;
DROP TABLE operation_stats;
