# templates ls/show, milc emit: files, determinism, check, fmt stability, errors.
expect_rc 0 "$MILC" templates ls
expect_in "$OUT" "gpt2"
expect_in "$OUT" "llama"
expect_in "$OUT" "tiny"
expect_rc 0 "$MILC" templates ls --json
expect_json "$OUT" "any(e['name'] == 'gpt2' for e in j)"
expect_rc 0 "$MILC" templates show gpt2
expect_in "$OUT" "heads"
expect_rc 1 "$MILC" templates show no-such-template
expect_rc 0 "$MILC" emit --help --template llama
expect_in "$OUT" "kv_heads"

for m in tiny tiny-llama; do
  for phase in prefill decode; do
    d=$WORK/$m-$phase
    expect_rc 0 "$MILC" emit --model $m --phase $phase -o "$d"
    for f in model.mil weights/weight.bin manifest.json; do
      if [ -s "$d/$f" ]; then ok; else fail "emit $m $phase: no $f"; fi
    done
    expect_rc 0 "$MILC" check "$d/model.mil"
    # Within the ANE's limits: the packed I/O (test_ane_chunks.sh: the matrix).
    expect_rc 0 "$MILC" check --target ane "$d/model.mil"
    # Canonical already: fmt --check passes; a reformatted copy is restored.
    expect_rc 0 "$MILC" fmt --check "$d/model.mil"
    sed -e 's/^    //' -e 's/, /,/g' "$d/model.mil" > "$d/messy.mil"
    expect_rc 1 "$MILC" fmt --check "$d/messy.mil"
    expect_rc 0 "$MILC" fmt "$d/messy.mil" -o "$d/clean.mil"
    if cmp -s "$d/clean.mil" "$d/model.mil"; then ok; else fail "fmt of reformatted $m $phase differs"; fi
  done
done
# Deterministic: the same request gives byte-identical files.
expect_rc 0 "$MILC" emit --model tiny -o "$WORK/again"
for f in model.mil weights/weight.bin manifest.json; do
  if cmp -s "$WORK/again/$f" "$WORK/tiny-prefill/$f"; then ok; else fail "emit not deterministic: $f"; fi
done
# Template parameters as options, both spellings of kv_heads.
expect_rc 0 "$MILC" emit --model tiny-llama --kv-heads 1 -o "$WORK/kv1"
expect_rc 0 "$MILC" emit --model tiny-llama --kv_heads 1 -o "$WORK/kv1b"
if cmp -s "$WORK/kv1/model.mil" "$WORK/kv1b/model.mil"; then ok; else fail "--kv-heads and --kv_heads differ"; fi
# Parameter errors: exit 1 with a message naming the problem.
expect_rc 1 "$MILC" emit --model tiny --heads 3 -o "$WORK/bad"
expect_in "$ERR" "error"
expect_rc 1 "$MILC" emit --model tiny --no-such-param 1 -o "$WORK/bad"
expect_in "$ERR" "no-such-param"
expect_rc 2 "$MILC" emit --model tiny
expect_in "$ERR" "missing -o DIR"
if [ -e "$WORK/bad" ]; then fail "a failed emit left $WORK/bad behind"; else ok; fi
# Weights cannot come from outside the model directory, not even through a
# symbolic link (a regression: the link was followed).
mkdir -p "$WORK/outside" "$WORK/linked"
cp "$WORK/tiny-prefill/weights/weight.bin" "$WORK/outside/"
cp "$WORK/tiny-prefill/model.mil" "$WORK/linked/"
ln -s "$WORK/outside" "$WORK/linked/weights"
expect_rc 1 "$MILC" check "$WORK/linked/model.mil"
expect_in "$ERR" "resolves (through a symbolic link) to a file outside the model directory"
expect_rc 1 "$MILC" compile "$WORK/linked/model.mil" -o "$WORK/linked.milc"
# A link that stays inside the model is fine.
mkdir -p "$WORK/inside/store"; cp "$WORK/tiny-prefill/weights/weight.bin" "$WORK/inside/store/"
cp "$WORK/tiny-prefill/model.mil" "$WORK/inside/"; ln -s store "$WORK/inside/weights"
expect_rc 0 "$MILC" check "$WORK/inside/model.mil"
