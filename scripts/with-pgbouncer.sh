#!/usr/bin/env bash
# Run a command with DATABASE_URL pointing at a PgBouncer in transaction
# pooling mode, in front of the server DATABASE_URL names.
#
# Usage: scripts/with-pgbouncer.sh <command...>
#   e.g. scripts/test-postgres.sh scripts/with-pgbouncer.sh go test -race ./pgstore/...
#
# - Needs DATABASE_URL in URL form (postgres://user[:password]@host[:port]/db?…),
#   as scripts/test-postgres.sh sets it.
# - Starts pgbouncer on 127.0.0.1 on a free port (56432 upward), with every
#   database name passed through to the server (so a test may create its own
#   database and connect to it by name), pool_mode = transaction, and no
#   unix socket. When run as root it runs pgbouncer as the `postgres` system
#   user (or `nobody`), because pgbouncer refuses to run as root.
# - Exports DATABASE_URL pointing at pgbouncer (same user, database and
#   query parameters) and PGBOUNCER=1, runs the command as the caller, then
#   stops pgbouncer and removes its temp dir (also on Ctrl-C / SIGTERM). The
#   script exits with the command's status.
#
# Clients must not rely on session state: named prepared statements (pgx:
# default_query_exec_mode=exec), SET without LOCAL, session advisory locks,
# or startup parameters other than client_encoding, DateStyle, TimeZone,
# standard_conforming_strings and application_name (search_path is refused;
# default_transaction_isolation is ignored).
#
# Environment overrides:
#   PGBOUNCER_BIN        the pgbouncer binary (default: from PATH, /usr/sbin).
#   PGBOUNCER_PORT_BASE  first TCP port to try (default 56432).
#   PGBOUNCER_POOL_SIZE  server connections per database and user (default 20).
set -euo pipefail

prog=with-pgbouncer
log() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() { log "$*"; exit 1; }

if [ "$#" -eq 0 ]; then
	echo "usage: $0 <command...>" >&2
	exit 2
fi

# ---------------------------------------------------------------------------
# 1. pgbouncer and the server behind it.
bin=${PGBOUNCER_BIN:-}
if [ -z "$bin" ]; then
	bin=$(command -v pgbouncer 2>/dev/null || true)
	for d in /usr/sbin /usr/local/sbin /usr/local/bin /opt/homebrew/bin; do
		[ -z "$bin" ] && [ -x "$d/pgbouncer" ] && bin=$d/pgbouncer
	done
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
	die "pgbouncer not found; install it (Debian/Ubuntu: apt-get install pgbouncer; macOS: brew install pgbouncer) or set PGBOUNCER_BIN"
fi

[ -n "${DATABASE_URL:-}" ] ||
	die "DATABASE_URL is not set; run under scripts/test-postgres.sh, which starts a throwaway server"

# postgres[ql]://[user[:password]@]host[:port][/db][?query]
re='^postgres(ql)?://(([^:@/]*)(:([^@/]*))?@)?([^:/?@]+)(:([0-9]+))?(/([^?]*))?(\?(.*))?$'
[[ "$DATABASE_URL" =~ $re ]] ||
	die "DATABASE_URL must be a postgres:// URL with a host name or IPv4 address (key=value strings are not supported)"
