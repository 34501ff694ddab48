"""The checker's shape rules against independent references.

Random cases per op: the result shape comes from running the operation in
NumPy (PyTorch for conv, when importable) on zero arrays.  One program holds
every case as its own function.  Declared as the reference says, the program
must check clean; with one dimension of each result changed, the checker must
report exactly one "is declared ... but the op gives" error per function, on
that function's statement.

usage: shapes_ref.py MIL_CHECK_DRIVER
"""
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
    import torch.nn.functional as tnf
except Exception:  # torch is optional: conv cases are skipped without it
    torch = None

rng = random.Random(20261130)


def ty(shape, dt="fp16"):
    return "tensor<%s, [%s]>" % (dt, ", ".join(str(d) for d in shape))


def ints(v):
    return "tensor<int32, [%d]>([%s])" % (len(v), ", ".join(str(int(x)) for x in v))


def bools(v):
    return "tensor<bool, [%d]>([%s])" % (len(v), ", ".join("true" if x else "false" for x in v))


def zeros_lit(shape):
    def rec(d):
        if d == len(shape):
            return "0"
        return "[" + ", ".join(rec(d + 1) for _ in range(shape[d])) + "]"
    return "%s(%s)" % (ty(shape), rec(0))


def rshape(rank, lo=1, hi=5):
    return [rng.randint(lo, hi) for _ in range(rank)]


def z(shape):
    return np.zeros(shape, dtype=np.float16)


# Each generator returns (inputs [(name, shape, dtype)], call text, [result shapes], result dtype).
def gen_broadcast():
    out = rshape(rng.randint(0, 4))
    a = [d if rng.random() < 0.6 else 1 for d in out][rng.randint(0, len(out)):]
    b = [d if rng.random() < 0.6 else 1 for d in out][rng.randint(0, len(out)):]
    ref = np.broadcast_shapes(tuple(a), tuple(b))
    op = rng.choice(["add", "sub", "mul", "real_div", "pow"])
    return [("a", a, "fp16"), ("b", b, "fp16")], "%s(x = a, y = b)" % op, [ref], "fp16"


def gen_matmul():
    batch = rshape(rng.randint(0, 2))
    m, k, n = rshape(3)
    ba = [d if rng.random() < 0.6 else 1 for d in batch][rng.randint(0, len(batch)):]
    bb = [d if rng.random() < 0.6 else 1 for d in batch][rng.randint(0, len(batch)):]
    a, b = ba + [m, k], bb + [k, n]
    if rng.random() < 0.2:
        a = [k]
    if rng.random() < 0.2:
        b = [k]
    tx = len(a) >= 2 and rng.random() < 0.5
    ty_ = len(b) >= 2 and rng.random() < 0.5
    xa, xb = z(a), z(b)
    sa = a[:-2] + [a[-1], a[-2]] if tx else a
    sb = b[:-2] + [b[-1], b[-2]] if ty_ else b
    ref = np.matmul(xa, xb).shape
    call = "matmul(transpose_x = bool(%s), transpose_y = bool(%s), x = a, y = b)" % (
        "true" if tx else "false", "true" if ty_ else "false")
    return [("a", sa, "fp16"), ("b", sb, "fp16")], call, [ref], "fp16"


def gen_reduce():
    shape = rshape(rng.randint(1, 4))
    axes = sorted(rng.sample(range(len(shape)), rng.randint(1, len(shape))))
    keep = rng.random() < 0.5
    ref = np.sum(z(shape), axis=tuple(axes), keepdims=keep).shape
    neg = [a - len(shape) if rng.random() < 0.5 else a for a in axes]
    op = rng.choice(["reduce_sum", "reduce_mean", "reduce_max"])
    call = "%s(axes = %s, keep_dims = bool(%s), x = a)" % (op, ints(neg), "true" if keep else "false")
    return [("a", shape, "fp16")], call, [ref], "fp16"


def gen_transpose():
    shape = rshape(rng.randint(1, 5))
    perm = list(range(len(shape)))
    rng.shuffle(perm)
    return [("a", shape, "fp16")], "transpose(perm = %s, x = a)" % ints(perm), [np.transpose(z(shape), perm).shape], "fp16"


def gen_reshape():
    shape = rshape(rng.randint(1, 4))
    total = int(np.prod(shape))
    target = []
    rest = total
    for _ in range(rng.randint(0, 3)):
        divs = [d for d in range(1, rest + 1) if rest % d == 0]
        d = rng.choice(divs)
        target.append(d)
        rest //= d
    target.append(rest)
    rng.shuffle(target)
    ref = np.reshape(z(shape), target).shape
    if rng.random() < 0.5:
        target[rng.randrange(len(target))] = -1
    return [("a", shape, "fp16")], "reshape(shape = %s, x = a)" % ints(target), [ref], "fp16"


