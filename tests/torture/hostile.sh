#!/usr/bin/env bash
# hostile.sh MILC — inputs written to escape: BLOBFILE paths that leave the
# model directory (.., absolute, symlinked file or directory, a FIFO),
# template and block names that leave the template directory (.., absolute,
# symlinks, XML external entities, entity bombs), and random manifests fed
# to `milc prewarm`.  Each must be refused with a diagnostic (exit 1) and
# never read the outside file.  Random manifests: $MILC_TORTURE_MANIFESTS
# (default 150, about 15 s).
. "$(dirname "$0")/lib.sh"
NMAN=${MILC_TORTURE_MANIFESTS:-150}
SECRET="$WORK/outside"; mkdir -p "$SECRET"
"$MILC" emit --template gpt2 --layers 1 --model_layers 1 --dim 16 --heads 2 --ffn 32 --seq 16 -o "$WORK/good" > /dev/null 2>&1 \
  || { echo "emit failed" >&2; exit 1; }
cp "$WORK/good/weights/weight.bin" "$SECRET/weight.bin"

# expect_refused WHAT : exit 1 with a diagnostic mentioning PATTERN ($2).
expect_refused() {
  if [ "$RC" = 1 ] && printf '%s' "$ERR" | grep -qiE "$2"; then ok
  else fail "$1: exit $RC, want 1 and /$2/; stderr: $(printf '%s' "$ERR" | head -3)"; fi
}

# --- BLOBFILE paths -----------------------------------------------------
# model DIR SED : a copy of the good model with its BLOBFILE paths rewritten.
model() {
  rm -rf "$WORK/$1"; mkdir -p "$WORK/$1"
  sed "s#@model_path/weights/weight.bin#$2#g" "$WORK/good/model.mil" > "$WORK/$1/model.mil"
}
model dotdot "@model_path/../outside/weight.bin"
model dotdot2 "@model_path/weights/../../outside/weight.bin"
model abs "$SECRET/weight.bin"
model absmp "@model_path/$SECRET/weight.bin"
for t in dotdot dotdot2 abs absmp; do
  m check "$WORK/$t/model.mil"; expect_refused "check, BLOBFILE $t" "BLOBFILE"
  m compile "$WORK/$t/model.mil" -o "$WORK/$t.milc"; expect_refused "compile, BLOBFILE $t" "BLOBFILE"
done
# A symlinked weights directory and a symlinked weight file pointing outside.
rm -rf "$WORK/symdir"; mkdir -p "$WORK/symdir"; cp "$WORK/good/model.mil" "$WORK/symdir/"
ln -s "$SECRET" "$WORK/symdir/weights"
rm -rf "$WORK/symfile"; mkdir -p "$WORK/symfile/weights"; cp "$WORK/good/model.mil" "$WORK/symfile/"
ln -s "$SECRET/weight.bin" "$WORK/symfile/weights/weight.bin"
# Fixed (mil_blob_path resolves symbolic links; was repro/blobfile-symlink.sh).
for t in symdir symfile; do
  m check "$WORK/$t/model.mil"
  [ "$RC" = 1 ] && ok || fail "check reads BLOBFILE through a symlink ($t) out of the model dir (exit $RC)"
  m compile "$WORK/$t/model.mil" -o "$WORK/$t.milc"
  [ "$RC" = 1 ] && ok || fail "compile reads BLOBFILE through a symlink ($t) out of the model dir (exit $RC)"
