#!/usr/bin/env bash
# One round of the GPT-2 benchmark: its figures are not checked, only that it
# runs to the end and prints all four (so its code runs under the sanitizers).
set -euo pipefail
bench=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
if ! "$bench" "$d" 2 1 > "$d/out"; then
    cat "$d/out"
    exit 1
fi
for f in 1 2 3 4; do
    grep -q "^$f\. " "$d/out" || { echo "figure $f missing:"; cat "$d/out"; exit 1; }
done
