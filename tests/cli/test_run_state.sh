# milc run --state: a program with states (a KV cache at a run-time
# position, an fp32 accumulator) seeded from .npy files, run, each state's
# final value written beside the outputs; chained run to run through the
# files, against numpy; bad seeds are clear errors (exit 1, nothing written).
cat > kv.mil <<'MIL'
program(1.3)
{
    func main<ios18>(state<tensor<fp16, [1, 4, 8]>> cache, state<tensor<fp32, [2]>> acc, tensor<fp16, [1, 4, 1]> x, tensor<int32, [3]> pos) {
        tensor<fp16, [1, 4, 8]> old = read_state(input = cache)[name = string("old")];
        tensor<int32, [3]> ext = const()[name = string("ext"), val = tensor<int32, [3]>([1, 4, 1])];
        tensor<int32, [3]> e = add(x = pos, y = ext)[name = string("e")];
        tensor<fp16, [1, 4, 8]> upd = slice_update(x = old, update = x, begin = pos, end = e)[name = string("upd")];
        tensor<fp16, [1, 4, 8]> u = coreml_update_state(state = cache, value = upd)[name = string("u")];
        tensor<fp16, [1, 4, 8]> k = read_state(input = cache)[name = string("k")];
        tensor<int32, [1]> ax = const()[name = string("ax"), val = tensor<int32, [1]>([2])];
        tensor<fp16, [1, 4]> y = reduce_sum(x = k, axes = ax, keep_dims = bool(false))[name = string("y")];
        tensor<fp32, [2]> a = read_state(input = acc)[name = string("a")];
        tensor<fp32, [2]> a1 = add(x = a, y = fp32(1.5))[name = string("a1")];
        write_state(data = a1, input = acc)[name = string("w")];
    } -> (y);
}
MIL
expect_rc 0 "$MILC" compile kv.mil -o kv.milc
"$PY" - <<'PYEOF'
import numpy as np
r = np.random.RandomState(5)
for i in range(3):
    np.save(f'x{i}.npy', r.randn(1, 4, 1).astype(np.float16))
    np.save(f'p{i}.npy', np.array([0, 0, [2, 5, 7][i]], np.int32))
np.save('seed.npy', r.randn(1, 4, 8).astype(np.float16))
np.save('seed32.npy', r.randn(1, 4, 8).astype(np.float32))
np.save('acc.npy', np.array([1, -2], np.float32))
np.save('bad_shape.npy', np.zeros((1, 4, 7), np.float16))
np.save('bad_dtype.npy', np.zeros((1, 4, 8), np.int32))
np.save('acc_f16.npy', np.zeros((2,), np.float16))
PYEOF
# No seed: the states start at zero, and their values after the run are written.
expect_rc 0 "$MILC" run kv.milc --input x=x0.npy --input pos=p0.npy -o o0 --json
expect_json "$OUT" "sorted((o['name'], o['state']) for o in j['outputs']) == [('acc', True), ('cache', True), ('y', False)]"
# Chained: each run seeded with the state files of the one before (the file
# program and the artifact alike).
expect_rc 0 "$MILC" run kv.milc --input x=x1.npy --input pos=p1.npy --state cache=o0/cache.npy --state acc=o0/acc.npy -o o1
expect_rc 0 "$MILC" run kv.mil --input x=x2.npy --input pos=p2.npy --state cache=o1/cache.npy --state acc=o1/acc.npy -o o2
"$PY" - <<'PYEOF' && ok || fail "chained state runs differ from numpy"
import numpy as np
cache = np.zeros((1, 4, 8), np.float16); acc = np.zeros(2, np.float32)
for i in range(3):
    x, p = np.load(f'x{i}.npy'), np.load(f'p{i}.npy')[2]
    cache[:, :, p] = x[:, :, 0]; acc += 1.5
    c, a, y = np.load(f'o{i}/cache.npy'), np.load(f'o{i}/acc.npy'), np.load(f'o{i}/y.npy')
    assert c.dtype == np.float16 and np.array_equal(c, cache), i
    assert a.dtype == np.float32 and np.array_equal(a, acc), (i, a)
    assert np.allclose(y.astype(np.float32), cache.astype(np.float32).sum(axis=2), rtol=2e-3, atol=2e-3), i
PYEOF
# A seed (fp16, or fp32 rounded to the fp16 state) is what the run reads; --repeat starts each run from it.
expect_rc 0 "$MILC" run kv.milc --input x=x0.npy --input pos=p0.npy --state cache=seed.npy --state acc=acc.npy --repeat 3 -o os
expect_rc 0 "$MILC" run kv.milc --input x=x0.npy --input pos=p0.npy --state cache=seed32.npy -o os32
"$PY" - <<'PYEOF' && ok || fail "seeded runs differ from numpy"
import numpy as np
x, p = np.load('x0.npy'), np.load('p0.npy')[2]
for out, seed in (('os', np.load('seed.npy')), ('os32', np.load('seed32.npy').astype(np.float16))):
    seed[:, :, p] = x[:, :, 0]
    assert np.array_equal(np.load(f'{out}/cache.npy'), seed), out
assert np.array_equal(np.load('os/acc.npy'), np.array([2.5, -0.5], np.float32))  # one run from the seed, not three
assert np.array_equal(np.load('os32/acc.npy'), np.array([1.5, 1.5], np.float32))
PYEOF
# Bad seeds: exit 1, a message naming the state and the file, nothing written.
expect_rc 1 "$MILC" run kv.milc --input x=x0.npy --input pos=p0.npy --state cache=bad_shape.npy -o ob1
expect_in "$ERR" "bad_shape.npy: state 'cache' wants shape [1, 4, 8], the file has [1, 4, 7]"
expect_rc 1 "$MILC" run kv.milc --input x=x0.npy --input pos=p0.npy --state cache=bad_dtype.npy -o ob2
expect_in "$ERR" "state 'cache' wants fp16, the file holds int32"
# (an fp32 state takes an fp16 file, widened, as an fp32 input does)
expect_rc 0 "$MILC" run kv.milc --input x=x0.npy --input pos=p0.npy --state acc=acc_f16.npy -o oh
expect_rc 1 "$MILC" run kv.milc --input x=x0.npy --input pos=p0.npy --state nope=seed.npy -o ob3
expect_in "$ERR" "the model has no state 'nope'"
expect_rc 3 "$MILC" run kv.milc --input x=x0.npy --input pos=p0.npy --state cache=missing.npy -o ob4  # I/O, as for inputs
expect_rc 2 "$MILC" run kv.milc --input x=x0.npy --input pos=p0.npy --state cache -o ob5
head -c 60 seed.npy > trunc.npy
expect_rc 1 "$MILC" run kv.milc --input x=x0.npy --input pos=p0.npy --state cache=trunc.npy -o ob6
for d in ob1 ob2 ob3 ob4 ob6; do [ -z "$(ls -A $d 2>/dev/null)" ] && ok || fail "$d: a refused run wrote files"; done
# An update outside the state: exit 1, named.
"$PY" -c "import numpy as np; np.save('p9.npy', np.array([0, 0, 8], np.int32))"
expect_rc 1 "$MILC" run kv.milc --input x=x0.npy --input pos=p9.npy -o ob7
expect_in "$ERR" "a state update outside its state"
