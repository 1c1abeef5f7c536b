#!/usr/bin/env bash
# Runs searches.sql twice on keyrow10m (load.sh) and prints, for each
# statement of the second run, its name, its scans and its execution time.
set -euo pipefail
cd "$(dirname "$0")"
P="psql -h 127.0.0.1 -U postgres -d keyrow10m -X -q"
$P -f searches.sql >/dev/null
$P -f searches.sql | grep -E '^###|Scan|Execution Time|Sort Method|Buffers: shared' | grep -v '^ *Buffers: shared hit=[0-9]*$' |
	sed -e 's/  */ /g'
