#!/bin/bash
# memory.sh — accepted inputs under a memory cap: each either succeeds or
# fails cleanly (exit 1 or 3, a message naming the limit), and what is
# refused is refused before the memory is asked for.  The cap is `ulimit -v`
# (milc's default --max-memory is half of it); a sanitizer build, which
# needs terabytes of address space for its shadow, gets --max-memory alone.
. "$(dirname "$0")/lib.sh"
cd "$WORK" || exit 2
CAP_KB=3000000 # ~2.9 GiB of address space: default --max-memory ~1.4 GiB
SAN=0
grep -qE "__asan_init|AddressSanitizer" "$MILC" && SAN=1

# capped ARGS... : milc under the cap (or, sanitized, with --max-memory
# as the cap would give it); $RC, $OUT, $ERR as m() sets them.
capped() {
  if [ $SAN = 1 ]; then m --max-memory 1464M "$@"; return; fi
  ( ulimit -v $CAP_KB; exec "$MILC" "$@" ) > .out 2> .err
  RC=$?
  OUT=$(cat .out)
  ERR=$(cat .err)
  no_crash "capped milc $*"
}

# peak_kb ARGS... : the peak RSS of a milc run, in KB (uncapped).
peak_kb() { /usr/bin/time -f "%M" -o .rss "$MILC" "$@" > /dev/null 2>&1; tail -1 .rss; }

clean_refusal() { # WHAT WORD : exit 1 and a message with WORD
  if [ "$RC" = 1 ] && printf '%s' "$ERR" | grep -q -- "$2"; then ok; else fail "$1: exit $RC, want 1 with '$2': $ERR"; fi
}

# A 2 KB artifact whose arena is 4 GiB (two [4194304, 128] fp32 temps).
cat > big.mil <<'EOF'
program(1.3)
{
    func main<ios18>(tensor<fp32, [1, 128]> x) {
        tensor<int32, [2]> r = const()[name = string("r"), val = tensor<int32, [2]>([4194304, 1])];
        tensor<fp32, [4194304, 128]> t = tile(x = x, reps = r)[name = string("t")];
        tensor<fp32, [4194304, 128]> u = add(x = t, y = t)[name = string("u")];
        tensor<int32, [1]> ax = const()[name = string("ax"), val = tensor<int32, [1]>([0])];
        tensor<fp32, [1, 128]> y = reduce_sum(x = u, axes = ax, keep_dims = bool(true))[name = string("y")];
    } -> (y);
}
EOF
m compile big.mil -o big.milc
[ "$RC" = 0 ] || { fail "compile big.mil: $ERR"; finish; }
"$PY" -c "import numpy as np; np.save('bad.npy', np.zeros((1, 64), np.float64)); np.save('x.npy', np.ones((1, 128), np.float32))"

# A wrong input is refused before the arena exists: quickly, in little memory.
capped run big.milc --input x=bad.npy -o o
clean_refusal "wrong-shaped input" "wants shape \[1, 128\]"
if [ $SAN = 0 ]; then
  kb=$(peak_kb run big.milc --input x=bad.npy -o o)
  if [ "$kb" -lt 100000 ]; then ok; else fail "refusing a 512-byte input peaked at $kb KB"; fi
fi
# The right input: the 4 GiB arena is over the limit, and said so.
capped run big.milc --input x=x.npy -o o
clean_refusal "4 GiB arena" "max-memory"
m --max-memory 64M run big.milc --input x=x.npy -o o
clean_refusal "4 GiB arena, --max-memory 64M" "the limit of 67108864"
m --max-memory 64Q run big.milc --input x=x.npy -o o
if [ "$RC" = 2 ]; then ok; else fail "--max-memory 64Q: exit $RC"; fi

# build: a seq inside the template's range whose mask alone is 2 or 8 GiB
# (a build holds its weights in memory, as the artifact).
for seq in 32768 65536; do
  capped --cache-dir c build --model tiny --seq $seq
  clean_refusal "build --seq $seq" "max-memory"