db_user=${BASH_REMATCH[3]:-${PGUSER:-$(id -un)}}
db_password=${BASH_REMATCH[5]:-}
db_host=${BASH_REMATCH[6]}
db_port=${BASH_REMATCH[8]:-5432}
db_name=${BASH_REMATCH[10]:-$db_user}
db_query=${BASH_REMATCH[12]:-}
# A percent-encoded user or password is decoded for pgbouncer's files.
urldecode() { local s=${1//+/ }; printf '%b' "${s//%/\\x}"; }
db_user_plain=$(urldecode "$db_user")
db_password_plain=$(urldecode "$db_password")

# ---------------------------------------------------------------------------
# 2. Who runs pgbouncer.
run_user=""
if [ "$(id -u)" -eq 0 ]; then
	if id -u postgres >/dev/null 2>&1; then run_user=postgres; else run_user=nobody; fi
fi

as_run_user() {
	if [ -z "$run_user" ]; then
		(cd "$tmp" && "$@")
	elif command -v runuser >/dev/null 2>&1; then
		(cd "$tmp" && runuser -u "$run_user" -- "$@")
	else
		(cd "$tmp" && su -s /bin/sh "$run_user" -c "$(printf '%q ' "$@")")
	fi
}

# ---------------------------------------------------------------------------
# 3. Temp dir + cleanup.
tmp=""
pid=""
cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null
	fi
	[ -n "$tmp" ] && rm -rf -- "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tmp=$(mktemp -d "${TMPDIR:-/tmp}/idem-pgbouncer.XXXXXX")
if [ -n "$run_user" ]; then
	chown "$run_user" "$tmp"
	if ! as_run_user test -w "$tmp" 2>/dev/null; then
		rm -rf -- "$tmp"
		tmp=$(mktemp -d /tmp/idem-pgbouncer.XXXXXX)
		chown "$run_user" "$tmp"
	fi
fi
chmod 700 "$tmp"

# ---------------------------------------------------------------------------
# 4. Configure and start.
quote_ini() { printf "'%s'" "${1//\'/\'\'}"; } # a libpq-style quoted value
server="host=$db_host port=$db_port"
[ -n "$db_password" ] && server="$server user=$(quote_ini "$db_user_plain") password=$(quote_ini "$db_password_plain")"
# The auth file lists the one user; with auth_type trust clients need no
# password, and pgbouncer logs in to the server with the one in the file.
printf '"%s" "%s"\n' "${db_user_plain//\"/\"\"}" "${db_password_plain//\"/\"\"}" >"$tmp/userlist.txt"

port_in_use() {
	if command -v ss >/dev/null 2>&1; then
		ss -tln "sport = :$1" 2>/dev/null | tail -n +2 | grep -q . && return 0
	fi
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

write_config() { # $1 = port
	cat >"$tmp/pgbouncer.ini" <<-INI
		[databases]
		* = $server

		[pgbouncer]
		listen_addr = 127.0.0.1
		listen_port = $1
		unix_socket_dir =
		auth_type = trust
		auth_file = $tmp/userlist.txt
		admin_users = $db_user_plain
		pool_mode = transaction
		default_pool_size = ${PGBOUNCER_POOL_SIZE:-20}
		max_client_conn = 2000
		ignore_startup_parameters = default_transaction_isolation
		server_login_retry = 1
		logfile = $tmp/pgbouncer.log
		pidfile = $tmp/pgbouncer.pid
		log_connections = 0
		log_disconnections = 0
		log_pooler_errors = 1
	INI
}

port=${PGBOUNCER_PORT_BASE:-56432}
last_port=$((port + 200))
started=""
while [ "$port" -le "$last_port" ]; do
	if port_in_use "$port"; then
		port=$((port + 1))
		continue
	fi
	write_config "$port"
	chmod 600 "$tmp/userlist.txt" "$tmp/pgbouncer.ini"
	[ -n "$run_user" ] && chown "$run_user" "$tmp/userlist.txt" "$tmp/pgbouncer.ini"
	rm -f "$tmp/pgbouncer.pid"
	if as_run_user "$bin" -d "$tmp/pgbouncer.ini" >"$tmp/start.log" 2>&1; then
		for _ in $(seq 100); do # the daemon writes its pid file, then listens
			if [ -s "$tmp/pgbouncer.pid" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
				pid=$(head -n1 "$tmp/pgbouncer.pid")
				started=1
				break
			fi
			sleep 0.05
		done
	fi
	[ -n "$started" ] && break
	[ -s "$tmp/pgbouncer.pid" ] && pid=$(head -n1 "$tmp/pgbouncer.pid")
	# Lost a race for the port? Try the next one.
	if grep -qE 'Address already in use|bind' "$tmp/pgbouncer.log" "$tmp/start.log" 2>/dev/null; then
		port=$((port + 1))
		continue
	fi
	break
done
if [ -z "$started" ]; then
	log "failed to start pgbouncer ($bin${run_user:+, as user $run_user}, port $port):"
	tail -n 30 "$tmp/start.log" "$tmp/pgbouncer.log" >&2 2>/dev/null || true
	exit 1
fi

export DATABASE_URL="postgres://$db_user${db_password:+:$db_password}@127.0.0.1:$port/$db_name${db_query:+?$db_query}"
export PGBOUNCER=1
log "started $("$bin" --version 2>/dev/null | head -n1) in transaction pooling mode${run_user:+ as user $run_user} at 127.0.0.1:$port, in front of $db_host:$db_port"

# ---------------------------------------------------------------------------
# 5. Run the command; the EXIT trap stops pgbouncer and removes $tmp.
rc=0
"$@" || rc=$?
exit "$rc"
