-- SPDX-License-Identifier: Apache-2.0

-- Grafana reads the store as a user that can only read: SELECT on every
-- table the collector (user errorownership) creates, now and later — its
-- migrations and its daily partitions.
CREATE ROLE grafana LOGIN PASSWORD 'grafana';
GRANT CONNECT ON DATABASE errorownership TO grafana;
GRANT USAGE ON SCHEMA public TO grafana;
ALTER DEFAULT PRIVILEGES FOR ROLE errorownership IN SCHEMA public GRANT SELECT ON TABLES TO grafana;
