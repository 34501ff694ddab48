#!/usr/bin/env bash
# build --packages: the packages milc leaves beside the cache are ones
# coremltools loads (its protobuf reader, then every op through its own op
# definitions and type inference): a layer chunk and the LM head of the tiny
# whole model.  Skipped (77) without the oracle unless CI=true.
# usage: build_packages.sh MILC ORACLE_DIR WORK
set -euo pipefail
MILC=$1 ORACLE=$2 WORK=$3
source "$(dirname "$0")/oracle_env.sh"
rm -rf "$WORK"; mkdir -p "$WORK"; cd "$WORK"
export MILC_CACHE_DIR="$WORK/cache"
"$MILC" --json build --model tiny --chunk 1 --whole --packages pk > build.json
for part in "layers 1-1" head; do
  pkg=$(/usr/bin/python3 -c "import json,sys; print([p['path'] for p in json.load(open('build.json'))['packages'] if p['chunk'] == sys.argv[1]][0])" "$part")
  /usr/bin/python3 "$ORACLE/oracle.py" load "$pkg" > loaded.txt
  grep -q 'main\[CoreML' loaded.txt
done
echo ok
