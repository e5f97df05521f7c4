-- The statistics of a mid-sized system over the last six hours, for tests
-- that look at query plans: 100 services of 4 operations each, every
-- operation calling 2 peers, 10 of the services serving root operations,
-- one-minute buckets, and 200,000 audit entries. Services are named
-- svc-001 … svc-100, operations GET /op/1 … GET /op/4. The figures are
-- made up but deterministic; the plans depend on the sizes, not on them.

SELECT ensure_partitions(d)
FROM (VALUES (((now() AT TIME ZONE 'UTC') - interval '7 hours')::date), ((now() AT TIME ZONE 'UTC')::date)) AS v (d);

CREATE TEMP TABLE b AS
    SELECT date_trunc('minute', now()) - g * interval '1 minute' AS bucket
    FROM generate_series(0, 359) AS g;
CREATE TEMP TABLE ops AS
    SELECT 'svc-' || lpad(s::text, 3, '0') AS service, s, 'GET /op/' || o AS operation, o
    FROM generate_series(1, 100) AS s, generate_series(1, 4) AS o;

INSERT INTO operation_stats (bucket, service, operation, served, retries_received, failed,
                             verdict_own, verdict_propagated, verdict_coincidental, claims_correct,
                             expected_claimed, expected_unclaimed)
SELECT b.bucket, ops.service, ops.operation, 600 + ops.s, ops.s % 7, 6, 2, 3, 1, 5, 3, 3
FROM b, ops;

INSERT INTO claim_accuracy (bucket, service, operation, claim_sent, verdict, requests)
SELECT b.bucket, ops.service, ops.operation, c.claim_sent, c.verdict, c.requests
FROM b, ops, (VALUES ('claimed', 'own', 2), ('unclaimed', 'propagated', 3)) AS c (claim_sent, verdict, requests);

INSERT INTO edge_stats (bucket, service, operation, peer_service, peer_operation, calls, failed_calls,
                        attempts, retries, call_failed_request_failed, call_ok_request_failed,
                        failed_alone, failed_alone_request_failed, retried, suppressed_unclaimed)
SELECT b.bucket, ops.service, ops.operation,
       'svc-' || lpad(((ops.s + p.k) % 100 + 1)::text, 3, '0'), 'GET /op/' || ops.o,
       600, 6, 609, 9, 5, 0, 5, 4, 9, 1
FROM b, ops, (VALUES (1), (7)) AS p (k);

INSERT INTO address_stats (bucket, service, peer_service, address, calls)
SELECT DISTINCT b.bucket, ops.service, 'svc-' || lpad(((ops.s + p.k) % 100 + 1)::text, 3, '0'),
       '10.0.' || ((ops.s + p.k) % 100 + 1) || '.1:8080', 2400
FROM b, ops, (VALUES (1), (7)) AS p (k);

INSERT INTO root_stats (bucket, root_service, root_operation, requests, storm_radius_max, storm_radius_sum)
SELECT b.bucket, 'svc-' || lpad(r::text, 3, '0'), 'GET /op/1', 600, 1, 6
FROM b, generate_series(1, 10) AS r;

INSERT INTO depth_stats (bucket, root_service, root_operation, depth, service, served)
SELECT b.bucket, 'svc-' || lpad(r::text, 3, '0'), 'GET /op/1', d.depth,
       'svc-' || lpad(((r + d.depth * 10 + k) % 100 + 1)::text, 3, '0'), 600
FROM b, generate_series(1, 10) AS r, generate_series(0, 4) AS d (depth), generate_series(0, 1) AS k
WHERE d.depth > 0 OR k = 0;

INSERT INTO coincidental_audit (time, trace_id, span_id, service, operation, peer_service, peer_operation,
                                claim_sent, claim_expected, reason)
SELECT now() - (g % 21600) * interval '1 second',
       md5(g::text), left(md5('span' || g), 16),
       'svc-' || lpad((g % 100 + 1)::text, 3, '0'), 'GET /op/' || (g % 4 + 1),
       'svc-' || lpad(((g / 100) % 100 + 1)::text, 3, '0'), 'GET /op/1',
       'claimed', 'claimed', 'coincidental'
FROM generate_series(1, 200000) AS g;

ANALYZE;