done
# A FIFO as the weight file must not block the checker.
rm -rf "$WORK/fifo"; mkdir -p "$WORK/fifo/weights"; cp "$WORK/good/model.mil" "$WORK/fifo/"; mkfifo "$WORK/fifo/weights/weight.bin"
RC=0; timeout 10 "$MILC" check "$WORK/fifo/model.mil" > /dev/null 2> "$WORK/.err" || RC=$?; ERR=$(cat "$WORK/.err")
[ "$RC" = 124 ] && fail "check blocks on a FIFO weight file" || expect_refused "check, FIFO weight file" "regular|BLOBFILE"
"$MILC" compile "$WORK/good/model.mil" -o "$WORK/good.milc" > /dev/null 2>&1 || fail "compile of the good model"
RC=0; timeout 10 "$MILC" run "$WORK/good.milc" --input x="$WORK/fifo/weights/weight.bin" -o "$WORK/o" > /dev/null 2> "$WORK/.err" || RC=$?
ERR=$(cat "$WORK/.err")
if [ "$RC" = 124 ]; then fail "run blocks on a FIFO --input"
elif { [ "$RC" = 1 ] || [ "$RC" = 3 ]; } && printf '%s' "$ERR" | grep -q "not a regular file$"; then ok
else fail "run, FIFO --input: exit $RC, want 1 or 3 and 'not a regular file'; stderr: $ERR"; fi
# --model-path pointing elsewhere is the user's explicit choice, not an escape.
m check "$WORK/dotdot/../good/model.mil" --model-path "$WORK/good"; [ "$RC" = 0 ] && ok || fail "check --model-path: exit $RC $ERR"

# --- template and block names --------------------------------------------
T="$WORK/tpl"; mkdir -p "$T/blocks" "$SECRET/blocks"
cat > "$SECRET/evil.xml" <<'XML'
<?xml version="1.0"?>
<template name="evil"><doc>outside</doc><input name="x" shape="1, 16, 1, 16"/>
<mil><![CDATA[ tensor<fp16, [1, 16, 1, 16]> y = relu(x = x); ]]></mil><output name="y" shape="1, 16, 1, 16"/></template>
XML
cp "$SECRET/evil.xml" "$SECRET/blocks/evil.xml"
sed 's/<template name="evil">/<block name="b">/; s#</template>#</block>#; s#<input[^>]*/>##; s#<output[^>]*/>##' "$SECRET/evil.xml" > "$SECRET/b.xml"
tpl() { # tpl NAME INCLUDE-ELEMENT : a template that includes a block.
  cat > "$T/$1.xml" <<XML
<?xml version="1.0"?>
<template name="$1"><doc>includes</doc><input name="x" shape="1, 16, 1, 16"/>
$2
<mil><![CDATA[ tensor<fp16, [1, 16, 1, 16]> y = add(x = x, y = x); ]]></mil><output name="y" shape="1, 16, 1, 16"/></template>
XML
}
tpl inc_dotdot '<include block="../outside/b"/>'
tpl inc_dotdot2 '<include block="blocks/../../outside/b"/>'
tpl inc_abs "<include block=\"$SECRET/b\"/>"
tpl inc_interp '<include block="{x}"/>'
ln -s "$SECRET/b.xml" "$T/blocks/sym.xml"
tpl inc_sym '<include block="blocks/sym"/>'
ln -s "$SECRET/blocks" "$T/symdir"
tpl inc_symdir '<include block="symdir/evil"/>'
for t in inc_dotdot inc_dotdot2 inc_abs inc_interp inc_sym inc_symdir; do
  m --template-dir "$T" emit --template "$t" -o "$WORK/o-$t"; expect_refused "template include $t" "block|include"
done
ln -s "$SECRET/evil.xml" "$T/symevil.xml"
for name in ../outside/evil "$SECRET/evil" symevil; do
  m --template-dir "$T" emit --template "$name" -o "$WORK/o"; expect_refused "template name '$name'" "template|name|no such"
done
# XML external entity: must not be expanded (the doc would show the file).
echo "TOPSECRET-$$" > "$SECRET/secret.txt"
cat > "$T/xxe.xml" <<XML
<?xml version="1.0"?>
<!DOCTYPE template [<!ENTITY s SYSTEM "file://$SECRET/secret.txt">]>
<template name="xxe"><doc>leak &s;</doc><input name="x" shape="1, 16, 1, 16"/>
<mil><![CDATA[ tensor<fp16, [1, 16, 1, 16]> y = add(x = x, y = x); ]]></mil><output name="y" shape="1, 16, 1, 16"/></template>
XML
m --template-dir "$T" templates show xxe
printf '%s%s' "$OUT" "$ERR" | grep -q "TOPSECRET" && fail "XXE: an external entity was expanded" || ok
m --template-dir "$T" templates ls
printf '%s%s' "$OUT" "$ERR" | grep -q "TOPSECRET" && fail "XXE in templates ls" || ok
# Entity bomb: must fail fast, not eat memory.
{ echo '<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">'
  p=a; for l in b c d e f g h i j k; do printf '<!ENTITY %s "%s">' $l "$(printf '&%s;' $p $p $p $p $p $p $p $p $p $p)"; p=$l; done
  echo ']><template name="bomb"><doc>&k;</doc></template>'; } > "$T/bomb.xml"
