#!/usr/bin/env bash
# Makes the database run.sh measures: the key table from the PostgreSQL
# migrations, the trivial handler's table t, and two copies of the key
# table with fewer indexes (k2: without the operator's key and
# status/created indexes; k3: the primary key alone). Run from
# anywhere; PostgreSQL on 127.0.0.1:5432, user postgres.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
P="psql -h 127.0.0.1 -U postgres -q -v ON_ERROR_STOP=1"
$P -c "DROP DATABASE IF EXISTS lever" -c "CREATE DATABASE lever"
for f in "$here"/../../../idemshared/keytable/pgsql/migrations/00*.sql; do $P -d lever -f "$f"; done
$P -d lever <<'SQL'
CREATE TABLE t (id bigserial PRIMARY KEY, user_id text NOT NULL, amount bigint NOT NULL, note text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE k2 (LIKE idempotency_keys INCLUDING ALL);
DROP INDEX k2_idempotency_key_idx; DROP INDEX k2_status_created_at_idx;
CREATE TABLE k3 (LIKE idempotency_keys INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE k3 ADD PRIMARY KEY (scope, idempotency_key);
SQL

# The pgbench scripts run.sh takes, one per variant, written beside this
# file: the handler's INSERT bare and in a transaction, and the deferred
# claim as idem sends it with one piece removed in each other variant.
handler="INSERT INTO t (user_id, amount, note) VALUES ('user-' || :u, 1250, 'coffee') RETURNING id;"
# claim TABLE CTE LOCKWAIT: the claim into TABLE, inside the 1/count(*)
# CTE when CTE is 1, after SET LOCAL lock_timeout when LOCKWAIT is 1.
claim() {
	printf '%s\n' '\set u random(1, 10000)' '\set k random(1, 9000000000000000000)' '\startpipeline' 'BEGIN;' "$handler" '\endpipeline' '\startpipeline'
	if [ "$3" = 1 ]; then echo "SET LOCAL lock_timeout = '5000ms';"; fi
	local ins="INSERT INTO $1 (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version, status, attempts, fencing_token, claimed_at, lease_expires_at, created_at, expires_at, response_code, response_headers, response_body, resource_type, resource_id) VALUES ('user-' || :u, 'key-' || :client_id || '-' || :k, 'POST', '/v1/trivial', '\\x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f'::bytea, 1, 'COMPLETED', 1, gen_random_uuid(), now(), now(), now(), now() + 86400000000 * interval '1 microsecond', 201, '{\"Content-Type\":[\"application/json\"]}'::text::jsonb, '\\x7b226964223a3132333435362c22616d6f756e74223a313235302c226e6f7465223a22636f66666565227d'::bytea, nullif('', ''), nullif('', '')) ON CONFLICT (scope, idempotency_key) DO NOTHING"
	if [ "$2" = 1 ]; then echo "WITH claimed AS ($ins RETURNING 1) SELECT 1 / count(*) FROM claimed;"; else echo "$ins;"; fi
	printf '%s\n' 'COMMIT;' '\endpipeline'
}
printf '%s\n' '\set u random(1, 10000)' "$handler" >"$here/bare.sql"
printf '%s\n' '\set u random(1, 10000)' '\startpipeline' 'BEGIN;' "$handler" '\endpipeline' 'COMMIT;' >"$here/txonly.sql"
claim idempotency_keys 1 1 >"$here/deferred.sql"
claim k2 1 1 >"$here/deferred_k2.sql"
claim k3 1 1 >"$here/deferred_k3.sql"
claim idempotency_keys 1 0 >"$here/nolockwait.sql"
claim idempotency_keys 0 1 >"$here/plain.sql"
