#!/usr/bin/env bash
# The tag set of a release: every module of this repository is tagged at
# the same version, the core as vX.Y.Z and each other module with its
# directory as prefix (pgstore/vX.Y.Z, payments/mysqlledger/vX.Y.Z), the
# way the go command finds a module's versions in a repository holding
# several. The test-only modules (integration, routers, repositories) are
# not tagged: nobody imports them. docs/releasing.md has the whole process.
#
#   scripts/release-tags.sh v0.1.0           print the modules and their tags
#   scripts/release-tags.sh v0.1.0 --create  on a clean tree: point every
#       module's requirements on the others at v0.1.0 (go mod edit), commit
#       that as "release v0.1.0", and create the tags on that commit
#       (annotated; nothing is pushed)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
test_only=" integration routers repositories "

version=${1:-}
if ! [[ $version =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "usage: $0 vX.Y.Z [--create]" >&2
	exit 2
fi
create=${2:-}

# Module directories from go.work, the core first.
dirs=()
while read -r d; do
	d=${d#./}
	[ "$d" = . ] && d=""
	if [[ $test_only == *" $d "* ]]; then continue; fi
	dirs+=("$d")
done < <(GOWORK= $GO work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p' | sort)

tag_of() { if [ -z "$1" ]; then echo "$version"; else echo "$1/$version"; fi; }

if [ "$create" != --create ]; then
	for d in "${dirs[@]}"; do
		printf '%-46s %s\n' "$(sed -n 's/^module //p' "${d:-.}/go.mod")" "$(tag_of "$d")"
	done
	exit 0
fi

if [ -n "$(git status --porcelain)" ]; then
	echo "release-tags: the work tree has changes: commit or stash them first" >&2
	exit 1
fi
for d in "${dirs[@]}"; do
	if git rev-parse -q --verify "refs/tags/$(tag_of "$d")" >/dev/null; then
		echo "release-tags: tag $(tag_of "$d") exists already" >&2
		exit 1
	fi
done
# Each module requires the others at the release's version; the replace
# lines stay, for work inside the repository (users' builds ignore them).
for d in "${dirs[@]}" integration routers repositories; do
	args=()
	for r in $(cd "${d:-.}" && GOWORK=off $GO mod edit -json | sed -n 's/.*"Path": "\(github.com\/idem-dev\/idem[^"]*\)".*/\1/p' | sort -u); do
		[ "$r" = "$(sed -n 's/^module //p' "${d:-.}/go.mod")" ] && continue
		args+=("-require=$r@$version")
	done
	if [ ${#args[@]} -gt 0 ]; then (cd "${d:-.}" && $GO mod edit "${args[@]}"); fi
done
git commit -qam "release $version"
for d in "${dirs[@]}"; do
	git tag -a "$(tag_of "$d")" -m "$(tag_of "$d")"
	echo "tagged $(tag_of "$d")"
done
echo "push with: git push origin $(for d in "${dirs[@]}"; do printf '%s ' "$(tag_of "$d")"; done)"
