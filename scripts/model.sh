#!/usr/bin/env bash
# Model-check the key protocol and the payout flow with SPIN (docs/model.md):
# every property must hold on the real models and be violated by every
# broken variant. Prints a table; exits 1 on any mismatch.
#
# Usage: scripts/model.sh [FILTER]
#   FILTER: run only the checks whose line below contains it (e.g. payout).
#
# Needs spin and a C compiler. When spin is missing and this runs as root,
# it is installed with apt-get (Debian package spin), as .ci/run installs
# pgbouncer.
set -euo pipefail
cd "$(dirname "$0")/.."

filter=${1:-}

if ! command -v spin >/dev/null 2>&1; then
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "model: spin not found: install it (Debian/Ubuntu: apt-get install spin)" >&2
		exit 1
	fi
	echo "installing spin"
	aptlog=$(mktemp)
	if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends spin; } >"$aptlog" 2>&1; then
		cat "$aptlog" >&2
		exit 1
	fi
	rm -f "$aptlog"
fi
cc=${CC:-gcc}
if ! command -v "$cc" >/dev/null 2>&1; then
	echo "model: the C compiler '$cc' was not found (apt-get install gcc)" >&2
	exit 1
fi

# The checks: model file, -D macros (comma-separated), property ("safety":
# the assertions and end states; else the name of an LTL property, checked
# for acceptance cycles under weak fairness), and what it must give.
checks=$(cat <<'EOF'
key.pml      MODE_LEASED                               safety     holds
key.pml      MODE_LEASED,LIVENESS                      settles    holds
key.pml      MODE_LEASED,LIVENESS                      not_stuck  holds
key.pml      MODE_ATOMIC                               safety     holds
key.pml      MODE_ATOMIC,LIVENESS                      settles    holds
key.pml      MODE_ATOMIC,LIVENESS                      not_stuck  holds
key.pml      MODE_DEFERRED                             safety     holds
key.pml      MODE_DEFERRED,LIVENESS                    settles    holds
key.pml      MODE_DEFERRED,LIVENESS                    not_stuck  holds
key.pml      MODE_LEASED,BROKEN_NO_FENCE               safety     violated
key.pml      MODE_LEASED,BROKEN_SELECT_INSERT          safety     violated
key.pml      MODE_ATOMIC,BROKEN_SELECT_INSERT          safety     violated
key.pml      MODE_DEFERRED,BROKEN_SELECT_INSERT        safety     violated
key.pml      MODE_LEASED,BROKEN_COMPLETE_OUTSIDE_TX    safety     violated
key.pml      MODE_LEASED,BROKEN_NO_MAX_LIFE,LIVENESS   settles    violated
key.pml      MODE_LEASED,BROKEN_NO_MAX_LIFE,LIVENESS   not_stuck  violated
payout.pml   -                                         safety     holds
payout.pml   LIVENESS                                  settles    holds
payout.pml   LIVENESS                                  not_stuck  holds
payout.pml   BROKEN_FRESH_KEY                          safety     violated
payout.pml   BROKEN_REFUND_ON_NOT_FOUND                safety     violated
payout.pml   BROKEN_SWEEP_UNKNOWN                      safety     violated
payout.pml   BROKEN_KEY_PER_KEY                        safety     violated
payout.pml   BROKEN_UNFENCED_READ                      safety     violated
payout.pml   BROKEN_COMPLETER_CLAIMS                   safety     violated
EOF
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
models=$PWD/model

fmt='%-11s %-40s %-10s %-9s %-9s %11s %6s %9s %8s\n'
printf "$fmt" model variant property expected result "states" depth "memory" time
printf "$fmt" ----- ------- -------- -------- ------ ------ ----- ------ ----
mismatches=0
while read -r file defs prop expected; do
	[ -n "$file" ] || continue
	case "$file $defs $prop" in *"$filter"*) ;; *) continue ;; esac
	dflags=()
	if [ "$defs" != - ]; then
		IFS=, read -ra ds <<<"$defs"
		for d in "${ds[@]}"; do dflags+=("-D$d"); done
	fi
	dir=$work/$file.$defs.$prop
	mkdir -p "$dir"
	cp "$models/$file" "$dir/"
	(
		cd "$dir"
		spin -a "${dflags[@]}" "$file" >spin.out 2>&1
		if [ "$prop" = safety ]; then
			"$cc" -O2 -w -DSAFETY -o pan pan.c
			./pan -m1000000 >pan.out 2>&1 || true
		else
			"$cc" -O2 -w -DNFAIR=3 -o pan pan.c
			./pan -m1000000 -a -f -N "$prop" >pan.out 2>&1 || true
		fi
	) || { cat "$dir/spin.out" >&2; echo "model: $file $defs: could not build the verifier" >&2; exit 1; }
	out=$dir/pan.out
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | head -1)
	states=$(awk '/states, stored/ {print $1; exit}' "$out")
	depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$out" | head -1)
	mem=$(awk '/total actual memory usage/ {printf "%.0f MB", $1; exit}' "$out")
	secs=$(awk '/elapsed time/ {printf "%.2f s", $4; exit}' "$out")
	case "$errors" in
	0) result=holds ;;
	[1-9]*) result=violated ;;
	*) result=error ;;
	esac
	# A search cut short by the depth bound proves nothing.
	if grep -q "max search depth too small" "$out"; then result=incomplete; fi
	variant=${defs//,/ }
	variant=${variant//MODE_/}
	printf "$fmt" "$file" "$variant" "$prop" "$expected" "$result" "${states:--}" "${depth:--}" "${mem:--}" "${secs:--}"
	if [ "$result" != "$expected" ]; then
		mismatches=$((mismatches + 1))
		grep -E "violated|acceptance cycle|invalid end state|error" "$out" | head -5 | sed 's/^/    /'
		echo "    replay: cd model && spin -a ${dflags[*]} $file && cc -o pan pan.c && ./pan$([ "$prop" = safety ] || echo " -a -f -N $prop") && spin -t -p ${dflags[*]} $file"
	fi
done <<<"$checks"

if [ "$mismatches" -gt 0 ]; then
	echo "model: $mismatches check(s) gave other than expected" >&2
	exit 1
fi
echo "model: every property holds on the real models and is violated by every broken variant"