done
# emit streams its weights to the file: a 288 MiB mask (--seq 12288) in
# 100 MB of address space, in a few MB of RSS.
if [ $SAN = 0 ]; then
  ( ulimit -v 100000; exec "$MILC" emit --model tiny --seq 12288 -o e12288 ) > .out 2> .err
  RC=$? ERR=$(cat .err)
  no_crash "emit --seq 12288 in 100 MB"
  [ "$RC" = 0 ] && [ "$(stat -c %s e12288/weights/weight.bin)" -gt 302000000 ] && ok \
    || fail "emit --seq 12288 in 100 MB: exit $RC: $ERR"
  kb=$(peak_kb emit --model tiny --seq 12288 -o e12288)
  if [ "$kb" -lt 60000 ]; then ok; else fail "emit of a 288 MiB mask peaked at $kb KB"; fi
  rm -rf e12288
fi
# --seq 65536 (an 8 GiB mask) into a 20 MiB tmpfs: the disk fills, not the
# memory; a clean ENOSPC and no weight file.
mkdir -p small
if mount -t tmpfs -o size=20m tmpfs small 2> /dev/null; then
  capped emit --model tiny --seq 65536 -o small/e
  if [ "$RC" = 3 ] && printf '%s' "$ERR" | grep -q "No space left on device"; then ok
  else fail "emit --seq 65536 into 20 MiB: exit $RC: $ERR"; fi
  [ ! -e small/e/weights/weight.bin ] && [ ! -e small/e/model.mil ] && ok || fail "emit --seq 65536 left files"
  [ -z "$(ls small/e/weights 2> /dev/null)" ] && ok || fail "emit --seq 65536 left a temp file: $(ls small/e/weights)"
  umount small
else
  echo "memory.sh: cannot mount a tmpfs here (not root?): the 8 GiB emit is skipped"
fi
# A template run into more text than the limit allows (1000 layers).
m --max-memory 64M emit --model tiny --layers 1000 --model-layers 1000 -o many
clean_refusal "1000 layers under 64M" "bytes of MIL"
if [ $SAN = 0 ]; then
  kb=$(peak_kb --max-memory 64M emit --model tiny --layers 1000 --model-layers 1000 -o many)
  if [ "$kb" -lt 200000 ]; then ok; else fail "refusing 1000 layers peaked at $kb KB"; fi
fi

# What fits still works under the cap.
capped emit --model tiny -o tiny
[ "$RC" = 0 ] && ok || fail "emit tiny under the cap: exit $RC: $ERR"
"$PY" -c "import numpy as np; np.save('t.npy', np.zeros((1, 128, 1, 32), np.float16))"
capped --cache-dir c run --model tiny --input x=t.npy -o to
[ "$RC" = 0 ] && [ -s to/y.npy ] && ok || fail "run tiny under the cap: exit $RC: $ERR"
capped --cache-dir c build --model tiny --mode 0,1,2
[ "$RC" = 0 ] && ok || fail "build tiny under the cap: exit $RC: $ERR"

# A cold build that stores one program while it makes the next (-j 2) holds
# the two to one program's memory: its peak is -j 1's, give or take the
# budget's slack, not a second program's (three programs of 232 MiB).
if [ $SAN = 0 ]; then
  LB=(build --model llama-3.2-1b --chunk 2 --model-layers 6 --layers 6)
  rm -rf lc; "$MILC" --cache-dir lc "${LB[@]}" -j 1 --json > lb.json 2> .err || fail "llama build: $(cat .err)"
  big=$("$PY" -c "import json; print(max(b['artifact_bytes'] for b in json.load(open('lb.json'))['builds']) // 1024)")
  rm -rf lc; k1=$(peak_kb --cache-dir lc "${LB[@]}" -j 1)
  rm -rf lc; k2=$(peak_kb --cache-dir lc "${LB[@]}" -j 2)
  rm -rf lc
  if [ "$k2" -le $((k1 + big / 10)) ]; then ok; else fail "-j 2 peaked at $k2 KB, -j 1 at $k1 KB (programs of $big KB)"; fi
fi
finish
