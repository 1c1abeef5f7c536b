#!/usr/bin/env bash
# Makes database keyrow10m: the key table from the PostgreSQL migrations up
# to $UPTO (default 007), holding N (default 10,000,000) records: 100,000
# scopes of 100 keys each, created over the last 25 hours in key order and
# kept for 24 (the first 4 % past retention, not yet swept); 0.01 %
# PROCESSING, 0.05 % FAILED, 0.02 % unfinished (FAILED with a recovery
# point), 1 % answered 409 and 1 % 422, the rest answered 201; one record in
# ten under /v1/payouts, the rest under /v1/transactions. The indexes are
# built after the rows, as they would stand on a table that grew.
# PostgreSQL on 127.0.0.1:5432, user postgres.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
N=${N:-10000000}
P="psql -h 127.0.0.1 -U postgres -q -v ON_ERROR_STOP=1"
$P -c "DROP DATABASE IF EXISTS keyrow10m" -c "CREATE DATABASE keyrow10m"
for f in "$here"/../../../idemshared/keytable/pgsql/migrations/00[1-${UPTO:-7}]*.sql; do $P -d keyrow10m -f "$f"; done
# The secondary indexes, dropped and made again after the load.
indexes=$($P -d keyrow10m -At -c "SELECT string_agg(pg_get_indexdef(indexrelid), ';' || chr(10)) || ';' FROM pg_index WHERE indrelid = 'idempotency_keys'::regclass AND NOT indisprimary")
drops=$($P -d keyrow10m -At -c "SELECT string_agg('DROP INDEX ' || indexrelid::regclass, '; ') || ';' FROM pg_index WHERE indrelid = 'idempotency_keys'::regclass AND NOT indisprimary")
$P -d keyrow10m -c "$drops" -c "ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey"
$P -d keyrow10m <<SQL
INSERT INTO idempotency_keys
       (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, fencing_token, claimed_at, lease_expires_at, recovery_point,
        response_code, response_headers, response_body, resource_type, resource_id, created_at, expires_at)
SELECT 'user-' || (i % 100000), 'key-' || md5(i::text)::uuid, 'POST',
       CASE WHEN i % 10 = 0 THEN '/v1/payouts' ELSE '/v1/transactions' END,
       sha256(i::text::bytea), 1,
       s.status, 1, md5('tok' || i)::uuid, c.t, c.t, CASE WHEN i % 5000 = 11 THEN 'charged' END,
       r.code, CASE WHEN r.code IS NOT NULL THEN '{"Content-Type":["application/json"]}'::jsonb END,
       CASE WHEN r.code IS NOT NULL THEN convert_to('{"id":"' || md5('t' || i)::uuid || '","amount":1250}', 'UTF8') END,
       NULL, NULL, c.t, c.t + interval '24 hours'
  FROM generate_series(1, $N) AS i,
       LATERAL (SELECT now() - interval '25 hours' + interval '25 hours' * i / $N) AS c (t),
       LATERAL (SELECT CASE WHEN i % 10000 = 1 THEN 'PROCESSING'
                            WHEN i % 2000 = 3 OR i % 5000 = 11 THEN 'FAILED'
                            ELSE 'COMPLETED' END) AS s (status),
       LATERAL (SELECT CASE WHEN s.status <> 'COMPLETED' THEN NULL
                            WHEN i % 100 = 7 THEN 409 WHEN i % 100 = 8 THEN 422 ELSE 201 END) AS r (code);
ALTER TABLE idempotency_keys ADD PRIMARY KEY (scope, idempotency_key);
$indexes
VACUUM (ANALYZE) idempotency_keys;
SQL
$P -d keyrow10m -c "SELECT pg_size_pretty(pg_total_relation_size('idempotency_keys'))"
