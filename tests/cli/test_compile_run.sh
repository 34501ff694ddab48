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
# The same input saved in Fortran order (np.save of a transposed array) runs
# to the same outputs.
"$PY" -c "import numpy as np; x = np.load('x.npy'); np.save('xf.npy', np.asfortranarray(x)); assert np.load('xf.npy').flags.f_contiguous"
expect_rc 0 "$MILC" run m2.milc --input x=xf.npy -o outf
for f in out2/*.npy; do cmp -s "$f" "outf/${f#out2/}" && ok || fail "Fortran-order input: $f differs"; done
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
# A program that parses but fails its checks: --dump parse still shows it,
# no artifact is written, and one that does not parse dumps nothing.
printf 'program(1.0)\n{\n    func main<ios16>(tensor<fp32, [2]> x) {\n        tensor<fp32, [3]> y = relu(x = x);\n    } -> (y);\n}\n' > badshape.mil
expect_rc 1 "$MILC" compile badshape.mil --dump parse -o badshape.milc
expect_in "$OUT" "relu(x = x)"
[ ! -e badshape.milc ] && ok || fail "a program failing its checks wrote an artifact"
printf 'program(1.0)\n{\n  func main<ios16>(\n' > noparse.mil
expect_rc 1 "$MILC" compile noparse.mil --dump parse -o noparse.milc
[ -z "$OUT" ] && [ ! -e noparse.milc ] && ok || fail "a program that does not parse dumped or wrote something"
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

# Output names are identifiers: an artifact resealed (the checksums are not
# keyed) with its output named "../../x" or "a/b" is refused at load, and
# nothing is written outside -o DIR.
for name in ../../x a/b .. $'x\e[2J'; do
  "$PY" - m2.milc reseal.milc "$name" <<'PYEOF' || { fail "reseal $name"; continue; }
import ctypes, struct, sys
xxh = ctypes.CDLL("libxxhash.so.0")
xxh.XXH3_64bits.restype = ctypes.c_uint64
xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
h64 = lambda b: xxh.XXH3_64bits(bytes(b), len(b))
a = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack_from("<I", a, 20)[0]
ents = [list(struct.unpack_from("<IIQQQ", a, 64 + 32 * i)) for i in range(n)]
kind, _, off, size, _ = next(e for e in ents if e[0] == 1)  # the meta section
nbuf, nin, nout, _ = struct.unpack_from("<IIII", a, off)
rec = off + 16 + 64 * nbuf + 72 * nin + 8  # output 0's name
a[rec:rec + 64] = sys.argv[3].encode().ljust(64, b"\0")
for i, e in enumerate(ents):
    struct.pack_into("<Q", a, 64 + 32 * i + 24, h64(a[e[2]:e[2] + e[3]]))
struct.pack_into("<Q", a, 24, 0)
struct.pack_into("<Q", a, 24, h64(a[:64 + 32 * n]))
open(sys.argv[2], "wb").write(a)
PYEOF
  rm -rf esc && mkdir -p esc/out/sub
  expect_rc 1 "$MILC" run reseal.milc --input x=x.npy -o esc/out/sub
  expect_in "$ERR" "output 0: name"
  expect_in "$ERR" "is not an identifier"
  expect_not_in "$ERR" $'\e'
  if [ -z "$(find esc -type f)" ]; then ok; else fail "run of an artifact with output '$name' wrote $(find esc -type f)"; fi
done

# A program that checks but that the CPU backend cannot plan (an op reading
# a non_zero's run-time rows): a clean refusal saying why (exit 1), in every mode.
for mode in 0 1 2; do
  expect_rc 0 "$MILC" check "$SRC/tests/cli/data/non_zero_read.mil"
  expect_rc 1 "$MILC" compile "$SRC/tests/cli/data/non_zero_read.mil" --mode $mode -o u$mode.milc
  expect_in "$ERR" "non_zero_read.mil:7:35: error: non_zero of run-time data: its rows are counted at run time, so the CPU backend can only return 'r' as it is"
done
# int8, uint8, int16 and uint16 inputs and outputs, through npy files of
# those dtypes: int32 inside, the outputs in their own dtype (wrapping).
cat > narrow.mil <<'MILEOF'
program(1.3)
{
    func main<ios18>(tensor<int16, [3]> x, tensor<uint8, [2, 2]> u) {
        tensor<int16, [3]> r = reverse(x = x, axes = tensor<int32, [1]>([0]));
        tensor<int32, [3]> w = cast(x = x, dtype = string("int32"));
        tensor<int32, [3]> m = mul(x = w, y = int32(1000));
        tensor<int8, [3]> n = cast(x = m, dtype = string("int8"));
        tensor<uint8, [2, 2]> t = transpose(x = u, perm = tensor<int32, [2]>([1, 0]));
    } -> (r, n, t);
}
MILEOF
"$PY" -c "import numpy as np; np.save('xi16.npy', np.array([1, -300, 32767], np.int16)); np.save('u8.npy', np.array([[1, 255], [7, 0]], np.uint8))"
expect_rc 0 "$MILC" run narrow.mil --input x=xi16.npy --input u=u8.npy -o narrow
"$PY" - <<'PYEOF' && ok || fail "narrow integer outputs"
import numpy as np
x = np.array([1, -300, 32767], np.int16)
r, n, t = (np.load('narrow/%s.npy' % k) for k in 'rnt')
assert r.dtype == np.int16 and (r == x[::-1]).all(), r
assert n.dtype == np.int8 and (n == (x.astype(np.int64) * 1000).astype(np.int8)).all(), n
assert t.dtype == np.uint8 and (t == np.array([[1, 7], [255, 0]], np.uint8)).all(), t
PYEOF
"$PY" -c "import numpy as np; np.save('xu16.npy', np.array([1, 2, 3], np.uint16))"
expect_rc 1 "$MILC" run narrow.mil --input x=xu16.npy --input u=u8.npy -o o
expect_in "$ERR" "input 'x' wants int16, the file holds uint16"

# Functions: a program's only function is compiled whatever its name; one of
# several is named with --function (compile and run), and a program of
# several without main says which there are.
printf 'program(1.3)\n{\n    func foo<ios18>(tensor<fp32, [2]> x) {\n        tensor<fp32, [2]> y = relu(x = x);\n    } -> (y);\n}\n' > foo.mil
expect_rc 0 "$MILC" compile foo.mil -o foo.milc
printf 'program(1.3)\n{\n    func prefill<ios18>(tensor<fp32, [2]> x) {\n        tensor<fp32, [2]> y = relu(x = x);\n    } -> (y);\n    func decode<ios18>(tensor<fp32, [2]> x) {\n        tensor<fp32, [2]> y = sigmoid(x = x);\n    } -> (y);\n}\n' > two.mil
expect_rc 1 "$MILC" compile two.mil -o two.milc
expect_eq "$ERR" "two.mil: error: the program has 2 functions ('prefill', 'decode'), none of them 'main': name the one to compile"
expect_rc 1 "$MILC" compile two.mil --function nope -o two.milc
expect_eq "$ERR" "two.mil: error: the program has no function 'nope'; it has 'prefill', 'decode'"
"$PY" -c "import numpy as np; np.save('x2.npy', np.array([-1, 2], np.float32))"
expect_rc 0 "$MILC" compile two.mil --function decode -o two.milc
expect_rc 0 "$MILC" run two.milc --input x=x2.npy -o dec
expect_rc 0 "$MILC" run two.mil --function prefill --input x=x2.npy -o pre
"$PY" -c "
import numpy as np
assert np.allclose(np.load('dec/y.npy'), 1 / (1 + np.exp([1.0, -2.0])), rtol=1e-6)
assert np.array_equal(np.load('pre/y.npy'), np.array([0, 2], np.float32))" && ok || fail "--function ran the wrong function"
# A program run from its file that the backend refuses: the message names the
# file and shows the line (the program's locations outlived their sink once).
printf 'program(1.3)\n{\n    func main<ios18>(tensor<fp32, [2]> x) {\n        tensor<int32, [?, 1]> y = non_zero(x = x);\n        tensor<int32, [?, 1]> z = abs(x = y);\n    } -> (z);\n}\n' > nzr.mil
expect_rc 1 "$MILC" run nzr.mil --input x=x2.npy -o nzo
expect_in "$ERR" "nzr.mil:4:35: error: non_zero of run-time data"
expect_in "$ERR" "        tensor<int32, [?, 1]> y = non_zero(x = x);"
# non_zero of run-time data, returned: the .npy holds the rows the run
# counted (--json says the same shape), none of them for zeros.
printf 'program(1.3)\n{\n    func main<ios18>(tensor<fp32, [2, 3]> x) {\n        tensor<int32, [?, 2]> y = non_zero(x = x);\n    } -> (y);\n}\n' > nz.mil
"$PY" -c "
import numpy as np
np.save('nzx.npy', np.array([[0, 2, 0], [-1, 0, 3]], np.float32))
np.save('nz0.npy', np.zeros((2, 3), np.float32))"
for mode in 0 1 2; do
  expect_rc 0 "$MILC" run nz.mil --mode $mode --input x=nzx.npy -o nzo$mode --json
  expect_in "$OUT" '"shape":[3,2]'
  "$PY" -c "
import numpy as np
assert np.load('nzo$mode/y.npy').tolist() == [[0, 1], [1, 0], [1, 2]]" && ok || fail "non_zero mode $mode: wrong rows"
done
expect_rc 0 "$MILC" run nz.mil --input x=nz0.npy -o nzz
expect_in "$ERR" "wrote nzz/y.npy (int32 [0, 2])"
"$PY" -c "
import numpy as np
assert np.load('nzz/y.npy').shape == (0, 2)" && ok || fail "non_zero of zeros: not an empty [0, 2]"
# An input of flexible shape ('?', a package's range of sizes): compiled for
# the size --shape gives it; run takes it from the input's file; a size
# that does not fit, or a bad --shape, is refused saying what.
printf 'program(1.3)\n{\n    func main<ios18>(tensor<fp32, [1, ?, 4]> x) {\n        tensor<fp32, [1, ?, 4]> y = mul(x = x, y = tensor<fp32, [4]>([1, 2, 3, 4]));\n        tensor<fp32, [1]> s = reduce_sum(x = y, axes = tensor<int32, [2]>([1, 2]), keep_dims = bool(false));\n    } -> (y, s);\n}\n' > flex.mil
"$PY" -c "
import numpy as np
np.save('flex3.npy', np.arange(12, dtype=np.float32).reshape(1, 3, 4))"
expect_rc 1 "$MILC" compile flex.mil -o flex.milc
expect_in "$ERR" "flex.mil:3:46: error: input 'x' has a flexible shape: the CPU backend compiles one size of it (milc compile and run: --shape x=D0,D1,..; run takes it from the input's file)"
expect_rc 0 "$MILC" compile flex.mil --shape x=1,3,4 -o flex.milc
expect_rc 0 "$MILC" run flex.milc --input x=flex3.npy -o flexo
expect_rc 0 "$MILC" run flex.mil --input x=flex3.npy -o flexp
"$PY" -c "
import numpy as np
x = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
for d in ('flexo', 'flexp'):
    assert np.array_equal(np.load(d + '/y.npy'), x * [1, 2, 3, 4]) and np.load(d + '/s.npy').tolist() == [(x * [1, 2, 3, 4]).sum()]" \
  && ok || fail "a flexible input compiled for its size ran wrong"
expect_rc 1 "$MILC" compile flex.mil --shape x=2,3,4 -o flex2.milc
expect_in "$ERR" "error: --shape x=[2, 3, 4] does not fit input 'x' of shape [1, ?, 4]"
expect_rc 1 "$MILC" run flex.mil --shape x=1,5,4 --input x=flex3.npy -o flexq
expect_in "$ERR" "input 'x' wants shape [1, 5, 4], the file has [1, 3, 4]"
expect_rc 1 "$MILC" compile flex.mil --shape q=1,3,4 -o flex2.milc
expect_in "$ERR" "error: --shape q: function 'main' has no input 'q' (its inputs: 'x')"
expect_rc 2 "$MILC" compile flex.mil --shape x=1,0,4 -o flex2.milc
expect_in "$ERR" "milc compile: --shape 'x=1,0,4': want NAME=D0,D1,... (each size from 1 to 2^31)"
expect_rc 2 "$MILC" run flex3.milc --shape x=1,3,4 --input x=flex3.npy -o flexr
# --function and --model-path name parts of a program: with an artifact they
# are a usage error, not silently ignored.
expect_rc 2 "$MILC" run two.milc --function decode --input x=x2.npy -o dec2
expect_in "$ERR" "milc run: --function goes with a program (FILE.mil, a package or a folder)"
