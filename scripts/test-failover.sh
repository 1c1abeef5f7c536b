#!/usr/bin/env bash
# The chaos harness on a pg_auto_failover formation (make test-failover):
# installs pg_auto_failover with apt-get when it is missing (the Debian
# packages postgresql-15-auto-failover and pg-auto-failover-cli), and fails,
# never skips, when it cannot. Arguments go to cmd/chaos, after -failover.
set -euo pipefail
cd "$(dirname "$0")/.."

have() { command -v pg_autoctl >/dev/null 2>&1 && ls /usr/share/postgresql/*/extension/pgautofailover.control >/dev/null 2>&1; }
if ! have; then
	if [ "$(id -u)" != 0 ]; then
		echo "test-failover: pg_auto_failover is not installed and installing it needs root:" >&2
		echo "    apt-get install postgresql-15-auto-failover pg-auto-failover-cli" >&2
		exit 1
	fi
	echo "installing pg_auto_failover"
	aptlog=$(mktemp)
	if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		postgresql-15-auto-failover pg-auto-failover-cli; } >"$aptlog" 2>&1; then
		cat "$aptlog" >&2
		rm -f "$aptlog"
		exit 1
	fi
	rm -f "$aptlog"
	have || { echo "test-failover: pg_autoctl or the pgautofailover extension still missing after apt-get" >&2; exit 1; }
fi
exec go run ./cmd/chaos -failover "$@"
