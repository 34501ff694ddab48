#!/bin/bash
# test_hit_ownership on a real full disk: a 4 MiB tmpfs in a private mount
# namespace holds the cache; scratch directories live elsewhere.
#   test_hit_ownership.sh TEST_EXE SOURCE_DIR
set -euo pipefail
exe=$1 src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/milc-hit-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/mnt" "$work/scratch"
if ! unshare -m true 2>/dev/null; then
  [ "${CI:-}" = true ] && { echo "no mount namespace here (unshare -m)"; exit 1; }
  echo "skipped: no mount namespace (unshare -m needs CAP_SYS_ADMIN)"; exit 77
fi
unshare -m bash -c 'mount -t tmpfs -o size=4m milc-test "$1" && mkdir "$1/cache" && exec "$2" "$1/cache" "$3" "$4"' \
  _ "$work/mnt" "$exe" "$work/scratch" "$src/mil-templates"
