#!/usr/bin/env bash
# truncate.sh MILC — files cut short while milc reads them (issue #14, item
# 5): a bundle during `cache import`, an artifact during `run x.milc`, the
# weight file during `compile`, an input during `run`.  Each read must end in
# success or a clean error (exit 1 or 3), never a SIGBUS (exit 135).  Each
# target runs for $MILC_TORTURE_TRUNC_SECS seconds (default 4).
. "$(dirname "$0")/lib.sh"
SECS=${MILC_TORTURE_TRUNC_SECS:-4}
export MILC_CACHE_DIR="$WORK/cache"
"$MILC" emit --template gpt2 --layers 2 --model_layers 2 --dim 256 --heads 4 --ffn 1024 --seq 16 -o "$WORK/m" > /dev/null 2>&1 \
  || { echo "emit failed" >&2; exit 1; }
"$MILC" compile "$WORK/m/model.mil" -o "$WORK/a.milc" > /dev/null 2>&1 || { echo "compile failed" >&2; exit 1; }
"$MILC" build --template gpt2 --layers 2 --model_layers 2 --dim 256 --heads 4 --ffn 1024 --seq 16 > /dev/null 2>&1 \
  && "$MILC" cache export "$WORK/b.bundle" > /dev/null 2>&1 || { echo "export failed" >&2; exit 1; }
"$PY" -c "import numpy as np; np.save('$WORK/x.npy', np.random.rand(1, 16, 256).astype(np.float32))"

# hammer FILE SECS ARGS... : truncate FILE to a random length and write it
# back, over and over, while milc ARGS runs again and again for SECS seconds.
hammer() {
  local f=$1 secs=$2; shift 2
  cp "$f" "$f.orig"
  local size; size=$(stat -c %s "$f")
  ( end=$((SECONDS + secs + 1))
    while [ $SECONDS -lt $end ]; do truncate -s $(( (RANDOM * 32768 + RANDOM) % size )) "$f"; cat "$f.orig" > "$f"; done ) &
  local cutter=$! runs=0 crashes=0 end=$((SECONDS + secs))
  while [ $SECONDS -lt $end ]; do
    "$MILC" "$@" > /dev/null 2> "$WORK/.err"; RC=$?
    runs=$((runs + 1))
    [ "$RC" -gt 3 ] && crashes=$((crashes + 1)) && LAST="exit $RC: $(tail -2 "$WORK/.err")"
  done
  wait "$cutter"
  cp "$f.orig" "$f"
  if [ "$crashes" = 0 ]; then ok; else fail "milc $* with $(basename "$f") truncated meanwhile: $crashes of $runs runs crashed ($LAST)"; fi
}
hammer "$WORK/b.bundle" "$SECS" --cache-dir "$WORK/c2" cache import "$WORK/b.bundle"
hammer "$WORK/a.milc" "$SECS" run "$WORK/a.milc" --input x="$WORK/x.npy" -o "$WORK/out"
hammer "$WORK/m/weights/weight.bin" "$SECS" compile "$WORK/m/model.mil" -o "$WORK/a2.milc"
hammer "$WORK/x.npy" "$SECS" run "$WORK/a.milc" --input x="$WORK/x.npy" -o "$WORK/out"
finish
