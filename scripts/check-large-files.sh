#!/usr/bin/env bash
# Fails when git tracks a file over 1 MiB (LIMIT, in bytes) that is not a
# documentation image (a .png, .jpg, .jpeg, .gif, .svg or .webp under docs/
# or results/): binaries, archives and databases belong in a release or
# in .gitignore, never in the repository. Prints one line per file.
#
#   scripts/check-large-files.sh
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${LIMIT:-1048576}

bad=0
while IFS= read -r -d '' f; do
	[ -f "$f" ] || continue # deleted from the work tree, not yet from the index
	case $f in
	docs/*.png | docs/*.jpg | docs/*.jpeg | docs/*.gif | docs/*.svg | docs/*.webp) continue ;;
	results/*.png | results/*.jpg | results/*.jpeg | results/*.gif | results/*.svg | results/*.webp) continue ;;
	esac
	size=$(stat -c %s -- "$f" 2>/dev/null || stat -f %z -- "$f")
	if [ "$size" -gt "$limit" ]; then
		echo "large file: $f is $size bytes, over the $limit allowed to a tracked file that is not a documentation image (git rm --cached it; build outputs belong in .gitignore)" >&2
		bad=1
	fi
done < <(git ls-files -z)
exit $bad
