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

rm -rf dist
mkdir -p dist
for p in "${platforms[@]}"; do
	goos=${p%/*} goarch=${p#*/}
	name="idem-$VERSION-$goos-$goarch"
	stage="dist/$name"
	mkdir -p "$stage"
	for b in "${binaries[@]}"; do
		(cd cmd && CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch $GO build -trimpath -ldflags "$ldflags" -o "../$stage/$b" "./$b")
	done
	cp LICENSE README.md CHANGELOG.md "$stage/"
	# Reproducible archives: fixed owner, order and modification time.
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00Z' \
		-C dist -cf - "$name" | gzip -n >"dist/$name.tar.gz"
	rm -rf "$stage"
done
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
