#!/usr/bin/env bash
# Run a command with MYSQL_URL pointing at a MySQL or MariaDB server.
#
# Usage: scripts/test-mysql.sh <command...>
#   e.g. scripts/test-mysql.sh go test -race ./mysqlstore/...
#
# - If MYSQL_URL is set (non-empty), it is used as is.
# - Else, if a server answers on 127.0.0.1:3306, MYSQL_URL is
#   mysql://root@127.0.0.1:3306/ (CI machines run MariaDB there).
# - Else a throwaway MariaDB is started from the local binaries
#   (mariadb-install-db, mariadbd) in a fresh temp dir, on 127.0.0.1 and a
#   free port (53306 upward), without grant tables, and removed when the
#   command ends. As root it runs as the `mysql` user (or `nobody`).
# - Else it fails, saying what to install.
set -euo pipefail

if [ "$#" -eq 0 ]; then
	echo "usage: $0 <command...>" >&2
	exit 2
fi

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if [ -n "${MYSQL_URL:-}" ]; then
	exec "$@"
fi
if listening 3306; then
	export MYSQL_URL="mysql://root@127.0.0.1:3306/"
	exec "$@"
fi

install_db=$(command -v mariadb-install-db || command -v mysql_install_db || true)
mariadbd=$(command -v mariadbd || ls /usr/sbin/mariadbd 2>/dev/null || true)
if [ -z "$install_db" ] || [ -z "$mariadbd" ]; then
	echo "error: the MySQL store's tests need MariaDB or MySQL: set MYSQL_URL, run a server on 127.0.0.1:3306, or install MariaDB's binaries (Debian/Ubuntu: apt-get install mariadb-server)" >&2
	exit 1
fi

dir=$(mktemp -d)
chmod 755 "$dir"
run_as=()
user_opt=()
if [ "$(id -u)" -eq 0 ]; then
	u=mysql
	id "$u" >/dev/null 2>&1 || u=nobody
	chown "$u" "$dir"
	user_opt=(--user="$u")
fi
port=53306
while listening "$port"; do port=$((port + 1)); done

"$install_db" --no-defaults "${user_opt[@]}" --datadir="$dir/data" --auth-root-authentication-method=normal >"$dir/install.log" 2>&1 || {
	cat "$dir/install.log" >&2
	exit 1
}
"$mariadbd" --no-defaults "${user_opt[@]}" --datadir="$dir/data" --socket="$dir/sock" --pid-file="$dir/pid" \
	--bind-address=127.0.0.1 --port="$port" --skip-grant-tables --innodb-flush-log-at-trx-commit=0 \
	>"$dir/server.log" 2>&1 &
server=$!
cleanup() {
	kill "$server" 2>/dev/null || true
	wait "$server" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM
for _ in $(seq 1 300); do
	listening "$port" && break
	if ! kill -0 "$server" 2>/dev/null; then
		cat "$dir/server.log" >&2
		exit 1
	fi
	sleep 0.1
done
export MYSQL_URL="mysql://root@127.0.0.1:$port/"
"$@"
