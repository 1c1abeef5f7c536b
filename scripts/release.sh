#!/usr/bin/env bash
# Cross-builds the release binaries (paymentsd, bankd, idem-gateway) for
# linux and darwin on amd64 and arm64 into dist/: one archive per platform,
# idem-<version>-<os>-<arch>.tar.gz holding the three binaries, LICENSE,
# README.md and CHANGELOG.md, and dist/SHA256SUMS over the archives.
# Each binary's --version prints VERSION and COMMIT, stamped with -ldflags.
#
#   VERSION  default: git describe of the newest core tag (vX.Y.Z), with
#            -dirty for a changed tree; v0.0.0-dev without tags
#   COMMIT   default: git rev-parse HEAD
#   PLATFORMS  default: "linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"
#   RELEASE_JOBS  platforms built at once, default all of them
#
# One go build per platform builds the three binaries (their graphs are one
# graph: paymentsd's holds the others'), and the platforms build at once,
# sharing the build cache: each platform's compile has a long serial chain
# (SQLite's generated C-to-Go package), and one platform's chain runs while
# another's packages fill the other cores.
#
# Needs Go and git; no C compiler (CGO_ENABLED=0: SQLite is pure Go).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

VERSION=${VERSION:-$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || echo v0.0.0-dev)}
COMMIT=${COMMIT:-$(git rev-parse HEAD)}
binaries=(paymentsd bankd idem-gateway)
read -r -a platforms <<<"${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}"
pkg=github.com/idem-dev/idem/cmd/internal/version
ldflags="-s -w -X $pkg.Version=$VERSION -X $pkg.Commit=$COMMIT"

jobs=${RELEASE_JOBS:-${#platforms[@]}}

# build makes one platform's archive, dist/NAME.tar.gz, and writes its exit
# status to dist/NAME.rc.
build() {
	local goos=$1 goarch=$2 name=$3 start=$SECONDS
	local stage="dist/$name"
	mkdir -p "$stage"
	local rc=0
	{
		(cd cmd && CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch $GO build -trimpath -ldflags "$ldflags" \
			-o "../$stage/" "${binaries[@]/#/./}") &&
			cp LICENSE README.md CHANGELOG.md "$stage/" &&
			# Reproducible archives: fixed owner, order and modification time.
			tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00Z' \
				-C dist -cf - "$name" | gzip -n >"dist/$name.tar.gz"
	} >"dist/$name.log" 2>&1 || rc=$?
	rm -rf "$stage"
	echo "$rc" >"dist/$name.rc"
	echo "release: $goos/$goarch built in $((SECONDS - start)) s$([ "$rc" -eq 0 ] || echo ", FAILED")"
}

rm -rf dist
mkdir -p dist
started=$SECONDS
names=()
for p in "${platforms[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
	goos=${p%/*} goarch=${p#*/}
	name="idem-$VERSION-$goos-$goarch"
	names+=("$name")
	build "$goos" "$goarch" "$name" &
done
wait
failed=0
for name in "${names[@]}"; do
	if [ "$(cat "dist/$name.rc")" != 0 ]; then
		echo "release: $name failed:" >&2
		sed 's/^/    /' "dist/$name.log" >&2
		failed=1
	fi
	rm -f "dist/$name.rc" "dist/$name.log"
done
if [ $failed -ne 0 ]; then exit 1; fi
echo "release: ${#platforms[@]} platforms in $((SECONDS - started)) s"
(cd dist && sha256sum -- *.tar.gz >SHA256SUMS)

# The host's own binary answers --version with what was stamped.
host="dist/idem-$VERSION-$($GO env GOOS)-$($GO env GOARCH).tar.gz"
if [ -f "$host" ]; then
	check=$(mktemp -d)
	trap 'rm -rf "$check"' EXIT
	tar -xzf "$host" -C "$check"
	for b in "${binaries[@]}"; do
		out=$("$check"/idem-*/"$b" --version)
		case $out in
		"$b $VERSION (commit $COMMIT"*) echo "$out" ;;
		*)
			echo "release: $b --version printed '$out', want $VERSION and commit $COMMIT" >&2
			exit 1
			;;
		esac
	done
fi
echo
ls -l dist
echo
cat dist/SHA256SUMS
