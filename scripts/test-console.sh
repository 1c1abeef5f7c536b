#!/usr/bin/env bash
# The operator console's browser tests (consoletest, docs/console.md): a
# real headless Chromium against real paymentsd and idem-gateway processes,
# on PostgreSQL (DATABASE_URL, else the throwaway cluster of
# scripts/test-postgres.sh) and SQLite. They write the screenshots in
# docs/console/.
#
# Usage: scripts/test-console.sh [go test flags]
#
# Needs Chromium: when it is missing and this runs as root, it is installed
# with apt-get (Debian package chromium), as scripts/model.sh installs spin.
# The tests fail, never skip, without it.
set -euo pipefail
cd "$(dirname "$0")/.."

browser=${CHROMIUM:-chromium}
if ! command -v "$browser" >/dev/null 2>&1; then
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "test-console: $browser not found: install it (Debian/Ubuntu: apt-get install chromium)" >&2
		exit 1
	fi
	echo "installing chromium"
	aptlog=$(mktemp)
	if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } >"$aptlog" 2>&1; then
		cat "$aptlog" >&2
		exit 1
	fi
	rm -f "$aptlog"
fi

# The tests build paymentsd, idem-gateway and bankd themselves; the module
# is tested from its own directory, so that go test sees its go.mod.
cd consoletest
exec ../scripts/test-postgres.sh go test -count=1 -timeout 20m "$@" ./...
