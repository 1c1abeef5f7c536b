#!/usr/bin/env bash
# Makes the database run.sh measures: the key table from the PostgreSQL
# migrations (as shipped: 001 to the last), the trivial handler's table t,
# and copies of the key table with other indexes (below: kb, migration
# 007's; k3, the primary key alone; k4, the primary key alone, pages filled
# to 70 % so that an update finds room for a heap-only tuple; kn, kh, kx,
# ks: one index changed each). Run from anywhere; PostgreSQL on
# 127.0.0.1, port $PGPORT (default 5432), user postgres.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
P="psql -h 127.0.0.1 -U postgres -q -v ON_ERROR_STOP=1"
$P -c "DROP DATABASE IF EXISTS lever" -c "CREATE DATABASE lever"
for f in "$here"/../../../idemshared/keytable/pgsql/migrations/0*.sql; do $P -d lever -f "$f"; done
$P -d lever <<'SQL'
CREATE TABLE t (id bigserial PRIMARY KEY, user_id text NOT NULL, amount bigint NOT NULL, note text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE k3 (LIKE idempotency_keys INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE k3 ADD PRIMARY KEY (scope, idempotency_key);
CREATE TABLE k4 (LIKE k3 INCLUDING ALL) WITH (fillfactor = 70);
-- The peer idemlease's table (repenguin22/idemlease, pgstore.Schema): the
-- primary key alone.
CREATE TABLE idemlease_records (
    key bytea PRIMARY KEY, state smallint NOT NULL, token text NOT NULL,
    fingerprint bytea NOT NULL DEFAULT ''::bytea, payload bytea,
    lease_expires_at timestamptz NOT NULL, record_expires_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now());
-- kb: migration 007's indexes.
CREATE TABLE kb (LIKE k3 INCLUDING ALL);
CREATE INDEX ON kb (expires_at);
CREATE INDEX ON kb (claimed_at) WHERE recovery_point IS NOT NULL AND status <> 'COMPLETED';
CREATE INDEX ON kb (idempotency_key);
CREATE INDEX ON kb (status, created_at);
CREATE INDEX ON kb (response_code, created_at) WHERE status = 'COMPLETED' AND response_code >= 400;
-- kn: 007's without the key's index.
CREATE TABLE kn (LIKE k3 INCLUDING ALL);
CREATE INDEX ON kn (expires_at);
CREATE INDEX ON kn (claimed_at) WHERE recovery_point IS NOT NULL AND status <> 'COMPLETED';
CREATE INDEX ON kn (status, created_at);
CREATE INDEX ON kn (response_code, created_at) WHERE status = 'COMPLETED' AND response_code >= 400;
-- kh: 007's with a hash index on the key.
CREATE TABLE kh (LIKE kn INCLUDING ALL);
CREATE INDEX ON kh USING hash (idempotency_key);
-- kx: kn with a BRIN index on expires_at instead of the sweep's btree.
CREATE TABLE kx (LIKE k3 INCLUDING ALL);
CREATE INDEX ON kx USING brin (expires_at);
CREATE INDEX ON kx (claimed_at) WHERE recovery_point IS NOT NULL AND status <> 'COMPLETED';
CREATE INDEX ON kx (status, created_at);
CREATE INDEX ON kx (response_code, created_at) WHERE status = 'COMPLETED' AND response_code >= 400;
-- ks: kn with the status and age index split: created_at on every row, and
-- (status, created_at) of the rows not COMPLETED.
CREATE TABLE ks (LIKE k3 INCLUDING ALL);
CREATE INDEX ON ks (expires_at);
CREATE INDEX ON ks (claimed_at) WHERE recovery_point IS NOT NULL AND status <> 'COMPLETED';
CREATE INDEX ON ks (created_at);
CREATE INDEX ON ks (status, created_at) WHERE status <> 'COMPLETED';
CREATE INDEX ON ks (response_code, created_at) WHERE status = 'COMPLETED' AND response_code >= 400;
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
claim kb 1 1 >"$here/deferred_before.sql"
claim k3 1 1 >"$here/deferred_k3.sql"
claim kn 1 1 >"$here/deferred_nokey.sql"
claim kx 1 1 >"$here/deferred_brin.sql"
claim ks 1 1 >"$here/deferred_split.sql"
claim idempotency_keys 1 0 >"$here/nolockwait.sql"
claim idempotency_keys 0 1 >"$here/plain.sql"

# The two ways of holding a key that claim before the handler, as idem
# sends them: the claim (PROCESSING), the handler's INSERT, and the fenced
# completion pipelined with the COMMIT. claim-first: all in one transaction,
# the claim pipelined with BEGIN and its lock-wait bound set and restored.
# leased: the claim commits alone (BEGIN and COMMIT pipelined around
# it, as pgstore sends a write of its own), then the handler's INSERT and the
# completion in a transaction of their own. The token is derived from the
# key, so that the completion's fence matches the claim's.
# held MODE TABLE SYNC LOCKWAIT FENCE: MODE claim-first or leased, the key
# in TABLE; SYNC off makes the leased claim's commit asynchronous
# (synchronous_commit); LOCKWAIT 0 leaves the claim's lock-wait bound out;
# FENCE 0 sends the completion as a plain UPDATE, not inside the
# 1/count(*) CTE that aborts the transaction when the fence fails.
held() {
	local lockwait="SET LOCAL lock_timeout = '5000ms';" restore='SET LOCAL lock_timeout TO DEFAULT;'
	if [ "$4" = 0 ]; then lockwait='' restore=''; fi
	local key="'key-' || :client_id || '-' || :k" tok="md5(:client_id || '-' || :k)::uuid"
	local ins="INSERT INTO $2 (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version, status, attempts, fencing_token, claimed_at, lease_expires_at, created_at, expires_at) VALUES ('user-' || :u, $key, 'POST', '/v1/trivial', '\\x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f'::bytea, 1, 'PROCESSING', 1, $tok, now(), now() + 30000000 * interval '1 microsecond', now(), now() + 86400000000 * interval '1 microsecond') ON CONFLICT (scope, idempotency_key) DO NOTHING;"
	local update="UPDATE $2 SET status = 'COMPLETED', lease_expires_at = now(), response_code = 201, response_headers = '{\"Content-Type\":[\"application/json\"]}'::text::jsonb, response_body = '\\x7b226964223a3132333435362c22616d6f756e74223a313235302c226e6f7465223a22636f66666565227d'::bytea, resource_type = nullif('', ''), resource_id = nullif('', '') WHERE scope = 'user-' || :u AND idempotency_key = $key AND fencing_token = $tok AND status = 'PROCESSING'"
	local done="WITH completed AS ($update RETURNING 1) SELECT 1 / count(*) FROM completed;"
	if [ "$5" = 0 ]; then done="$update;"; fi
	printf '%s\n' '\set u random(1, 10000)' '\set k random(1, 9000000000000000000)' '\startpipeline'
	if [ "$1" = claim-first ]; then
		printf '%s\n' 'BEGIN;' ${lockwait:+"$lockwait"} "$ins" ${restore:+"$restore"} '\endpipeline' "$handler"
	else
		echo 'BEGIN ISOLATION LEVEL READ COMMITTED;'
		if [ "$3" = off ]; then echo "SET LOCAL synchronous_commit = off;"; fi
		printf '%s\n' ${lockwait:+"$lockwait"} "$ins" 'COMMIT;' '\endpipeline' '\startpipeline' 'BEGIN;' "$handler" '\endpipeline'
	fi
	printf '%s\n' '\startpipeline' "$done" 'COMMIT;' '\endpipeline'
}
# shape ROUNDTRIPS: the handler's INSERT with the round trips and commits
# of claim-first (3, one commit) or leased (3, two commits), and no key row:
# SELECT 1 where idem's statements go; in the leased claim's transaction
# txid_current(), so that its COMMIT is a durable commit too.
shape() {
	printf '%s\n' '\set u random(1, 10000)'
	if [ "$1" = claim-first ]; then
		printf '%s\n' '\startpipeline' 'BEGIN;' 'SELECT 1;' '\endpipeline' "$handler"
	else
		printf '%s\n' '\startpipeline' 'BEGIN;' 'SELECT txid_current();' 'COMMIT;' '\endpipeline' '\startpipeline' 'BEGIN;' "$handler" '\endpipeline'
	fi
	printf '%s\n' '\startpipeline' 'SELECT 1;' 'COMMIT;' '\endpipeline'
}
held claim-first idempotency_keys on 1 1 >"$here/claimfirst.sql"
held claim-first kb on 1 1 >"$here/claimfirst_before.sql"
held claim-first k3 on 1 1 >"$here/claimfirst_k3.sql"
held claim-first k4 on 1 1 >"$here/claimfirst_k4.sql"
held claim-first kn on 1 1 >"$here/claimfirst_nokey.sql"
held claim-first idempotency_keys on 0 1 >"$here/claimfirst_nolockwait.sql"
held claim-first idempotency_keys on 1 0 >"$here/claimfirst_nofence.sql"
shape claim-first >"$here/claimfirst_shape.sql"
held leased idempotency_keys on 1 1 >"$here/leased.sql"
held leased kb on 1 1 >"$here/leased_before.sql"
held leased k3 on 1 1 >"$here/leased_k3.sql"
held leased k4 on 1 1 >"$here/leased_k4.sql"
held leased kn on 1 1 >"$here/leased_nokey.sql"
held leased kh on 1 1 >"$here/leased_hash.sql"
held leased ks on 1 1 >"$here/leased_split.sql"
held leased kx on 1 1 >"$here/leased_brin.sql"
held leased idempotency_keys off 1 1 >"$here/leased_async.sql"
held leased idempotency_keys on 0 1 >"$here/leased_nolockwait.sql"
held leased idempotency_keys on 1 0 >"$here/leased_nofence.sql"
shape leased >"$here/leased_shape.sql"
# leased_implicit: the leased claim in an implicit transaction (one
# pipeline, no BEGIN and COMMIT), its bound set with set_config: SET LOCAL
# only warns outside a transaction block.
sed -e '/^BEGIN ISOLATION LEVEL READ COMMITTED;$/d' \
	-e "s/^SET LOCAL lock_timeout = '5000ms';\$/SELECT set_config('lock_timeout', '5000ms', true);/" "$here/leased.sql" |
	awk '/^COMMIT;$/ && !done { done = 1; next } { print }' >"$here/leased_implicit.sql"

# locked: claim-first by the key's lock as pgstore sends it since issue 35
# (2026-12-06, evening): BEGIN, the lock with its bound, the check that the
# key has no record, then the handler's INSERT, in one round trip; the
# record inserted born COMPLETED with the COMMIT in the next (the deferred
# claim's).
scope="'user-' || :u" key="'key-' || :client_id || '-' || :k"
claim idempotency_keys 1 1 | awk -v lw="SET LOCAL lock_timeout = '5000ms';" \
	-v lock="SELECT pg_advisory_xact_lock(hashtextextended(length($scope) || ':' || $scope || $key, hashtextextended('idempotency_keys', 0)));" \
	-v check="SELECT 1 / (count(*) = 0)::int FROM idempotency_keys WHERE scope = $scope AND idempotency_key = $key;" \
	'/^BEGIN;$/ && !done { print; print lw; print lock; print "SET LOCAL lock_timeout TO DEFAULT;"; print check; done = 1; next } { print }' >"$here/locked.sql"
# idemlease: the peer's fresh request (its pgstore and httpidem): the
# reserve upsert, the handler's INSERT and the compare-and-set completion,
# each auto-committed, each a round trip.
lkey="('u' || :u || '/key-' || :client_id || '-' || :k)::bytea" ltok="md5(:client_id || '-' || :k)"
cat >"$here/idemlease.sql" <<SQL
\set u random(1, 10000)
\set k random(1, 9000000000000000000)
INSERT INTO idemlease_records (key, state, token, fingerprint, lease_expires_at, record_expires_at, payload, created_at) VALUES ($lkey, 1, $ltok, '\\x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f'::bytea, now() + interval '1 millisecond' * 30000::double precision, NULL, NULL, now()) ON CONFLICT (key) DO UPDATE SET state = 1, token = EXCLUDED.token, fingerprint = EXCLUDED.fingerprint, lease_expires_at = EXCLUDED.lease_expires_at, record_expires_at = NULL, payload = NULL, created_at = now() WHERE ((idemlease_records.state = 1 AND idemlease_records.lease_expires_at <= now()) OR (idemlease_records.state = 2 AND idemlease_records.record_expires_at <= now())) RETURNING (extract(epoch from (lease_expires_at - now())) * 1000)::bigint;
$handler
UPDATE idemlease_records SET state = 2, payload = '\\x7b226964223a3132333435362c22616d6f756e74223a313235302c226e6f7465223a22636f66666565227d'::bytea, record_expires_at = now() + interval '1 millisecond' * 86400000::double precision WHERE key = $lkey AND token = $ltok AND state = 1 AND lease_expires_at > now();
SQL
# locked_read: the same, as sent before (b101375): the lock and a read of
# the record in a round trip of their own, before the handler's.
awk -v read="SELECT * FROM idempotency_keys WHERE scope = $scope AND idempotency_key = $key;" \
	'/^SELECT 1 \/ \(count/ { print read; print "\\endpipeline"; print "\\startpipeline"; next } { print }' "$here/locked.sql" >"$here/locked_read.sql"
