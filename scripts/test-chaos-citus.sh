#!/usr/bin/env bash
# The chaos harness on a Citus cluster (make chaos-citus): installs Citus
# into the local PostgreSQL 15 first (../shared/citus/build.sh, or
# CITUS_BUILD; nothing to do once installed), then runs cmd/chaos -citus,
# which starts a coordinator and two workers of its own on free loopback
# ports, distributes every table with migrate --citus, and restarts a
# worker and moves a shard while payments flow. Arguments go to cmd/chaos,
# after -citus.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${CITUS_BUILD:-../shared/citus/build.sh}
if [ ! -x "$build" ]; then
	echo "test-chaos-citus: no $build (set CITUS_BUILD to Citus's build.sh)" >&2
	exit 1
fi
"$build" >/dev/null
exec go run ./cmd/chaos -citus "$@"
