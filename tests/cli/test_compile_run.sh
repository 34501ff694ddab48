# milc compile + milc run on generated chunks: every mode runs and the modes
# agree; bad artifacts and bad inputs are clear errors.
expect_rc 0 "$MILC" emit --model tiny -o m
for mode in 0 1 2; do
  expect_rc 0 "$MILC" compile m/model.mil --mode $mode -o m$mode.milc --json
  expect_json "$OUT" "j['mode'] == $mode and j['bytes'] > 0"
done
expect_rc 3 "$MILC" compile m/model.mil -o /nonexistent-dir/x.milc
"$PY" -c "import numpy as np; np.save('x.npy', (np.random.RandomState(1).randn(1,128,1,32)*0.5).astype(np.float16))"
for mode in 0 1 2; do
  expect_rc 0 "$MILC" run m$mode.milc --input x=x.npy -o out$mode --json
  expect_json "$OUT" "len(j['outputs']) >= 1"
done
"$PY" - <<'PYEOF' && ok || fail "modes disagree"
import numpy as np, os
names = sorted(os.listdir('out2'))
assert names, 'no outputs'
for n in names:
    a = np.load('out2/' + n).astype(np.float64)
    for m in ('out0', 'out1'):
        b = np.load(m + '/' + n).astype(np.float64)
        err = np.linalg.norm(a - b) / max(np.linalg.norm(a), 1e-30)
        assert err <= 2e-3, (n, m, err)
PYEOF
# The dump of a stage is valid MIL that checks again.
run "$MILC" compile m/model.mil --dump fold -o m-dump.milc
printf '%s\n' "$OUT" > m/dump.mil
expect_rc 0 "$MILC" check m/dump.mil
# Bad inputs: missing input, wrong shape, wrong dtype, unknown name, bad npy.
expect_rc 2 "$MILC" run m2.milc -o o
expect_in "$ERR" "missing --input x="
"$PY" -c "import numpy as np; np.save('bad_shape.npy', np.zeros((1,128,1,31), np.float16)); np.save('bad_dtype.npy', np.zeros((1,128,1,32), np.int32))"
expect_rc 1 "$MILC" run m2.milc --input x=bad_shape.npy -o o
expect_in "$ERR" "wants shape [1, 128, 1, 32]"
expect_rc 1 "$MILC" run m2.milc --input x=bad_dtype.npy -o o
expect_rc 1 "$MILC" run m2.milc --input x=x.npy --input nope=x.npy -o o
head -c 100 x.npy > trunc.npy
expect_rc 1 "$MILC" run m2.milc --input x=trunc.npy -o o
# Damaged artifacts: truncated, flipped bytes — an error, never a crash.
head -c 1000 m2.milc > trunc.milc
expect_rc 1 "$MILC" run trunc.milc --input x=x.npy -o o
size=$(stat -c %s m2.milc)
for off in 8 100 300 $((size / 2)) $((size - 10)); do
  cp m2.milc flip.milc
  printf '\xa5' | dd of=flip.milc bs=1 seek=$off conv=notrunc 2>/dev/null
  expect_rc 1 "$MILC" run flip.milc --input x=x.npy -o o
done

# Hand-written programs: inline literal arguments, both multi-result
# spellings, tuples (a regression: inline literals crashed the lowering), and
# the program(1.0) dialect; every mode against numpy.
"$PY" -c "import numpy as np; np.save('h.npy', np.arange(8, dtype=np.float16).reshape(2, 4)); np.save('s.npy', np.array([[1, 2, 3]], np.float32))"
for mode in 0 1 2; do
  expect_rc 0 "$MILC" compile "$SRC/tests/cli/data/inline_literals.mil" --mode $mode -o h$mode.milc
  expect_rc 0 "$MILC" run h$mode.milc --input x=h.npy -o h$mode
  "$PY" -c "
import numpy as np
x = np.arange(8, dtype=np.float32).reshape(2, 4)
assert np.array_equal(np.load('h$mode/f.npy').astype(np.float32), x + 0.5)" && ok || fail "inline_literals mode $mode"
  expect_rc 0 "$MILC" compile "$SRC/tests/cli/data/program10_softmax.mil" --mode $mode -o s$mode.milc
  expect_rc 0 "$MILC" run s$mode.milc --input x=s.npy -o s$mode
  "$PY" -c "
import numpy as np
x = np.array([[1, 2, 3]], np.float64); e = np.exp(x - x.max()); ref = e / e.sum() * float.fromhex('-0x1.388p+13')
got = np.load('s$mode/z.npy').astype(np.float64)
assert np.abs(got - ref).max() <= 1e-3 * np.abs(ref).max(), (got, ref)" && ok || fail "program10 softmax mode $mode"
done

# An op that checks but that the CPU backend does not lower: a clean refusal
# naming the op (exit 1), in every mode.
for mode in 0 1 2; do
  expect_rc 0 "$MILC" check "$SRC/tests/cli/data/unlowered_op.mil"
  expect_rc 1 "$MILC" compile "$SRC/tests/cli/data/unlowered_op.mil" --mode $mode -o u$mode.milc
  expect_in "$ERR" "op relu is not supported by the cpu backend yet"
done
