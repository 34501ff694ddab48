#!/usr/bin/env bash
# limits.sh MILC — resource limits: a full disk (a 20 MiB tmpfs; skipped
# when mounting is not permitted) under build, emit, compile and run, and a
# cache size limit smaller than one artifact.  Each must end in a clean
# error (exit 1 or 3 with a message naming the cause) or success, and the
# cache must still verify afterwards.  About 5 s.
. "$(dirname "$0")/lib.sh"
big=(--template gpt2 --layers 2 --model_layers 2 --dim 768 --heads 12 --ffn 3072 --seq 16)  # 27 MB
small=(--template gpt2 --layers 2 --model_layers 2 --dim 64 --heads 2 --ffn 128 --seq 16)
"$MILC" emit "${small[@]}" -o "$WORK/model" > /dev/null 2>&1 || { echo "emit failed" >&2; exit 1; }
"$MILC" compile "$WORK/model/model.mil" -o "$WORK/a.milc" > /dev/null 2>&1 || { echo "compile failed" >&2; exit 1; }
"$PY" -c "import numpy as np; np.save('$WORK/x.npy', np.zeros((1,64,1,16), np.float16))"

# expect_clean_error WHAT : $RC is 3 (a system failure, not bad input) and
# stderr names the cause.
expect_clean_error() {
  if [ "$RC" = 3 ] && printf '%s' "$ERR" | grep -qiE 'no space|too large|input/output|full'; then ok
  else fail "$1: exit $RC, want a clean error naming the cause; stderr: $ERR"; fi
}

D="$WORK/mnt"; mkdir -p "$D"
if mount -t tmpfs -o size=20m tmpfs "$D" 2> /dev/null; then
  trap 'umount "$D" 2> /dev/null; rm -rf "$WORK"' EXIT
  C="$D/cache"
  m --cache-dir "$C" build "${big[@]}"; expect_clean_error "build of a 27 MB chunk into 20 MiB"
  verify_clean "$C" "after the failed big build"
  # Fill the disk, then store into the cache: LMDB must fail cleanly.
  m --cache-dir "$C" -q build "${small[@]}" --weights random:1
  [ "$RC" = 0 ] && ok || fail "small build with free space: exit $RC $ERR"
  dd if=/dev/zero of="$D/fill" bs=64k > /dev/null 2>&1
  for s in 2 3 4; do
    m --cache-dir "$C" build "${small[@]}" --weights random:$s; expect_clean_error "build $s on a full disk"
  done
  # verify without --repair only reads, so it works on a full disk (it
  # used to open a write transaction, which reserves disk first).
  m --cache-dir "$C" --json cache verify
  if [ "$RC" = 0 ] && printf '%s' "$OUT" | grep -q '"bad":0'; then ok
  else fail "cache verify on a full disk: exit $RC: $OUT $ERR"; fi
  m --cache-dir "$C" -q build "${small[@]}" --weights random:1
  [ "$RC" = 0 ] && ok || fail "cached build on a full disk (a hit needs no space): exit $RC $ERR"
  m --cache-dir "$C" --json cache ls
  key=$(printf '%s' "$OUT" | sed 's/.*"key":"\([0-9a-f]*\)".*/\1/')
  m --cache-dir "$C" run "$key" --input x="$WORK/x.npy" -o "$WORK/out"
  [ "$RC" = 0 ] && ok || fail "run KEY on a full disk (reads only): exit $RC $ERR"
  m emit "${small[@]}" -o "$D/em"; expect_clean_error "emit on a full disk"
  m compile "$WORK/model/model.mil" -o "$D/x.milc"; expect_clean_error "compile -o on a full disk"
  [ -e "$D/x.milc" ] && fail "compile left a partial x.milc on a full disk" || ok
  m run "$WORK/a.milc" --input x="$WORK/x.npy" -o "$D/out"; expect_clean_error "run -o on a full disk"
  ls "$D"/out/*.npy > /dev/null 2>&1 && fail "run left partial .npy files on a full disk" || ok
  rm -f "$D/fill"
  m --cache-dir "$C" -q build "${small[@]}" --weights random:2
  [ "$RC" = 0 ] && ok || fail "build after freeing the disk: exit $RC $ERR"
  verify_clean "$C" "after freeing the disk"
  umount "$D"
else
  echo "limits.sh: cannot mount a tmpfs here (not root?): full-disk cases skipped"
fi

# A size limit smaller than one artifact: the put keeps the new entry (it
# never evicts what it stores) and the next put evicts it; nothing fails.
C="$WORK/lim"
m --cache-dir "$C" cache stat --set-limit 10K
[ "$RC" = 0 ] && ok || fail "set-limit: exit $RC $ERR"
for s in 1 2 3; do
  m --cache-dir "$C" -q build "${small[@]}" --weights random:$s
  [ "$RC" = 0 ] && ok || fail "build $s over the size limit: exit $RC $ERR"
  m --cache-dir "$C" --json cache ls
  n=$(printf '%s' "$OUT" | "$PY" -c "import json,sys; print(len(json.load(sys.stdin)))")
  [ "$n" = 1 ] && ok || fail "after build $s over the limit: $n entries, want 1 (the newest)"
done
verify_clean "$C" "size limit"
m --cache-dir "$C" cache gc --max-size 1
[ "$RC" = 0 ] && ok || fail "gc --max-size 1: exit $RC $ERR"
verify_clean "$C" "after gc to 1 byte"
finish
