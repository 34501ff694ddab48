#!/usr/bin/env bash
# fsplant.sh MILC — symlinks, FIFOs and foreign permissions planted in every
# directory milc reads or writes: the cache directory (issue #14, item 2),
# inputs and weight paths (item 6), output directories (item 4).  A planted
# link must never be followed to write its target, a FIFO must never block
# (every command runs under a timeout), and each refusal names the right file.
. "$(dirname "$0")/lib.sh"
BAIT="$WORK/bait"
printf 'precious\n' > "$BAIT"

# t SECS ARGS... : m under a timeout; a hang (124) is a failure of its own.
t() {
  local secs=$1; shift
  timeout "$secs" "$MILC" "$@" > "$WORK/.out" 2> "$WORK/.err"
  RC=$?
  OUT=$(cat "$WORK/.out"); ERR=$(cat "$WORK/.err")
  if [ "$RC" = 124 ]; then fail "milc $* hangs (killed after ${secs}s)"; return 1; fi
  no_crash "milc $*"
}
# want CODE PATTERN WHAT : the last command exited CODE with PATTERN in stderr.
want() {
  if [[ $RC =~ ^($1)$ ]] && { [ -z "$2" ] || printf '%s' "$ERR" | grep -qE -- "$2"; }; then ok
  else fail "$3: exit $RC, want $1 and /$2/; stderr: $(printf '%s' "$ERR" | head -3)"; fi
}
bait_intact() {
  if [ "$(cat "$BAIT" 2>/dev/null)" = precious ]; then ok; else fail "$1: the link target was written"; fi
  printf 'precious\n' > "$BAIT"
}
fresh() { rm -rf "$WORK/c"; mkdir -m 700 "$WORK/c"; }

# --- the cache directory (item 2) -----------------------------------------
for f in lock.mdb data.mdb milc.lock milc.stamp; do
  fresh; ln -s "$BAIT" "$WORK/c/$f"
  t 20 --cache-dir "$WORK/c" cache ls; want 3 "c/$f is a symbolic link" "link $f -> file"
  bait_intact "cache ls with $f -> file"
  fresh; ln -s "$WORK/nowhere-$f" "$WORK/c/$f"
  t 20 --cache-dir "$WORK/c" cache ls; want 3 "c/$f is a symbolic link" "dangling link $f"
  [ -e "$WORK/nowhere-$f" ] && fail "a dangling $f link created its target" || ok
  fresh; mkfifo "$WORK/c/$f"
  t 20 --cache-dir "$WORK/c" cache stat; want 3 "c/$f is a FIFO" "FIFO $f"
done
# The compaction target: a planted link is replaced, never written through.
fresh; t 20 --cache-dir "$WORK/c" cache ls; ln -s "$BAIT" "$WORK/c/data.mdb.compact"
t 60 --cache-dir "$WORK/c" cache gc; want 0 "" "gc with data.mdb.compact -> file"
bait_intact "gc with data.mdb.compact -> file"
[ -f "$WORK/c/data.mdb" ] && [ ! -L "$WORK/c/data.mdb" ] && ok || fail "gc left data.mdb not a regular file"
t 20 --cache-dir "$WORK/c" cache ls; want 0 "" "cache after gc over a planted compaction link"
# A directory others can write to, or owned by someone else, is refused.
fresh; chmod 0777 "$WORK/c"
t 20 --cache-dir "$WORK/c" cache ls; want 3 "writable by other users.*chmod go-w" "0777 cache directory"
chmod 0770 "$WORK/c"
t 20 --cache-dir "$WORK/c" cache ls; want 3 "writable by its group" "0770 cache directory"
if [ "$(id -u)" = 0 ]; then
  fresh; chown 65534 "$WORK/c"
  t 20 --cache-dir "$WORK/c" cache ls; want 3 "owned by uid 65534, not by you" "cache directory of another user"
fi

