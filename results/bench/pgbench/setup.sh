#!/usr/bin/env bash
# Makes the database run.sh measures: the key table from the PostgreSQL
# migrations, the trivial handler's table t, and two copies of the key
# table with fewer indexes (k2: without the operator's key and
# status/created indexes; k3: the primary key alone). Run from the
# repository root; PostgreSQL on 127.0.0.1:5432, user postgres.
set -euo pipefail
P="psql -h 127.0.0.1 -U postgres -q -v ON_ERROR_STOP=1"
$P -c "DROP DATABASE IF EXISTS lever" -c "CREATE DATABASE lever"
for f in idemshared/keytable/pgsql/migrations/00*.sql; do $P -d lever -f "$f"; done
$P -d lever <<'SQL'
CREATE TABLE t (id bigserial PRIMARY KEY, user_id text NOT NULL, amount bigint NOT NULL, note text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE k2 (LIKE idempotency_keys INCLUDING ALL);
DROP INDEX k2_idempotency_key_idx; DROP INDEX k2_status_created_at_idx;
CREATE TABLE k3 (LIKE idempotency_keys INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE k3 ADD PRIMARY KEY (scope, idempotency_key);
SQL
