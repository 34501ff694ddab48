"""States on the CPU runtime through the Python binding: programs with
state<tensor<...>> inputs compiled by the real `milc compile` (bonded and
non-bonded), run several times in one loaded model, each run's outputs and
the states after it compared with numpy; seeding, reading and resetting by
name; a seed of the wrong shape or dtype and an update outside the state are
errors that leave the state as it was.

    test_states.py SRC LIBMILC MILC"""
import os, subprocess, sys, tempfile
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import milc, milc_exe, check, raises, finish  # noqa: E402


# A KV-cache step: the new column written at a run-time position into the
# fp16 state (in place: the read feeds only the slice_update), then the whole
# cache read again and reduced.
KV = """program(1.3)
{
    func main<ios18>(state<tensor<fp16, [1, 4, 8]>> cache, tensor<fp16, [1, 4, 1]> x, tensor<int32, [3]> pos) {
        tensor<fp16, [1, 4, 8]> old = read_state(input = cache)[name = string("old")];
        tensor<int32, [3]> ext = const()[name = string("ext"), val = tensor<int32, [3]>([1, 4, 1])];
        tensor<int32, [3]> e = add(x = pos, y = ext)[name = string("e")];
        tensor<fp16, [1, 4, 8]> upd = slice_update(x = old, update = x, begin = pos, end = e)[name = string("upd")];
        tensor<fp16, [1, 4, 8]> u = coreml_update_state(state = cache, value = upd)[name = string("u")];
        tensor<fp16, [1, 4, 8]> k = read_state(input = cache)[name = string("k")];
        tensor<int32, [1]> ax = const()[name = string("ax"), val = tensor<int32, [1]>([2])];
        tensor<fp16, [1, 4]> y = reduce_sum(x = k, axes = ax, keep_dims = bool(false))[name = string("y")];
    } -> (y);
}
"""

# An fp32 accumulator: the old value is returned after the write (the read
# must be copied before the write), a squeezed slice_update into a copy of
# the old value (not in place: the old value has other readers), and an
# int32 counter through write_state.
ACC = """program(1.3)
{
    func main<ios18>(state<tensor<fp32, [2, 3]>> acc, state<tensor<int32, [1]>> n, tensor<fp32, [2, 3]> x) {
        tensor<fp32, [2, 3]> old = read_state(input = acc)[name = string("old")];
        tensor<fp32, [2, 3]> s = add(x = old, y = x)[name = string("s")];
        write_state(data = s, input = acc)[name = string("w")];
        tensor<fp32, [2, 3]> prev = mul(x = old, y = fp32(2))[name = string("prev")];
        tensor<fp32, [3]> row = const()[name = string("row"), val = tensor<fp32, [3]>([7, 8, 9])];
        tensor<int32, [2]> b = const()[name = string("b"), val = tensor<int32, [2]>([1, 0])];
        tensor<int32, [2]> en = const()[name = string("en"), val = tensor<int32, [2]>([2, 3])];
        tensor<bool, [2]> sq = const()[name = string("sq"), val = tensor<bool, [2]>([true, false])];
        tensor<fp32, [2, 3]> patched = slice_update(x = old, update = row, begin = b, end = en, squeeze_mask = sq)[name = string("patched")];
        tensor<int32, [1]> c = read_state(input = n)[name = string("c")];
        tensor<int32, [1]> c1 = add(x = c, y = int32(1))[name = string("c1")];
        tensor<int32, [1]> count = coreml_update_state(state = n, value = c1)[name = string("count")];
    } -> (prev, patched, count);
}
"""

# A read whose only use comes after a write of its state: it must see the
# value before the write (a view of the state would see the new one).
ORDER = """program(1.3)
{
    func main<ios18>(state<tensor<fp32, [3]>> s, tensor<fp32, [3]> x) {
        tensor<fp32, [3]> old = read_state(input = s)[name = string("old")];
        write_state(data = x, input = s)[name = string("w")];
        tensor<fp32, [3]> y = mul(x = old, y = fp32(2))[name = string("y")];
    } -> (y);
}
"""


def compile_(work, name, text, mode):
    path = os.path.join(work, f"{name}.mil")
    with open(path, "w") as f:
        f.write(text)
    art = os.path.join(work, f"{name}_{mode}.milc")
    r = subprocess.run([milc_exe, "compile", path, "--mode", str(mode), "-o", art], check=True, capture_output=True, text=True)
    compile_.said = r.stdout + r.stderr
    return milc.Model.load_file(art, threads=2)


