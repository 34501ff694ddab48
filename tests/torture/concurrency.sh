#!/usr/bin/env bash
# concurrency.sh MILC — 8 `milc prewarm` processes build the same manifest
# into one cache while other processes run cached programs by key, gc
# (compacting the file under everyone) and verify.  No process may fail, every
# run's outputs must equal the reference bytes, and the cache must end with
# exactly the manifest's keys, each one valid entry.
# Rounds (fresh cache each): $MILC_TORTURE_ROUNDS (default 2, about 20 s).
. "$(dirname "$0")/lib.sh"
ROUNDS=${MILC_TORTURE_ROUNDS:-2}
PREWARMERS=8 RUNS=15 GCS=6
base="--template gpt2 --layers 2 --model_layers 2 --heads 2 --seq 16"
cat > "$WORK/manifest" <<MAN
# same requests as the reference build below
$base --dim 64 --ffn 256 --weights random:1 --mode 0,1,2
$base --dim 128 --ffn 256 --weights random:2 --mode 0,2
$base --dim 128 --ffn 512 --weights random:3 --mode 2 --seq 16,32
$base --dim 192 --ffn 384 --weights random:4 --mode 1,2
MAN
# Reference: each line built alone into a private cache; keys are content
# hashes, so the shared cache must end with exactly these.
R="$WORK/ref"
grep -v '^#' "$WORK/manifest" | while read -r line; do
  # shellcheck disable=SC2086
  "$MILC" --cache-dir "$R" --json build $line
done > "$WORK/ref.json" || { echo "reference build failed" >&2; exit 1; }
"$PY" - "$WORK/ref.json" > "$WORK/keys" <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
    for b in json.loads(line)["builds"]:
        print(b["key"])
PYEOF
sort -u "$WORK/keys" -o "$WORK/keys"
nkeys=$(wc -l < "$WORK/keys")
# Two programs to run by key while the others build: x is [1, dim, 1, 16].
"$PY" -c "import numpy as np; np.random.seed(1); np.save('$WORK/x64.npy', np.random.randn(1,64,1,16).astype('float16'))"
k1=$("$MILC" --cache-dir "$WORK/pre" --json build $base --dim 64 --ffn 256 --weights random:1 --mode 2 | sed 's/.*"key":"\([0-9a-f]*\)".*/\1/')
"$MILC" --cache-dir "$WORK/pre" -q run "$k1" -j 1 --input x="$WORK/x64.npy" -o "$WORK/refout" > /dev/null 2>&1 || { echo "reference run failed" >&2; exit 1; }

ops=0
for round in $(seq 1 "$ROUNDS"); do
  C="$WORK/c$round"
  # Seed the shared cache with the program the runners use.
  "$MILC" --cache-dir "$C" -q build $base --dim 64 --ffn 256 --weights random:1 --mode 2 || fail "seed build"
  pids=() names=()
  for p in $(seq 1 "$PREWARMERS"); do
    "$MILC" --cache-dir "$C" -q prewarm "$WORK/manifest" -j 2 > "$WORK/p$p.out" 2>&1 & pids+=($!); names+=("prewarm $p")
  done
  for r in 1 2; do
    ( for j in $(seq 1 "$RUNS"); do
        o="$WORK/run$round.$r.$j"
        "$MILC" --cache-dir "$C" -q run "$k1" -j 1 --input x="$WORK/x64.npy" -o "$o" || exit 1
        cmp -s "$o/y.npy" "$WORK/refout/y.npy" || { echo "run $j: outputs differ from the reference" >&2; exit 1; }
      done ) > "$WORK/r$r.out" 2>&1 & pids+=($!); names+=("runner $r")
  done
  ( for j in $(seq 1 "$GCS"); do "$MILC" --cache-dir "$C" -q cache gc || exit 1; sleep 0.05; done ) > "$WORK/gc.out" 2>&1 &
  pids+=($!); names+=("gc loop")
  ( for j in $(seq 1 "$GCS"); do "$MILC" --cache-dir "$C" -q cache verify > /dev/null || exit 1; "$MILC" --cache-dir "$C" cache ls > /dev/null || exit 1; done ) > "$WORK/v.out" 2>&1 &
  pids+=($!); names+=("verify/ls loop")
  for idx in "${!pids[@]}"; do
    if wait "${pids[$idx]}"; then ok; else
      fail "round $round: ${names[$idx]} failed: $(tail -3 "$WORK/$(case ${names[$idx]} in prewarm*) echo "p${names[$idx]#prewarm }";; runner*) echo "r${names[$idx]#runner }";; gc*) echo gc;; *) echo v;; esac).out")"
    fi
  done
  grep -lE 'Sanitizer|runtime error' "$WORK"/*.out > /dev/null 2>&1 && fail "round $round: sanitizer report: $(grep -hE 'Sanitizer|runtime error' "$WORK"/*.out | head -3)"
  verify_clean "$C" "round $round"
  m --cache-dir "$C" --json cache ls
  printf '%s' "$OUT" | "$PY" -c "import json,sys; print('\n'.join(e['key'] for e in json.load(sys.stdin)))" > "$WORK/got"
  if [ "$(sort "$WORK/got" | uniq -d)" = "" ] && [ "$(sort -u "$WORK/got")" = "$(cat "$WORK/keys")" ]; then ok
  else fail "round $round: cache keys differ from the manifest's: got $(sort "$WORK/got" | tr '\n' ' '), want $(tr '\n' ' ' < "$WORK/keys")"; fi
  ops=$((ops + PREWARMERS * nkeys + 2 * RUNS + 2 * GCS + GCS))
done
echo "concurrency.sh: $ROUNDS rounds x $((PREWARMERS + 4)) processes; $nkeys keys; $ops milc operations"
finish
