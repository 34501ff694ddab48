#!/usr/bin/env bash
# Formats every C source and header of the project with its .clang-format
# (Debian's clang-format); --check lists the files that differ and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.c' '*.h' | grep -v '^tests/fuzz/corpus/')
if [ "${1:-}" = --check ]; then
  bad=0
  for f in "${files[@]}"; do
    clang-format "$f" | cmp -s - "$f" || { echo "$f"; bad=1; }
  done
  exit $bad
fi
clang-format -i "${files[@]}"