def gen_concat():
    shape = rshape(rng.randint(1, 4))
    axis = rng.randrange(len(shape))
    parts = []
    for _ in range(rng.randint(1, 3)):
        s = list(shape)
        s[axis] = rng.randint(1, 4)
        parts.append(s)
    ref = np.concatenate([z(s) for s in parts], axis=axis).shape
    names = ["a%d" % i for i in range(len(parts))]
    call = "concat(axis = int32(%d), interleave = bool(false), values = (%s))" % (
        axis - len(shape) if rng.random() < 0.5 else axis, ", ".join(names))
    return [(n, s, "fp16") for n, s in zip(names, parts)], call, [ref], "fp16"


def gen_split():
    shape = rshape(rng.randint(1, 3), 2, 6)
    axis = rng.randrange(len(shape))
    d = shape[axis]
    if rng.random() < 0.5:
        n = rng.choice([k for k in range(1, d + 1) if d % k == 0])
        refs = [p.shape for p in np.split(z(shape), n, axis=axis)]
        call = "split(axis = int32(%d), num_splits = int32(%d), x = a)" % (axis, n)
    else:
        cuts = sorted(rng.sample(range(1, d), rng.randint(0, min(3, d - 1))))
        refs = [p.shape for p in np.split(z(shape), cuts, axis=axis)]
        sizes = [e - b for b, e in zip([0] + cuts, cuts + [d])]
        call = "split(axis = int32(%d), split_sizes = %s, x = a)" % (axis, ints(sizes))
    return [("a", shape, "fp16")], call, refs, "fp16"


def gen_slice_by_index():
    shape = rshape(rng.randint(1, 4), 1, 7)
    begin, end, stride, bm, em, sq, index = [], [], [], [], [], [], []
    for d in shape:
        if rng.random() < 0.15:  # squeeze this dimension
            b = rng.randrange(d)
            begin.append(b); end.append(b + 1); stride.append(1); bm.append(False); em.append(False); sq.append(True)
            index.append(b)
            continue
        b, e = rng.randint(-d - 2, d + 2), rng.randint(-d - 2, d + 2)
        s = rng.choice([1, 1, 2, 3, -1, -2])
        mb, me = rng.random() < 0.2, rng.random() < 0.2
        begin.append(b); end.append(e); stride.append(s); bm.append(mb); em.append(me); sq.append(False)
        index.append(slice(None if mb else b, None if me else e, s))
    ref = z(shape)[tuple(index)].shape
    call = "slice_by_index(begin = %s, begin_mask = %s, end = %s, end_mask = %s, squeeze_mask = %s, stride = %s, x = a)" % (
        ints(begin), bools(bm), ints(end), bools(em), bools(sq), ints(stride))
    return [("a", shape, "fp16")], call, [ref], "fp16"


def gen_slice_by_size():
    shape = rshape(rng.randint(1, 4), 1, 7)
    begin = [rng.randrange(d) for d in shape]
    size = [rng.choice([-1, rng.randint(0, d - b)]) for d, b in zip(shape, begin)]
    index = tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))
    call = "slice_by_size(begin = %s, size = %s, x = a)" % (ints(begin), ints(size))
    return [("a", shape, "fp16")], call, [z(shape)[index].shape], "fp16"


def gen_gather():
    shape = rshape(rng.randint(1, 4))
    axis = rng.randrange(len(shape))
    ishape = rshape(rng.randint(0, 2))
    ref = np.take(z(shape), np.zeros(ishape, dtype=np.int32), axis=axis).shape
    call = "gather(axis = int32(%d), indices = i, x = a)" % axis
    return [("a", shape, "fp16"), ("i", ishape, "int32")], call, [ref], "fp16"


def gen_tile():
    shape = rshape(rng.randint(1, 4))
    reps = rshape(len(shape), 1, 3)
    return [("a", shape, "fp16")], "tile(reps = %s, x = a)" % ints(reps), [np.tile(z(shape), reps).shape], "fp16"


def gen_expand_dims():
    shape = rshape(rng.randint(0, 3))
    k = rng.randint(1, 2)
    axes = rng.sample(range(len(shape) + k), k)
    ref = np.expand_dims(z(shape), tuple(axes)).shape
    axes = [a - (len(shape) + k) if rng.random() < 0.5 else a for a in axes]
    return [("a", shape, "fp16")], "expand_dims(axes = %s, x = a)" % ints(axes), [ref], "fp16"


def gen_squeeze():
    shape = [rng.choice([1, 1, 2, 3]) for _ in range(rng.randint(1, 4))]
    ones = [i for i, d in enumerate(shape) if d == 1]
    if ones and rng.random() < 0.6:
        axes = rng.sample(ones, rng.randint(1, len(ones)))
        return [("a", shape, "fp16")], "squeeze(axes = %s, x = a)" % ints(axes), [np.squeeze(z(shape), tuple(axes)).shape], "fp16"
    return [("a", shape, "fp16")], "squeeze(x = a)", [np.squeeze(z(shape)).shape], "fp16"


