#!/usr/bin/env bash
# Prewarm at install: build every program of a manifest into a fresh cache and
# export it as one bundle to ship with the app.  On the user's machine,
# `milc cache import BUNDLE` (which verifies every byte first) makes the first
# run compile nothing.
#   examples/install-prewarm.sh MANIFEST OUT.bundle [MILC]
set -euo pipefail
manifest=${1:?usage: install-prewarm.sh MANIFEST OUT.bundle [MILC]}
bundle=${2:?usage: install-prewarm.sh MANIFEST OUT.bundle [MILC]}
milc=${3:-$(dirname "$0")/../build/cli/milc}
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
"$milc" --cache-dir "$cache" prewarm "$manifest"
"$milc" --cache-dir "$cache" prewarm "$manifest" -q        # idempotent: compiles nothing
"$milc" --cache-dir "$cache" cache export "$bundle"
"$milc" --cache-dir "$cache" cache stat
echo "bundle: $bundle ($(du -h "$bundle" | cut -f1))"
