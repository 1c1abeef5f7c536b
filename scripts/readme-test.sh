#!/usr/bin/env bash
# README.md's commands as a new user pastes them: the fenced blocks after a
# `<!-- readme-test: NAME -->` line, taken from README.md as they are and run
# in a scratch directory outside the tree, with an empty module cache (a
# temporary GOMODCACHE; GOPROXY as the environment gives it) and no go.work:
#
#   setup    run line by line; its `git clone` of the repository clones this
#            checkout instead (what is committed at HEAD)
#   main.go  saved as main.go where setup left off
#   run      run line by line; the command that ends in `go run .` is
#            started in the background and waited for until it answers
#   curl     sent twice: the first answer must be fresh, the second a
#            replay of it (Idempotent-Replayed: true, the same status and
#            body); then the example's table must hold one row
#
# PostgreSQL is a throwaway cluster from scripts/test-postgres.sh (never a
# DATABASE_URL: the example creates a database named payments); the blocks
# reach it as psql would, through PGHOST, PGPORT and PGUSER. Every command
# is printed with its output.
#
#   scripts/readme-test.sh     (make test-readme)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
readme=$root/README.md

if [ -z "${README_TEST_CLUSTER:-}" ]; then
	exec env -u DATABASE_URL README_TEST_CLUSTER=1 "$root/scripts/test-postgres.sh" "$0" "$@"
fi

work=$(mktemp -d)
server=""
cleanup() {
	if [ -n "$server" ]; then
		# The whole process group: go run and the program it built.
		kill -- "-$server" 2>/dev/null || true
		wait "$server" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# The blocks, one file each: blocks/NAME holds the lines between the fences
# of the block that follows the marker.
mkdir -p "$work/blocks"
awk -v dir="$work/blocks" '
	/^<!-- readme-test: [A-Za-z0-9._-]+ -->$/ { name = $3; next }
	name != "" && !infence && /^```/ { infence = 1; out = dir "/" name; printf "" > out; next }
	infence && /^```$/ { infence = 0; close(out); name = ""; next }
	infence { print > out }
' "$readme"
for b in setup main.go run curl; do
	if [ ! -s "$work/blocks/$b" ]; then
		echo "readme-test: README.md has no block marked <!-- readme-test: $b -->" >&2
		exit 1
	fi
done

# commands prints a block's commands, one a line: continuation lines joined,
# blank and comment-only lines dropped.
commands() {
	awk '
		{ line = (cont ? cont " " : "") $0; cont = "" }
		/\\$/ { sub(/[[:space:]]*\\$/, "", line); cont = line; next }
		line ~ /^[[:space:]]*(#|$)/ { next }
		{ print line }
	' "$1"
}

# The database as psql finds it, from the cluster's URL
# (postgres://USER@HOST:PORT/DB?PARAMS, no password: trust auth).
hostport=${DATABASE_URL#*://}
hostport=${hostport%%/*}
export PGUSER=${hostport%%@*}
hostport=${hostport#*@}
export PGHOST=${hostport%:*} PGPORT=${hostport##*:}
unset DATABASE_URL
export GOMODCACHE=$work/modcache GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-modcacherw"
echo "readme-test: scratch directory $work, empty module cache GOMODCACHE=$GOMODCACHE, GOPROXY=$(go env GOPROXY)"
echo "readme-test: PostgreSQL at $PGHOST:$PGPORT as $PGUSER"

if curl -s -o /dev/null --max-time 2 localhost:8080; then
	echo "readme-test: something answers on localhost:8080, where the example listens; stop it first" >&2
	exit 1
fi

# step prints a command and runs it in this shell (a cd holds for the next).
step() {
	printf '\n$ %s\n' "$1"
	eval "$1"
}

cd "$work"
while IFS= read -r c; do
	case $c in
	"git clone https://github.com/idem-dev/idem"*)
		printf '\n$ %s\n' "$c"
		echo "(cloning this checkout instead: git clone $root idem)"
		git clone -q "$root" idem
		;;
	*) step "$c" ;;
	esac
done < <(commands "$work/blocks/setup")

printf '\n$ cat > main.go   # README.md'"'"'s Go block, %d lines\n' "$(wc -l <"$work/blocks/main.go")"
cp "$work/blocks/main.go" main.go

while IFS= read -r c; do
	case $c in
	*"go run ."*)
		printf '\n$ %s\n' "$c"
		echo "(in the background, its output in a log printed on failure)"
		setsid bash -c "$c" >"$work/server.log" 2>&1 &
		server=$!
		for _ in $(seq 1 600); do # a cold build on a busy machine: up to 5 minutes
			if curl -s -o /dev/null --max-time 2 localhost:8080; then break; fi
			if ! kill -0 "$server" 2>/dev/null; then
				cat "$work/server.log"
				echo "readme-test: the example exited before it answered" >&2
				exit 1
			fi
			sleep 0.5
		done
		if ! curl -s -o /dev/null --max-time 2 localhost:8080; then
			cat "$work/server.log"
			echo "readme-test: the example did not answer on localhost:8080 within 5 minutes" >&2
			exit 1
		fi
		echo "(answering on localhost:8080)"
		;;
	*) step "$c" ;;
	esac
done < <(commands "$work/blocks/run")

curl_cmd=$(commands "$work/blocks/curl")
if [ "$(printf '%s\n' "$curl_cmd" | grep -c .)" -ne 1 ] || [[ $curl_cmd != curl\ -i* ]]; then
	echo "readme-test: the curl block must be one curl -i command, got: $curl_cmd" >&2
	exit 1
fi
# answer sends the README's curl, prints what it printed, and splits that
# (curl -i: the headers, a blank line, the body) into $1.headers and $1.body.
answer() {
	printf '\n$ %s\n' "$curl_cmd"
	if ! eval "$curl_cmd" >"$work/$1" 2>"$work/$1.err"; then
		cat "$work/$1.err" >&2
		echo "readme-test: curl failed" >&2
		exit 1
	fi
	cat "$work/$1"
	tr -d '\r' <"$work/$1" | awk -v h="$work/$1.headers" -v b="$work/$1.body" '
		!body && /^$/ { body = 1; next }
		!body { print > h; next }
		{ print > b }
	'
	touch "$work/$1.body"
}
answer first
answer second

status() { head -n 1 "$work/$1.headers" | awk '{print $2}'; }
replayed() { grep -i '^Idempotent-Replayed:' "$work/$1.headers" | awk '{print tolower($2)}'; }
fail=0
check() { # description, condition...
	local what=$1
	shift
	if "$@"; then echo "ok:   $what"; else echo "FAIL: $what"; fail=1; fi
}
echo
check "the first answer is 201 (it is $(status first))" [ "$(status first)" = 201 ]
check "the first answer is not a replay" [ -z "$(replayed first)" ]
check "the second answer has Idempotent-Replayed: true" [ "$(replayed second)" = true ]
check "the second answer's status is the first's ($(status second))" [ "$(status second)" = "$(status first)" ]
check "the second answer's body is the first's, byte for byte" cmp -s "$work/first.body" "$work/second.body"
rows=$(psql -d payments -Atc 'SELECT count(*) FROM payments')
check "one row in payments (there are $rows)" [ "$rows" = 1 ]
if [ $fail -ne 0 ]; then
	echo "--- the example's log"
	cat "$work/server.log"
	exit 1
fi
echo "readme-test: PASS"