def gen_select():
    out = rshape(rng.randint(0, 3))
    parts = [[d if rng.random() < 0.6 else 1 for d in out][rng.randint(0, len(out)):] for _ in range(3)]
    ref = np.broadcast_shapes(*[tuple(p) for p in parts])
    return [("c", parts[0], "bool"), ("a", parts[1], "fp16"), ("b", parts[2], "fp16")], "select(a = a, b = b, cond = c)", [ref], "fp16"


def gen_sdpa():
    batch = rshape(rng.randint(1, 2))
    L, S, E, Ev = rshape(4)
    q, k, v = batch + [L, E], batch + [S, E], batch + [S, Ev]
    ref = np.matmul(np.matmul(z(q), np.swapaxes(z(k), -1, -2)), z(v)).shape
    return [("q", q, "fp16"), ("k", k, "fp16"), ("v", v, "fp16")], "scaled_dot_product_attention(key = k, query = q, value = v)", [ref], "fp16"


def gen_linear():
    lead = rshape(rng.randint(0, 2))
    din, dout = rng.randint(1, 4), rng.randint(1, 4)
    ref = (z(lead + [din]) @ z([dout, din]).T).shape
    call = "linear(weight = %s, x = a)" % zeros_lit([dout, din])
    return [("a", lead + [din], "fp16")], call, [ref], "fp16"


def gen_conv():
    ns = rng.randint(1, 2)
    groups = rng.choice([1, 1, 2])
    cin, cout = groups * rng.randint(1, 3), groups * rng.randint(1, 3)
    k = rshape(ns, 1, 3)
    dil = rshape(ns, 1, 2)
    stride = rshape(ns, 1, 3)
    pad = rshape(ns, 0, 2)
    sp = [rng.randint(dl * (kk - 1) + 1, 9) for kk, dl in zip(k, dil)]
    x = [1, cin] + sp
    w = [cout, cin // groups] + k
    conv = tnf.conv1d if ns == 1 else tnf.conv2d
    ref = tuple(conv(torch.zeros(x), torch.zeros(w), stride=stride, padding=pad, dilation=dil, groups=groups).shape)
    pads = [p for p in pad for _ in (0, 1)]  # symmetric: begin, end per spatial dim
    call = "conv(dilations = %s, groups = int32(%d), pad = %s, pad_type = string(\"custom\"), strides = %s, weight = w, x = a)" % (
        ints(dil), groups, ints(pads), ints(stride))
    return [("a", x, "fp16"), ("w", w, "fp16")], call, [ref], "fp16"


GENERATORS = [gen_broadcast, gen_matmul, gen_reduce, gen_transpose, gen_reshape, gen_concat, gen_split,
              gen_slice_by_index, gen_slice_by_size, gen_gather, gen_tile, gen_expand_dims, gen_squeeze,
              gen_select, gen_sdpa, gen_linear] + ([gen_conv] if torch is not None else [])
CASES_PER_OP = 60


def program(cases, perturb):
    lines = ["program(1.3)", "{"]
    stmt_lines = []
    for i, (inputs, call, refs, dt) in enumerate(cases):
        args = ", ".join("%s %s" % (ty(s, d), n) for n, s, d in inputs)
        lines.append("    func f%d<ios18>(%s) {" % (i, args))
        results = []
        for j, r in enumerate(refs):
            r = list(r)
            if perturb and j == 0:
                if r:
                    r[rng.randrange(len(r))] += 1
                else:
                    r = [1]  # a scalar declared as a vector
            results.append("%s r%d" % (ty(r, dt), j))
        stmt_lines.append(len(lines) + 1)
        lines.append("        %s = %s[name = string(\"r\")];" % (", ".join(results), call))
        lines.append("    } -> (r0);")
    lines.append("}")
    return "\n".join(lines) + "\n", stmt_lines


def run(driver, text):
    with tempfile.NamedTemporaryFile("w", suffix=".mil", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        out = subprocess.run([driver, path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    return out.returncode, out.stdout


def main():
    driver = sys.argv[1]
    cases = [g() for g in GENERATORS for _ in range(CASES_PER_OP)]
    failures = 0
    text, _ = program(cases, perturb=False)
    rc, out = run(driver, text)
    if rc != 0 or out:
        print("reference shapes rejected:\n" + out[:4000])
        failures += 1
    text, stmt_lines = program(cases, perturb=True)
    rc, out = run(driver, text)
    errs = [l for l in out.splitlines() if ": error: " in l]
    want = set(stmt_lines)
    got = {int(l.split(":")[0]) for l in errs if "is declared" in l and "but the op gives" in l}
    if rc != 1 or len(errs) != len(cases) or got != want:
        print("perturbed shapes: %d errors for %d cases; missing lines %s" % (len(errs), len(cases), sorted(want - got)[:10]))
        print(out[:4000])
        failures += 1
    print("%d cases over %d ops (%s): %s" % (len(cases), len(GENERATORS), "with conv" if torch else "no torch: conv skipped",
                                          "ok" if not failures else "FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