start=$(date +%s)
RC=0; timeout 20 "$MILC" --template-dir "$T" templates show bomb > /dev/null 2> "$WORK/.err" || RC=$?; ERR=$(cat "$WORK/.err")
[ "$RC" = 124 ] && fail "entity bomb: still running after 20 s" || no_crash "entity bomb" && ok
echo "  entity bomb: exit $RC in $(( $(date +%s) - start )) s"

# --- random manifests to `milc prewarm` (its parser is not a library yet) --
"$PY" - "$WORK/manifests" "$NMAN" <<'PYEOF'
import os, random, sys
out, n = sys.argv[1], int(sys.argv[2]); os.makedirs(out, exist_ok=True)
rnd = random.Random(7)
good = ["--template gpt2 --layers 1 --model_layers 1 --dim 16 --heads 2 --ffn 32 --seq 16 --mode 0,2",
        "--model tiny --mode 1", "--template llama --layers 1 --model_layers 1 --dim 16 --heads 2 --kv_heads 1 --ffn 32 --seq 16"]
toks = ["--model", "--template", "--weights", "--mode", "--chunk", "--layers", "--dim", "--seq", "--heads", "--phase",
        "--ffn", "--ctx", "--", "-", "=", ",", "#", "random:", "random:1", "random:-1", "0", "1", "2", "3", "-1", "99999999999999999999",
        "1,2,,", ",", "tiny", "gpt2", "../x", "/etc/passwd", "%s%n", "\t", "\r", "\x00", "\xff", "decode", "prefill", "--mode=2",
        "--layers=", "x.safetensors", "--no-verify", "-j", "--jobs", "4"]
small = ["1", "2", "16", "0", "-1", "1,2", ""]
for i in range(n):
    lines = []
    for _ in range(rnd.randint(0, 6)):
        k = rnd.random()
        if k < 0.3:
            l = rnd.choice(good).split(" ")
            for _ in range(rnd.randint(0, 3)):     # mutate a valid line
                j = rnd.randrange(len(l) + 1); op = rnd.random()
                if op < 0.4 and l: l[min(j, len(l) - 1)] = rnd.choice(toks + small)
                elif op < 0.7: l.insert(j, rnd.choice(toks))
                elif l: del l[min(j, len(l) - 1)]
            lines.append(" ".join(l))
        elif k < 0.8:
            lines.append(" ".join(rnd.choice(toks + small) for _ in range(rnd.randint(0, 8))))
        else:
            lines.append("".join(chr(rnd.randrange(1, 256)) for _ in range(rnd.randint(0, 80))))
    data = "\n".join(lines).encode("latin-1")
    if rnd.random() < 0.1: data = data.rstrip(b"\n")
    if rnd.random() < 0.05: data += b"\x00" + data
    open(os.path.join(out, "m%04d" % i), "wb").write(data)
PYEOF
declare -A prc
for f in "$WORK"/manifests/m*; do
  RC=0; timeout 30 "$MILC" --cache-dir "$WORK/pc" prewarm "$f" -j 2 > /dev/null 2> "$WORK/.err" || RC=$?
  ERR=$(cat "$WORK/.err")
  if [ "$RC" = 124 ]; then prc[timeout]=$((${prc[timeout]:-0} + 1)); continue; fi
  no_crash "prewarm $(basename "$f")" && ok
  prc[rc$RC]=$((${prc[rc$RC]:-0} + 1))
done
verify_clean "$WORK/pc" "after random manifests"
echo "  random manifests ($NMAN): $(for k in "${!prc[@]}"; do printf '%s=%s ' "$k" "${prc[$k]}"; done)"
finish
