#!/usr/bin/env bash
# Run a command with DATABASE_URL pointing at the coordinator of a Citus
# cluster: a coordinator and CITUS_WORKERS workers (default 2), each a
# throwaway PostgreSQL cluster of scripts/test-postgres.sh (its conventions:
# loopback ports from 55432 upward, the server as the `postgres` user when
# we are root, fsync off, everything stopped and removed when the command
# ends), with Citus preloaded, the extension created in each, and the
# workers added to the coordinator. Citus must be installed in the local
# PostgreSQL (make test-citus runs ../shared/citus/build.sh first).
#
# Usage: scripts/test-citus.sh <command...>
#   e.g. scripts/test-citus.sh go test -race ./pgstore/...
#
# The command gets, besides DATABASE_URL:
#   CITUS_WORKER_URLS  the workers' URLs, separated by spaces
#   PG_CITUS=1         the tests distribute the tables they migrate
#                      (pgtest.Citus), as an operator would with
#                      `paymentsd migrate --citus`
#
# If DATABASE_URL is already set it is used as is, and must be a Citus
# coordinator with its workers added (CITUS_WORKER_URLS as the caller sets it).
#
# Server settings beyond test-postgres.sh's: wal_level=logical (a shard move,
# citus_move_shard_placement, streams the shard by logical replication),
# prepared transactions (a transaction over shards of several workers
# commits in two phases), the nodes' connections to each other without TLS
# on loopback, and CITUS_SHARD_COUNT shards per distributed table (default
# 4: the tests create hundreds of schemas; Citus's default is 32). With
# PG_DURABLE=1 (make bench-citus) every node also preloads
# pg_stat_statements, as test-postgres.sh's durable cluster does.
set -euo pipefail

prog=test-citus
log() { printf '%s: %s\n' "$prog" "$*" >&2; }
here=$(cd "$(dirname "$0")" && pwd)

if [ "$#" -eq 0 ]; then
	echo "usage: $0 <command...>" >&2
	exit 2
fi

# Each stage runs inside the cluster the previous one started (through
# test-postgres.sh, which runs this script again): _CITUS_URLS collects
# their URLs, _CITUS_LEFT counts the clusters still to start.
if [ -z "${_CITUS_LEFT:-}" ]; then
	if [ -n "${DATABASE_URL:-}" ]; then
		log "using DATABASE_URL from the environment as the coordinator"
		export PG_CITUS=1
		exec "$@"
	fi
	export _CITUS_LEFT=$((1 + ${CITUS_WORKERS:-2})) _CITUS_URLS=""
	# A durable cluster (PG_DURABLE=1, the benchmark's) keeps the
	# pg_stat_statements test-postgres.sh preloads for it: Citus first.
	preload_more=""
	if [ "${PG_DURABLE:-}" = 1 ]; then
		preload_more=,pg_stat_statements
	fi
	export PG_OPTS="${PG_OPTS:-} -c shared_preload_libraries=citus$preload_more -c wal_level=logical -c max_prepared_transactions=300 -c max_wal_senders=20 -c max_replication_slots=20 -c citus.node_conninfo=sslmode=disable -c citus.shard_count=${CITUS_SHARD_COUNT:-4}"
else
	_CITUS_URLS="${_CITUS_URLS:+$_CITUS_URLS }$DATABASE_URL"
	unset DATABASE_URL
fi
if [ "$_CITUS_LEFT" -gt 0 ]; then
	_CITUS_LEFT=$((_CITUS_LEFT - 1))
	export _CITUS_URLS
	exec "$here/test-postgres.sh" "$0" "$@"
fi
unset _CITUS_LEFT PG_OPTS

# shellcheck disable=SC2086 # the URLs hold no spaces
set -- $_CITUS_URLS -- "$@"
coordinator=$1
shift
workers=""
while [ "$1" != -- ]; do
	workers="${workers:+$workers }$1"
	shift
done
shift
unset _CITUS_URLS

sql() { # sql URL STATEMENT: one statement, its output on stdout, quiet
	psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$1" -c "$2"
}
port_of() { sed -E 's#^.*@[^:/]*:([0-9]+)/.*$#\1#' <<<"$1"; }

for url in $coordinator $workers; do
	sql "$url" "CREATE EXTENSION citus" >/dev/null
done
sql "$coordinator" "SELECT citus_set_coordinator_host('127.0.0.1', $(port_of "$coordinator"))" >/dev/null
for url in $workers; do
	sql "$coordinator" "SELECT citus_add_node('127.0.0.1', $(port_of "$url"))" >/dev/null
done
log "Citus $(sql "$coordinator" "SELECT extversion FROM pg_extension WHERE extname = 'citus'"): coordinator on port $(port_of "$coordinator"), workers on $(for url in $workers; do printf '%s ' "$(port_of "$url")"; done)"

export DATABASE_URL=$coordinator CITUS_WORKER_URLS=$workers PG_CITUS=1
"$@"
