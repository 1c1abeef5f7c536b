#!/usr/bin/env bash
# The client recipes of docs/clients.md (clienttest): Python's requests
# with urllib3's Retry, Node's axios with axios-retry, Go's
# go-retryablehttp and idem's client package, against real paymentsd and
# idem-gateway processes on PostgreSQL (DATABASE_URL, else the throwaway
# cluster of scripts/test-postgres.sh).
#
# Usage: scripts/test-clients.sh [go test flags]
#
# Installs what is missing: Debian's python3-requests with apt-get (when
# root; PyPI is not needed), and the Node packages pinned in
# clienttest/node/package-lock.json with npm ci. The tests fail, never
# skip, without them.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! /usr/bin/python3 -c 'import requests, urllib3' 2>/dev/null; then
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "test-clients: /usr/bin/python3 has no requests: install it (Debian/Ubuntu: apt-get install python3-requests)" >&2
		exit 1
	fi
	echo "installing python3-requests"
	aptlog=$(mktemp)
	if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-requests python3-urllib3; } >"$aptlog" 2>&1; then
		cat "$aptlog" >&2
		exit 1
	fi
	rm -f "$aptlog"
fi
if [ ! -d clienttest/node/node_modules ] || ! (cd clienttest/node && node -e "import('axios-retry')") 2>/dev/null; then
	echo "installing axios and axios-retry (npm ci)"
	(cd clienttest/node && npm ci --no-audit --no-fund --loglevel error)
fi

# The tests build paymentsd and idem-gateway themselves; the module is
# tested from its own directory, so that go test sees its go.mod.
cd clienttest
exec ../scripts/test-postgres.sh go test -count=1 -timeout 20m -v "$@" ./...