rng = np.random.RandomState(3)
with tempfile.TemporaryDirectory() as work:
    for mode in (2, 1):
        with compile_(work, "kv", KV, mode) as m:
            if mode == 2:  # add, the update in place, the fp16 cache widened for reduce_sum, reduce_sum: no copy of the state
                check("6 MIL ops -> 4 plan ops" in compile_.said, f"kv: the update is done in place ({compile_.said.strip()})")
            check([(t.name, t.shape, np.dtype(t.dtype)) for t in m.states] == [("cache", (1, 4, 8), np.float16)],
                  f"mode {mode}: kv: one fp16 state {[(t.name, t.shape) for t in m.states]}")
            check(not m.read_state("cache").any(), f"mode {mode}: kv: the state is zero at load")
            ref = np.zeros((1, 4, 8), np.float16)
            for step, p in enumerate([0, 1, 2, 5, 7, 1]):
                x = rng.randn(1, 4, 1).astype(np.float16)
                y = m.run({"x": x, "pos": np.array([0, 0, p], np.int32)})["y"]
                ref[:, :, p] = x[:, :, 0]
                want = ref.astype(np.float32).sum(axis=2)
                check(np.array_equal(m.read_state("cache"), ref), f"mode {mode}: kv run {step}: the state holds every column written")
                check(np.allclose(y.astype(np.float32), want, rtol=2e-3, atol=2e-3), f"mode {mode}: kv run {step}: y = sum over the updated cache")
            # an update outside the cache: an error, the state untouched
            e = raises(milc.E_INPUT, lambda: m.run({"x": x, "pos": np.array([0, 0, 8], np.int32)}), f"mode {mode}: a position past the cache")
            raises(milc.E_INPUT, lambda: m.run({"x": x, "pos": np.array([0, 1, 0], np.int32)}), f"mode {mode}: a box past the cache's rows")
            check(np.array_equal(m.read_state("cache"), ref), f"mode {mode}: a refused update wrote nothing")
            p = np.array([0, 0, -2], np.int32)  # negative: from the end (end -1: the last column)
            m.run({"x": x * 2, "pos": p})
            ref[:, :, 6] = (x * 2)[:, :, 0]
            check(np.array_equal(m.read_state(0), ref), f"mode {mode}: begin -2 is the column before the last")
            seed = rng.randn(1, 4, 8).astype(np.float16)
            m.write_state("cache", seed)
            y = m.run({"x": x, "pos": np.array([0, 0, 3], np.int32)})["y"]
            seed[:, :, 3] = x[:, :, 0]
            check(np.array_equal(m.read_state("cache"), seed) and
                  np.allclose(y.astype(np.float32), seed.astype(np.float32).sum(axis=2), rtol=2e-3, atol=2e-3),
                  f"mode {mode}: a seeded state is what the next run reads and updates")
            raises(milc.E_INPUT, lambda: m.write_state("cache", np.zeros((1, 4, 7), np.float16)), f"mode {mode}: a seed of the wrong shape")
            raises(milc.E_INPUT, lambda: m.write_state("cache", np.zeros((1, 4, 8), np.int32)), f"mode {mode}: a seed of the wrong dtype")
            raises(milc.E_USAGE, lambda: m.write_state("nope", seed), f"mode {mode}: a state that does not exist")
            check(np.array_equal(m.read_state("cache"), seed), f"mode {mode}: refused seeds changed nothing")
            m.reset_states()
            check(not m.read_state("cache").any(), f"mode {mode}: reset_states zeroes the state")

        with compile_(work, "order", ORDER, mode) as m:
            prev = np.zeros(3, np.float32)
            for step in range(3):
                x = rng.randn(3).astype(np.float32)
                y = m.run({"x": x})["y"]
                check(np.array_equal(y, 2 * prev) and np.array_equal(m.read_state("s"), x),
                      f"mode {mode}: order run {step}: a read used after the write sees the value before it")
                prev = x

        with compile_(work, "acc", ACC, mode) as m:
            names = sorted((t.name, np.dtype(t.dtype).name) for t in m.states)
            check(names == [("acc", "float32"), ("n", "int32")], f"mode {mode}: acc: states {names}")
            acc = np.zeros((2, 3), np.float32)
            m.write_state("acc", acc + 0.5)
            acc += 0.5
            for step in range(4):
                x = rng.randn(2, 3).astype(np.float32)
                out = m.run({"x": x})
                patched = acc.copy()
                patched[1] = [7, 8, 9]
                check(np.allclose(out["prev"], 2 * acc, rtol=1e-6), f"mode {mode}: acc run {step}: the value read before the write")
                check(np.array_equal(out["patched"], patched), f"mode {mode}: acc run {step}: a squeezed slice_update of the old value")
                check(out["count"].tolist() == [step + 1], f"mode {mode}: acc run {step}: the int32 counter {out['count'].tolist()}")
                acc = acc + x
                check(np.allclose(m.read_state("acc"), acc, rtol=1e-6), f"mode {mode}: acc run {step}: the state accumulates")

finish()