# --- FIFOs and links as inputs (item 6): refused at once, never waited on --
mkfifo "$WORK/fifo"; mkdir -p "$WORK/tpl"; mkfifo "$WORK/tpl/x.xml"
export MILC_CACHE_DIR="$WORK/cache"
for args in "check F" "fmt F" "compile F -o $WORK/o.milc" "prewarm F" "cache import F" "run F" \
            "build --model tiny --weights F" "run --model tiny --weights F --input x=F" "emit --model tiny --weights F -o $WORK/e"; do
  # shellcheck disable=SC2086
  t 20 ${args//F/$WORK/fifo}; want "1|3" "fifo.*not a regular file" "$args with a FIFO"
done
printf -- '--model tiny --weights %s\n' "$WORK/fifo" > "$WORK/man"
t 20 prewarm "$WORK/man"; want "1|3" "fifo.*not a regular file" "prewarm of a FIFO weight source"
t 20 --template-dir "$WORK/tpl" templates ls; want 0 "x.xml is a FIFO" "templates ls with a FIFO .xml"

# --- output directories (item 4): links planted at the fixed temp names of
# old and at the targets themselves are replaced, never written through ----
E=(--template gpt2 --layers 1 --model_layers 1 --dim 16 --heads 2 --ffn 32 --seq 16)
rm -rf "$WORK/e"; mkdir -p "$WORK/e/weights"
for f in model.mil.tmp manifest.json.tmp model.mil manifest.json weights/weight.bin; do ln -s "$BAIT" "$WORK/e/$f"; done
t 60 emit "${E[@]}" -o "$WORK/e"; want 0 "" "emit over planted links"
bait_intact "emit -o with planted links"
for f in model.mil manifest.json weights/weight.bin; do
  [ -f "$WORK/e/$f" ] && [ ! -L "$WORK/e/$f" ] && ok || fail "emit left $f a link or missing"
done
rm -rf "$WORK/e2"; mkdir -p "$WORK/e2" "$WORK/elsewhere"; ln -s "$WORK/elsewhere" "$WORK/e2/weights"
t 60 emit "${E[@]}" -o "$WORK/e2"; want 3 "weights is a symbolic link, not a directory" "emit with DIR/weights a link"
[ -z "$(ls -A "$WORK/elsewhere")" ] && ok || fail "emit wrote weight.bin through a weights link"
ln -s "$BAIT" "$WORK/o.milc"
t 60 compile "$WORK/e/model.mil" -o "$WORK/o.milc"; want 0 "" "compile -o over a link"
bait_intact "compile -o over a link"
[ -f "$WORK/o.milc" ] && [ ! -L "$WORK/o.milc" ] && ok || fail "compile -o left the link in place"
# run -o: an output name planted as a link is replaced, not written through.
"$PY" -c "import numpy as np; np.save('$WORK/x.npy', np.zeros((1, 16, 1, 16), np.float32))"
mkdir -p "$WORK/out"; for n in y y.npy hidden.npy; do ln -s "$BAIT" "$WORK/out/$n"; done
t 60 run "$WORK/o.milc" --input x="$WORK/x.npy" -o "$WORK/out"; want 0 "" "run -o over planted links"
bait_intact "run -o with planted links"
[ -n "$(find "$WORK/out" -name '*.npy' -type f)" ] && ok || fail "run -o wrote no regular output file"
# A template directory with a link to a FIFO and a dangling link: listed past, never blocked on.
mkdir -p "$WORK/tpl2"; mkfifo "$WORK/tpl2/f"; ln -s "$WORK/tpl2/f" "$WORK/tpl2/y.xml"; ln -s "$WORK/nowhere" "$WORK/tpl2/z.xml"
t 20 --template-dir "$WORK/tpl2" templates ls; want 0 "y.xml" "templates ls with a link to a FIFO"
rm -f "$WORK/e/model.mil.tmp" "$WORK/e/manifest.json.tmp"
ls -A "$WORK/e" "$WORK/e/weights" "$WORK" | grep -q '\.tmp-' && fail "temp files left behind" || ok
unset MILC_CACHE_DIR
finish
