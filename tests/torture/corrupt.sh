#!/usr/bin/env bash
# corrupt.sh MILC — random byte flips and truncation in every file milc
# reads: weight.bin (then check/compile), artifact files (then run), cache
# entry values inside data.mdb (build must rebuild, run KEY must refuse) and
# the LMDB environment file itself.  milc must report a clear error or treat
# the damage as a miss — never crash (exit <= 3, no signal, no sanitizer
# report) and never print outputs computed from damaged bytes.  Export
# bundles with damage must be refused whole.
# Cases per kind: $MILC_TORTURE_CORRUPT (default 15, about 40 s in all).
. "$(dirname "$0")/lib.sh"
N=${MILC_TORTURE_CORRUPT:-15}
cfg=(--template gpt2 --layers 2 --model_layers 2 --dim 64 --heads 2 --ffn 128 --seq 16 --weights random:5 --mode 2)
"$MILC" emit "${cfg[@]}" -o "$WORK/model" > /dev/null 2>&1 || { echo "emit failed" >&2; exit 1; }
"$MILC" compile "$WORK/model/model.mil" --mode 2 -o "$WORK/good.milc" > /dev/null 2>&1 || { echo "compile failed" >&2; exit 1; }
"$PY" -c "import numpy as np; np.random.seed(2); np.save('$WORK/x.npy', np.random.randn(1,64,1,16).astype('float16'))"
"$MILC" run "$WORK/good.milc" -j 1 --input x="$WORK/x.npy" -o "$WORK/ref" > /dev/null 2>&1 || { echo "reference run failed" >&2; exit 1; }
declare -A tally

# damage FILE : flip 1..4 random bytes (half the time in the first 4 KiB,
# where headers live) or truncate at a random length.  Echoes what it did.
damage() {
  local f=$1 size; size=$(stat -c %s "$f")
  if [ "$(rand 4)" = 0 ]; then
    local at; at=$(rand "$size"); truncate -s "$at" "$f"; echo "truncate@$at"; return
  fi
  local k n; n=$((1 + $(rand 4))); local what="flip"
  for k in $(seq 1 $n); do
    local lim=$size; [ "$(rand 2)" = 0 ] && [ "$size" -gt 4096 ] && lim=4096
    local at; at=$(rand "$lim"); flip "$f" "$at" $((1 + $(rand 255))); what="$what@$at"
  done
  echo "$what"
}

# env_damage DATA.MDB SEED : flip 1..3 bits in the pages LMDB uses (the
# file is sparse up to the map size; its meta pages say how far it is used),
# half of them in page headers, or truncate inside the used part.
env_damage() {
  "$PY" - "$1" "$2" <<'PYEOF'
import os, random, struct, sys
p, rnd = sys.argv[1], random.Random(int(sys.argv[2]))
with open(p, 'r+b') as f:
    last = 0
    for m in (0, 1):                    # MDB_meta.mm_last_pg: page header 16 + 120
        f.seek(m * 4096 + 136); last = max(last, struct.unpack('<Q', f.read(8))[0])
    last = min(last, os.path.getsize(p) // 4096 - 1)
    if rnd.random() < 0.15:
        at = rnd.randrange(0, (last + 1) * 4096); f.truncate(at); print('truncate@%d' % at); sys.exit()
    out = []
    for _ in range(rnd.randint(1, 3)):
        pg = rnd.randint(0, last)
        off = pg * 4096 + (rnd.randrange(64) if rnd.random() < 0.5 else rnd.randrange(4096))
        f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ (1 << rnd.randrange(8))])); out.append(str(off))
    print('flip@' + ','.join(out))
PYEOF
}

