#!/usr/bin/env bash
# Run a command with DATABASE_URL pointing at a PostgreSQL server.
#
# Usage: scripts/test-postgres.sh <command...>
#   e.g. scripts/test-postgres.sh go test -race ./...
#
# - If DATABASE_URL is already set (non-empty), it is used as is.
# - Otherwise a throwaway cluster is created in a fresh temp dir from the
#   local PostgreSQL binaries, listening on 127.0.0.1 on a free port
#   (55432 upward), and stopped/removed again when the command finishes
#   (also on Ctrl-C / SIGTERM). The script exits with the command's status.
#
# When run as root the cluster runs as the `postgres` system user (or
# `nobody` if that does not exist), because PostgreSQL refuses to run as
# root. Only the temp dir has to be accessible to that user, so the
# repository may live under /root. The command itself runs as the caller.
#
# Environment overrides:
#   DATABASE_URL  use this server instead of starting one.
#   PG_BINDIR     directory holding initdb and pg_ctl. When set, ONLY this
#                 directory is searched (not PATH, not the well-known
#                 install locations) -- useful to pin a version and to test
#                 the "PostgreSQL not found" error, e.g.
#                   env -u DATABASE_URL PG_BINDIR=/nonexistent scripts/test-postgres.sh true
#   PG_PORT_BASE  first TCP port to try (default 55432).
#   PG_DURABLE=1  a cluster for benchmarks: fsync, full_page_writes and
#                 synchronous_commit on (the defaults of a real server; the
#                 tests turn the first two off for speed), shared_buffers
#                 1GB, max_wal_size 8GB and checkpoint_timeout 30min (so a
#                 run is not interrupted by forced checkpoints), and
#                 pg_stat_statements preloaded. make bench sets it.
#   PG_OPTS       more server settings, appended to the above (e.g.
#                 "-c shared_preload_libraries=citus": scripts/test-citus.sh).
set -euo pipefail

prog=test-postgres
log() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() { log "$*"; exit 1; }

if [ "$#" -eq 0 ]; then
	echo "usage: $0 <command...>" >&2
	exit 2
fi

# ---------------------------------------------------------------------------
# 1. An existing server.
if [ -n "${DATABASE_URL:-}" ]; then
	# Hide the password: URL form (scheme://user:PASS@host) and key=value form.
	redacted=$(printf '%s' "$DATABASE_URL" |
		sed -E -e 's#(://[^:/@]*):[^@]*@#\1:***@#' -e 's#(password=)[^ &]*#\1***#g')
	log "using DATABASE_URL from the environment: $redacted"
	export DATABASE_URL
	exec "$@"
fi

# ---------------------------------------------------------------------------
# 2. Find initdb and pg_ctl.
pg_version_of() { # $1 = bindir; prints e.g. "15.8" or nothing
	"$1/initdb" --version 2>/dev/null | sed -nE 's/^[^0-9]*([0-9]+(\.[0-9]+)*).*/\1/p' | head -n1
}

find_bindir() {
	local d candidates=() best="" best_ver="" ver
	if [ -n "${PG_BINDIR:-}" ]; then
		if [ -x "$PG_BINDIR/initdb" ] && [ -x "$PG_BINDIR/pg_ctl" ]; then
			printf '%s\n' "$PG_BINDIR"
		fi
		return 0
	fi
	if d=$(command -v initdb 2>/dev/null) && [ -x "$(dirname "$d")/pg_ctl" ]; then
		printf '%s\n' "$(dirname "$d")"
		return 0
	fi
	# Debian/Ubuntu, RHEL/PGDG, Homebrew (keg-only postgresql@NN), Postgres.app.
	for d in /usr/lib/postgresql/*/bin /usr/pgsql-*/bin \
		/opt/homebrew/opt/postgresql*/bin /usr/local/opt/postgresql*/bin \
		/Applications/Postgres.app/Contents/Versions/*/bin; do
		[ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && candidates+=("$d")
	done
	[ "${#candidates[@]}" -gt 0 ] || return 0
	for d in "${candidates[@]}"; do # pick the highest version
		ver=$(pg_version_of "$d")
		[ -n "$ver" ] || continue
		if [ -z "$best" ] ||
			[ "$(printf '%s\n%s\n' "$best_ver" "$ver" | sort -t. -k1,1n -k2,2n -k3,3n | tail -n1)" = "$ver" ]; then
			best=$d best_ver=$ver
		fi
	done
	printf '%s\n' "${best:-${candidates[0]}}"
}

bindir=$(find_bindir)
if [ -z "$bindir" ]; then
	where="PATH or /usr/lib/postgresql/*/bin"
	[ -n "${PG_BINDIR:-}" ] && where="PG_BINDIR=$PG_BINDIR"
	die "no DATABASE_URL set and no PostgreSQL server binaries (initdb, pg_ctl) found in $where; install PostgreSQL (Debian/Ubuntu: apt-get install postgresql; macOS: brew install postgresql@15) or set DATABASE_URL=postgres://user:pass@host:port/db"
fi

# ---------------------------------------------------------------------------
# 3. Who runs the server.
pg_user=""
if [ "$(id -u)" -eq 0 ]; then
	if id -u postgres >/dev/null 2>&1; then pg_user=postgres; else pg_user=nobody; fi
fi

# as_pg_user CMD ARGS...: run as the unprivileged server user when we are
# root, else as ourselves. Runs from inside the temp dir so an unreadable
# current directory (e.g. a checkout under /root) does not matter.
as_pg_user() {
	if [ -z "$pg_user" ]; then
		(cd "$tmp" && "$@")
	elif command -v runuser >/dev/null 2>&1; then
		(cd "$tmp" && runuser -u "$pg_user" -- "$@")
	else
		(cd "$tmp" && su -s /bin/sh "$pg_user" -c "$(printf '%q ' "$@")")
	fi
}

# ---------------------------------------------------------------------------
# 4. Temp dir + cleanup.
tmp=""
data=""
cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	if [ -n "$data" ] && [ -f "$data/postmaster.pid" ]; then
		as_pg_user "$bindir/pg_ctl" stop -D "$data" -m immediate -w -t 30 >/dev/null 2>&1
		if [ -f "$data/postmaster.pid" ]; then # still there: make sure it dies
			pid=$(head -n1 "$data/postmaster.pid" 2>/dev/null)
			case "$pid" in '' | *[!0-9]*) ;; *) kill -KILL "$pid" 2>/dev/null ;; esac
		fi
	fi
	[ -n "$tmp" ] && rm -rf -- "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tmp=$(mktemp -d "${TMPDIR:-/tmp}/idem-pg.XXXXXX")
