#!/usr/bin/env bash
# What a user outside this repository gets from `go get`: for each adapter
# and store, a scratch module outside the tree that imports it (and the core),
# with `replace` lines only for the idem modules it imports (plus idemshared
# where a store needs it: it is released in lockstep with them). Runs
# go mod tidy and go build, prints the module count of its graph
# (go list -m all), and fails when the graph lists a heavy or test-only
# module (pgx, SQLite, gonum, toxiproxy, test libraries) that none of the
# built packages import.
#
#   scripts/check-modules.sh            every graph
#   scripts/check-modules.sh idemgin    only those named
#
# Needs Go and the module proxy (or a module cache holding the dependencies).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}

# name | idem modules it imports (paths relative to the repository root) | packages its code imports
graphs=(
	"core||github.com/idem-dev/idem"
	"idemgin+sqlstore|idemgin sqlstore|github.com/idem-dev/idem/idemgin github.com/idem-dev/idem/sqlstore"
	"idemecho|idemecho|github.com/idem-dev/idem/idemecho"
	"idemgrpc|idemgrpc|github.com/idem-dev/idem/idemgrpc"
	"idemnats|idemnats|github.com/idem-dev/idem/idemnats"
	"idemamqp|idemamqp|github.com/idem-dev/idem/idemamqp"
	"idemotel|idemotel|github.com/idem-dev/idem/idemotel"
	"idemprom|idemprom|github.com/idem-dev/idem/idemprom"
	"mysqlstore|mysqlstore sqlstore|github.com/idem-dev/idem/mysqlstore"
	"pgstore|pgstore|github.com/idem-dev/idem/pgstore"
	"sqlitestore|sqlitestore|github.com/idem-dev/idem/sqlitestore"
)
# Modules a graph may list only when a built package imports them: drivers,
# SQLite, plotting, fault injection, embedded servers, the stores themselves,
# and test libraries. A graph fails when only idem modules require one its
# user did not import; one that a dependency outside this repository requires
# too, for its own tests (grpc's go.mod requires gonum, pgx's testify), is
# only noted.
unwanted='^(github\.com/jackc/pgx|modernc\.org/sqlite|github\.com/mattn/go-sqlite3|gonum\.org/|github\.com/Shopify/toxiproxy|github\.com/nats-io/nats-server|github\.com/idem-dev/idem/(pgstore|sqlitestore|sqlstore|mysqlstore)$|github\.com/stretchr/testify|github\.com/google/go-cmp|gotest\.tools|github\.com/onsi/|github\.com/DATA-DOG/go-sqlmock|go\.uber\.org/goleak|github\.com/kylelemons/godebug|github\.com/hashicorp/go-retryablehttp)'

goline=$(sed -n 's/^go //p' "$root/go.mod")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

only=" $* "
failed=0
printf '%-18s %8s  %s\n' graph modules result
for g in "${graphs[@]}"; do
	IFS='|' read -r name mods pkgs <<<"$g"
	if [ $# -gt 0 ] && [[ $only != *" $name "* ]]; then continue; fi
	dir="$work/$name"
	mkdir -p "$dir"
	# A store built on the lockstep shared module needs it replaced too.
	replaced=$(for m in $mods; do
		echo "$m"
		if grep -q '^[[:space:]]*github.com/idem-dev/idem/idemshared ' "$root/$m/go.mod"; then echo idemshared; fi
	done | sort -u)
	{
		echo "module example.com/trial"
		echo
		echo "go $goline"
		echo
		echo "replace github.com/idem-dev/idem => $root"
		for m in $replaced; do echo "replace github.com/idem-dev/idem/$m => $root/$m"; done
	} >"$dir/go.mod"
	{
		echo "package main"
		echo
		echo "import ("
		echo "	_ \"github.com/idem-dev/idem\""
		for p in $pkgs; do echo "	_ \"$p\""; done
		echo ")"
		echo
		echo "func main() {}"
	} >"$dir/main.go"
	log="$dir/log"
	if ! (cd "$dir" && GOWORK=off GOFLAGS=-mod=mod $GO mod tidy && GOWORK=off $GO build ./...) >"$log" 2>&1; then
		printf '%-18s %8s  %s\n' "$name" - "FAIL: go mod tidy or go build"
		sed 's/^/    /' "$log"
		failed=1
		continue
	fi
	listed=$(cd "$dir" && GOWORK=off $GO list -m all | tail -n +2)
	count=$(printf '%s\n' "$listed" | grep -c .)
	built=$(cd "$dir" && GOWORK=off $GO list -deps -f '{{with .Module}}{{.Path}}{{end}}' ./... | sort -u)
	# Who requires what: "module@version required@version".
	graph=$(cd "$dir" && GOWORK=off $GO mod graph)
	extra="" noted=""
	for m in $(printf '%s\n' "$listed" | awk '{print $1}' | grep -E "$unwanted" || true); do
		if grep -qxF "$m" <<<"$built"; then continue; fi
		by=$(awk -v m="$m" '{r = $2; sub(/@.*/, "", r); if (r == m) {sub(/@.*/, "", $1); print $1}}' <<<"$graph" | sort -u | tr '\n' ' ')
		if grep -qv '^github.com/idem-dev/idem' <<<"$(tr ' ' '\n' <<<"${by% }")"; then
			noted="$noted $m (required by ${by% })"
		else
			extra="$extra $m (required by ${by% })"
		fi
	done
	if [ -n "$extra" ]; then
		printf '%-18s %8d  %s\n' "$name" "$count" "FAIL: lists, without importing:$extra"
		failed=1
	else
		printf '%-18s %8d  %s\n' "$name" "$count" "ok${noted:+; not imported, from outside idem:$noted}"
	fi
done
exit $failed
