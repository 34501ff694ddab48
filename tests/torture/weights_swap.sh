#!/bin/bash
# weights_swap.sh — a checkpoint replaced (by an atomic rename, as checkpoint
# writers do) while milc builds from it.  Whatever each build compiled, every
# key it stored must name the weights that were compiled: after the swapping
# stops, each checkpoint put back at the path must run to exactly the outputs
# a quiet cache gives for it, through `milc run` (direct key) and through
# `milc build`'s request note.  MILC_TORTURE_SWAPS sets the rounds (default 3).
. "$(dirname "$0")/lib.sh"
cd "$WORK" || exit 2
ROUNDS=${MILC_TORTURE_SWAPS:-3}
NW=3

# Three tiny GPT-2 checkpoints (Hugging Face names), and an input.
"$PY" - "$NW" <<'PYEOF' || exit 2
import json, struct, sys
import numpy as np
def write_st(path, t):
    header, blobs, off = {}, [], 0
    for name, a in t.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
D, F = 128, 256
for k in range(int(sys.argv[1])):
    rng = np.random.default_rng(100 + k)
    r = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float32)
    t = {}
    for i in range(2):
        p = f"transformer.h.{i}."
        t[p + "ln_1.weight"], t[p + "ln_1.bias"] = r(D) + 1, r(D)
        t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"] = r(D, 3 * D), r(3 * D)
        t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = r(D, D), r(D)
        t[p + "ln_2.weight"], t[p + "ln_2.bias"] = r(D) + 1, r(D)
        t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = r(D, F), r(F)
        t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = r(F, D), r(D)
    write_st(f"w{k}.safetensors", t)
np.save("x.npy", (np.random.RandomState(0).randn(1, 128, 1, 32) * 0.5).astype(np.float16))
PYEOF

# The swapper: hard-links the next checkpoint to a temp name and renames it
# over w.safetensors, over and over, until killed.
cat > swap.py <<'PYEOF'
import os, sys, time
n, k = int(sys.argv[1]), 0
while True:
    k = (k + 1) % n
    os.link(f"w{k}.safetensors", "w.tmp")
    os.rename("w.tmp", "w.safetensors")
    time.sleep(0.0002)
PYEOF

# Reference outputs: each checkpoint alone, in its own quiet cache, per mode.
for k in $(seq 0 $((NW - 1))); do
  for mode in 0 1 2; do
    m --cache-dir ref run --model tiny --mode $mode --threads 1 --weights "$PWD/w$k.safetensors" --input x=x.npy -o ref$k-$mode
    [ "$RC" = 0 ] && [ -s ref$k-$mode/y.npy ] || { fail "reference $k mode $mode: exit $RC: $ERR"; finish; }
  done
done

# same OUT MODE WHAT : OUT/y.npy equals the reference of the checkpoint at the path.
same() {
  if cmp -s "$1/y.npy" "ref$K-$2/y.npy"; then ok; else fail "$3: checkpoint w$K served another checkpoint's outputs"; fi
}

# check_build CACHE : with w$K at the path, the direct key (`milc run` by
# options) and the request note (`milc build`'s keys) both give w$K's outputs.
check_build() {
  local C=$1 o=$1-$K keys mk
  m --cache-dir $C run --model tiny --mode 2 --threads 1 --weights "$PWD/w.safetensors" --input x=x.npy -o run-$o
  if [ "$RC" = 0 ]; then same run-$o 2 "$C: run by options (direct key)"; else fail "$C: run w$K: exit $RC: $ERR"; fi
  m --cache-dir $C --json build --model tiny --mode 0,1,2 --weights "$PWD/w.safetensors"
  # "mode N" -> "N:KEY", in the build's order
  keys=$(printf '%s' "$OUT" | "$PY" -c "import json,sys; print(' '.join(b['chunk'][5:] + ':' + b['key'] for b in json.load(sys.stdin)['builds']))" 2>/dev/null)
  [ -n "$keys" ] || { fail "$C: build w$K: exit $RC: $OUT $ERR"; return; }
  for mk in $keys; do
    m --cache-dir $C run "${mk#*:}" --threads 1 --input x=x.npy -o note-$o-${mk%%:*}
    if [ "$RC" = 0 ]; then same note-$o-${mk%%:*} ${mk%%:*} "$C: build's key $mk"; else fail "$C: run $mk: exit $RC: $ERR"; fi
  done
}

for round in $(seq 1 "$ROUNDS"); do
  C=c$round
  cp w0.safetensors w.safetensors
  "$PY" swap.py "$NW" & SW=$!
  # A miss for every program: build (request note + direct keys, three modes)
  # and run (direct key), both reading the checkpoint while it is replaced.
  m --cache-dir $C build --model tiny --mode 0,1,2 --weights "$PWD/w.safetensors"
  m --cache-dir $C run --model tiny --mode 2 --threads 1 --weights "$PWD/w.safetensors" --input x=x.npy -o o
  # prewarm's workers build the jobs, and the parent writes the line's note
  echo "--model tiny --mode 0,1,2 --weights $PWD/w.safetensors" > p.manifest
  m --cache-dir p$C prewarm p.manifest -j 2
  kill $SW; wait $SW 2>/dev/null
  # Killed between its link and its rename, the swapper leaves w.tmp as a hard
  # link to one of the checkpoints: copying over it would rewrite that
  # checkpoint's own bytes, so it goes, and the checks put files back through
  # a name of their own.
  rm -f w.tmp
  for K in $(seq 0 $((NW - 1))); do
    cp w$K.safetensors w.put && mv w.put w.safetensors
    check_build $C
    check_build p$C
  done
  verify_clean $C "round $round"
  verify_clean p$C "round $round (prewarm)"
done
finish