if [ -n "$pg_user" ]; then
	chown "$pg_user" "$tmp"
	# $TMPDIR may be somewhere the server user cannot reach (e.g. /root/tmp).
	if ! as_pg_user test -w "$tmp" 2>/dev/null; then
		rm -rf -- "$tmp"
		tmp=$(mktemp -d /tmp/idem-pg.XXXXXX)
		chown "$pg_user" "$tmp"
	fi
fi
data=$tmp/data
sock=$tmp/sock
logfile=$tmp/postgres.log
as_pg_user mkdir -m 700 "$sock"

# ---------------------------------------------------------------------------
# 5. initdb + start.
# --locale=C: deterministic collation, and no failure when the caller's
# LANG/LC_* names a locale that is not installed.
if ! as_pg_user "$bindir/initdb" -D "$data" -A trust -U postgres -E UTF8 --locale=C --no-sync \
	>"$tmp/initdb.log" 2>&1; then
	log "initdb failed ($bindir/initdb${pg_user:+, as user $pg_user}):"
	tail -n 30 "$tmp/initdb.log" >&2
	exit 1
fi

port_in_use() { # a successful connect means someone is listening
	if command -v ss >/dev/null 2>&1; then
		ss -tln "sport = :$1" 2>/dev/null | tail -n +2 | grep -q . && return 0
	fi
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

pg_opts="-c fsync=off -c full_page_writes=off -c max_connections=300 -c shared_buffers=128MB"
if [ "${PG_DURABLE:-}" = 1 ]; then
	pg_opts="-c fsync=on -c full_page_writes=on -c synchronous_commit=on -c max_connections=300 -c shared_buffers=1GB"
	pg_opts="$pg_opts -c max_wal_size=8GB -c checkpoint_timeout=30min -c shared_preload_libraries=pg_stat_statements"
fi

pg_opts="$pg_opts ${PG_OPTS:-}"

port=${PG_PORT_BASE:-55432}
last_port=$((port + 200))
started=""
while [ "$port" -le "$last_port" ]; do
	if port_in_use "$port"; then
		port=$((port + 1))
		continue
	fi
	if [ -f "$logfile" ]; then : >"$logfile"; fi # only this attempt's messages (keeps owner)
	if as_pg_user "$bindir/pg_ctl" start -D "$data" -w -t 60 -l "$logfile" \
		-o "-c listen_addresses=127.0.0.1 -p $port -k $sock $pg_opts" \
		>"$tmp/pg_ctl.log" 2>&1; then
		started=1
		break
	fi
	# Lost a race for the port with another process? Try the next one.
	if grep -qE 'could not bind|Address already in use|could not create any TCP/IP sockets' "$logfile" 2>/dev/null &&
		[ ! -f "$data/postmaster.pid" ]; then
		port=$((port + 1))
		continue
	fi
	break
done
if [ -z "$started" ]; then
	log "failed to start PostgreSQL ($bindir/pg_ctl${pg_user:+, as user $pg_user}, port $port)"
	cat "$tmp/pg_ctl.log" >&2 2>/dev/null || true
	log "last 30 lines of the server log:"
	tail -n 30 "$logfile" >&2 2>/dev/null || true
	exit 1
fi

export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
log "started throwaway PostgreSQL $(pg_version_of "$bindir") from $bindir${pg_user:+ as user $pg_user} at 127.0.0.1:$port (data in $tmp${PG_DURABLE:+, durable: fsync on})"

# ---------------------------------------------------------------------------
# 6. Run the command; the EXIT trap stops the server and removes $tmp.
rc=0
"$@" || rc=$?
exit "$rc"