# same_outputs DIR : every reference output exists in DIR with the same bytes.
same_outputs() {
  local f; for f in "$WORK"/ref/*.npy; do cmp -s "$f" "$1/$(basename "$f")" || return 1; done
}

# 1. weight.bin: check and compile must fail cleanly or succeed.
for i in $(seq 1 "$N"); do
  rm -rf "$WORK/w"; cp -r "$WORK/model" "$WORK/w"
  what=$(damage "$WORK/w/weights/weight.bin")
  m check "$WORK/w/model.mil" && ok
  m compile "$WORK/w/model.mil" --mode 2 -o "$WORK/w.milc" && ok
  tally[weights-rc$RC]=$((${tally[weights-rc$RC]:-0} + 1))
  [ "$RC" = 0 ] || [ "$RC" = 1 ] || [ "$RC" = 3 ] || fail "weights $what: compile exit $RC"
done

# 2. artifact files: run must refuse, or (damage in bytes nothing reads,
# e.g. alignment padding) give exactly the reference outputs.
for i in $(seq 1 "$N"); do
  cp "$WORK/good.milc" "$WORK/bad.milc"
  what=$(damage "$WORK/bad.milc")
  rm -rf "$WORK/out"
  m run "$WORK/bad.milc" -j 1 --input x="$WORK/x.npy" -o "$WORK/out" || continue
  if [ "$RC" = 0 ]; then
    if same_outputs "$WORK/out"; then tally[artifact-ok-same]=$((${tally[artifact-ok-same]:-0} + 1)); ok
    else fail "artifact $what: run succeeded with different outputs"; fi
  else
    tally[artifact-refused-rc$RC]=$((${tally[artifact-refused-rc$RC]:-0} + 1)); ok
  fi
done

# 3. cache entry values: flip bytes of the stored artifact inside data.mdb.
# The bytes are found by searching data.mdb for a window of the artifact file
# (the cache stores the artifact's sections verbatim).
for i in $(seq 1 "$N"); do
  C="$WORK/c"; rm -rf "$C"
  "$MILC" --cache-dir "$C" -q build "${cfg[@]}" > /dev/null || { fail "entry case $i: clean build failed"; continue; }
  key=$("$MILC" --cache-dir "$C" --json cache ls | sed 's/.*"key":"\([0-9a-f]*\)".*/\1/')
  hit=$("$PY" - "$WORK/good.milc" "$C/data.mdb" "$(rand 1000000)" <<'PYEOF'
import random, struct, sys
art = open(sys.argv[1], 'rb').read()
with open(sys.argv[2], 'rb') as f:   # sparse up to the map size: read the used pages only
    head = f.read(8192)
    last = max(struct.unpack('<Q', head[m * 4096 + 136:m * 4096 + 144])[0] for m in (0, 1))
    f.seek(0); db = f.read((last + 1) * 4096)
rnd = random.Random(int(sys.argv[3]))
for _ in range(200):
    o = rnd.randrange(0, len(art) - 32)
    w = art[o:o + 32]
    if len(set(w)) < 8: continue          # zero padding occurs everywhere
    at = db.find(w)
    if at < 0 or db.find(w, at + 1) >= 0: continue
    p = at + rnd.randrange(32)
    with open(sys.argv[2], 'r+b') as f:
        f.seek(p); f.write(bytes([db[p] ^ (1 << rnd.randrange(8))]))
    print(p); break
else:
    print(-1)
PYEOF
)
  if [ "$hit" = -1 ]; then fail "entry case $i: no artifact window found in data.mdb"; continue; fi
  # The window may lie in a page LMDB no longer uses (an earlier copy of a
  # page it rewrote): then nothing of the entry changed, and a hit without a
  # checksum is right.  `cache verify` hashes everything, always: the case
  # counts only when it sees the damage.
  m --cache-dir "$C" cache verify
  if [ "$RC" = 0 ]; then tally[entry-flip-outside-the-entry]=$((${tally[entry-flip-outside-the-entry]:-0} + 1)); ok; continue; fi
  rm -rf "$WORK/out"
  m --cache-dir "$C" run "$key" -j 1 --input x="$WORK/x.npy" -o "$WORK/out"
  if [ "$RC" = 0 ]; then
    if same_outputs "$WORK/out"; then tally[entry-run-undetected-same]=$((${tally[entry-run-undetected-same]:-0} + 1))
      fail "entry flip @$hit: run KEY served a damaged entry (outputs happen to match)"
    else fail "entry flip @$hit: run KEY ran damaged bytes and printed different outputs"; fi
  elif [ "$RC" -le 3 ]; then tally[entry-run-refused-rc$RC]=$((${tally[entry-run-refused-rc$RC]:-0} + 1)); ok; fi
  m --cache-dir "$C" --json build "${cfg[@]}"
  if [ "$RC" = 0 ] && printf '%s' "$OUT" | grep -q '"outcome":"miss"'; then ok; tally[entry-build-rebuilt]=$((${tally[entry-build-rebuilt]:-0} + 1))
  else fail "entry flip @$hit: build did not rebuild (exit $RC): $OUT $ERR"; fi
  verify_clean "$C" "entry flip @$hit, after the rebuild"
  rm -rf "$WORK/out"
  m --cache-dir "$C" run "$key" -j 1 --input x="$WORK/x.npy" -o "$WORK/out"
  if [ "$RC" = 0 ] && same_outputs "$WORK/out"; then ok; else fail "entry flip @$hit: run after the rebuild: exit $RC $ERR"; fi
done

# 4. the environment file: anything may break, but only cleanly; and
# `milc cache clear` must always bring the directory back.
for i in $(seq 1 "$N"); do
  C="$WORK/e"; rm -rf "$C"
  "$MILC" --cache-dir "$C" -q build "${cfg[@]}" > /dev/null || { fail "env case $i: clean build failed"; continue; }
  "$MILC" --cache-dir "$C" -q build "${cfg[@]}" --weights random:6 > /dev/null
  what=$(env_damage "$C/data.mdb" "$i$RANDOM")
  m --cache-dir "$C" cache verify; r1=$RC
  m --cache-dir "$C" -q build "${cfg[@]}"; r2=$RC
  rm -rf "$WORK/out"
  m --cache-dir "$C" run "$key" -j 1 --input x="$WORK/x.npy" -o "$WORK/out"; r3=$RC
  if [ "$r3" = 0 ] && ! same_outputs "$WORK/out"; then fail "env $what: run KEY printed outputs that differ from the reference"; fi
  tally[env-verify$r1-build$r2-run$r3]=$((${tally[env-verify$r1-build$r2-run$r3]:-0} + 1))
  m --cache-dir "$C" cache clear
  m --cache-dir "$C" -q build "${cfg[@]}"
  if [ "$RC" = 0 ]; then ok; else fail "env $what: build after 'cache clear' failed: exit $RC $ERR"; fi
done

# 5. export bundles: a damaged bundle must be refused whole, the importing
# cache left as it was.
B="$WORK/b"; rm -rf "$B"
"$MILC" --cache-dir "$B" -q build "${cfg[@]}" > /dev/null 2>&1 && "$MILC" --cache-dir "$B" cache export "$WORK/good.bndl" > /dev/null 2>&1 \
  || fail "bundle export failed"
for i in $(seq 1 "$N"); do
  cp "$WORK/good.bndl" "$WORK/bad.bndl"
  what=$(damage "$WORK/bad.bndl")
  I="$WORK/imp"; rm -rf "$I"
  "$MILC" --cache-dir "$I" -q build "${cfg[@]}" --weights random:6 > /dev/null 2>&1
  m --cache-dir "$I" cache import "$WORK/bad.bndl"
  if [ "$RC" = 0 ]; then fail "bundle $what: import accepted a damaged bundle"
  else tally[bundle-refused-rc$RC]=$((${tally[bundle-refused-rc$RC]:-0} + 1)); ok; fi
  m --cache-dir "$I" --json cache ls
  n=$(printf '%s' "$OUT" | "$PY" -c "import json,sys; print(len(json.load(sys.stdin)))")
  [ "$n" = 1 ] && ok || fail "bundle $what: the importing cache has $n entries, want its 1"
  verify_clean "$I" "bundle $what"
done

for k in $(printf '%s\n' "${!tally[@]}" | sort); do echo "  $k: ${tally[$k]}"; done
finish
