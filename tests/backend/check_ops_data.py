# check_ops_data.py — scatter (three index forms, every mode), argsort and
# topk, quantize / dequantize, the random ops, gather_nd, the resize family
# and resample / affine, the recurrent ops (rnn, lstm, gru) and the
# compressed-weight forms (ios16/17 packed, vector palettes) against NumPy
# (PyTorch and coremltools cross-check some references), for each
# dtype MIL allows them: fp32, fp16 (relative L2 <= 2e-3 against a reference
# on fp16-rounded inputs), int32 and the int8 / uint8 of quantization
# (exact).  Run by check_ops.py, whose helpers (case, const, ty, R, rng, as_dt,
# op_case) it uses.

SC_MODES = ("update", "add", "sub", "mul", "div", "max", "min")


def sc_op(mode, y, u, dt):
    if mode == "update":
        return u
    if mode == "add":
        return y + u
    if mode == "sub":
        return y - u
    if mode == "mul":
        return y * u
    if mode == "div":
        if dt == "int32":
            return 0 if u == 0 else int(np.trunc(y / u))
        return y / u
    return max(y, u) if mode == "max" else min(y, u)


def sc_ref(kind, data, idx, upd, axis, mode, dt):
    """The updates applied one at a time, in order (duplicates: the last wins)."""
    y = data.astype(np.float64).copy()
    u = upd.astype(np.float64)
    if kind == "scatter":
        for p in np.ndindex(*u.shape):
            q = list(p)
            q[axis] = idx[p[axis]] % data.shape[axis]
            y[tuple(q)] = sc_op(mode, y[tuple(q)], u[p], dt)
    elif kind == "scatter_along_axis":
        for p in np.ndindex(*u.shape):
            q = list(p)
            q[axis] = idx[p] % data.shape[axis]
            y[tuple(q)] = sc_op(mode, y[tuple(q)], u[p], dt)
    else:
        k = idx.shape[-1]
        for p in np.ndindex(*u.shape):
            lead, rest = p[:idx.ndim - 1], p[idx.ndim - 1:]
            q = tuple(int(i) % data.shape[j] for j, i in enumerate(idx[lead])) + rest
            y[q] = sc_op(mode, y[q], u[p], dt)
    return y


def scatter_case(kind, dt, mode):
    data = as_dt(R(4, 5, 3) * 3, dt)
    if kind == "scatter":  # axis 1, duplicates and a negative index
        idx, axis = np.array([3, -1, 0, 3]), 1
        upd = as_dt(R(4, 4, 3) * 3, dt)
    elif kind == "scatter_along_axis":
        idx, axis = rng.integers(-3, 3, (2, 5, 3)), 0
        upd = as_dt(R(2, 5, 3) * 3, dt)
    else:  # indices [2, 2, 2]: four (i, j) pairs, one repeated, updates [2, 2, 3]
        idx, axis = np.array([[[1, 2], [3, -1]], [[1, 2], [0, 0]]]), None
        upd = as_dt(R(2, 2, 3) * 3, dt)
    if mode == "div":
        upd = np.where(np.abs(upd) < 1, 2, upd).astype(upd.dtype)
    want = sc_ref(kind, data, idx, upd, axis, mode, dt)
    body = [const("i", idx, "int32"), 'string m = const()[val = string("%s")];' % mode]
    axarg = ""
    if axis is not None:
        body.append(const("ax", axis, "int32"))
        axarg = ", axis = ax"
    body.append("%s y = %s(data = d, indices = i, updates = u%s, mode = m);" % (ty(data, dt), kind, axarg))
    case("%s_%s_%s" % (kind, mode, dt), {"d": (data, dt), "u": (upd, dt)}, body, {"y": (want, dt)}, tol=1e-5)


for kind in ("scatter", "scatter_along_axis", "scatter_nd"):
    for dt in ("fp32", "int32"):
        for mode in SC_MODES:
            scatter_case(kind, dt, mode)
    for mode in ("update", "add", "max"):
        scatter_case(kind, "fp16", mode)


# argsort and topk: stable (equal values keep their order), so the ties of
# rounded data have one right answer
def sort_ref(v, axis, asc):
    return np.argsort(v if asc else -v, axis=axis, kind="stable")


xs = R(3, 6, 4) * 3
for dt in ("fp32", "fp16", "int32"):
    for axis, asc in [(-1, False), (1, True), (0, False)]:
        xv = as_dt(xs, dt)
        op_case("argsort_%s_%d%d" % (dt, axis, asc), "argsort", {"x": xs}, dt,
                lambda v: sort_ref(v, axis, asc), [("axis", axis, "int32"), ("ascending", asc, "bool")], out_dt="int32")
    for axis, k, asc in [(-1, 2, False), (1, 4, True), (1, 6, False)]:
        xv = as_dt(xs, dt)
        ix = np.take(sort_ref(xv.astype(np.float64), axis, asc), np.arange(k), axis=axis)
        vals = np.take_along_axis(xv.astype(np.float64), ix, axis)
        shp = ty(vals, dt)
        case("topk_%s_%d%d%d" % (dt, axis, k, asc), {"x": (xv, dt)},
             [const("k", k, "int32"), const("ax", axis, "int32"), const("as", asc, "bool"),
              "%s v, %s i = topk(x = x, k = k, axis = ax, ascending = as);" % (shp, ty(ix, "int32"))],
             {"v": (vals, dt), "i": (ix, "int32")})
xv = as_dt(xs, "fp32")
ix = sort_ref(xv, -1, False)[..., :3]
case("topk_values_only", {"x": (xv, "fp32")},
     [const("k", 3, "int32"), const("ri", False, "bool"),
      "%s v = topk(x = x, k = k, return_indices = ri);" % ty(ix)],
     {"v": (np.take_along_axis(xv.astype(np.float64), ix, -1), "fp32")})


# quantize / dequantize: per tensor and per channel, int8 and uint8, with
# and without a zero point; quantized values leave through a cast to int32
def quant_ref(x, scale, zp, odt, axis):
    sh = [1] * x.ndim
    if np.ndim(scale):
        sh[axis] = -1
    q = np.around(x.astype(np.float32) / np.reshape(scale, sh).astype(np.float32)).astype(np.float64)
    if zp is not None:
        q = q + np.reshape(zp, sh)
    lo, hi = (0, 255) if odt == "uint8" else (-128, 127)
    return np.clip(q, lo, hi)


xq = R(2, 3, 4) * 40
for dt in ("fp32", "fp16"):
    for odt, per_ch, with_zp in [("int8", False, False), ("uint8", False, True), ("int8", True, True), ("uint8", True, False)]:
        scale = (np.abs(R(3)) * 0.5 + 0.2) if per_ch else np.float32(0.37)
        zp = (rng.integers(0, 20, 3) if per_ch else np.int64(100 if odt == "uint8" else -3)) if with_zp else None
        scale = as_dt(scale, dt)
        xin = as_dt(xq, dt)
        want = quant_ref(xin, scale, zp, odt, 1)
        deq = (want - (np.reshape(zp, [1, -1, 1]) if per_ch and zp is not None else (zp if zp is not None else 0))) * \
            (np.reshape(scale, [1, -1, 1]) if per_ch else scale)
        body = [const("sc", scale, dt), 'string od = const()[val = string("%s")];' % odt]
        extra = ""
        if with_zp:
            body.append(const("zp", zp, odt))
            extra += ", zero_point = zp"
        if per_ch:
            body.append(const("ax", 1, "int32"))
            extra += ", axis = ax"
        body += ["tensor<%s, [2, 3, 4]> q = quantize(input = x, scale = sc%s, output_dtype = od);" % (odt, extra),
                 'tensor<int32, [2, 3, 4]> y = cast(x = q, dtype = string("int32"));',
                 "tensor<%s, [2, 3, 4]> z = dequantize(input = q, scale = sc%s);" % (dt, extra)]
        case("quantize_%s_%s_%d%d" % (dt, odt, per_ch, with_zp), {"x": (xin, dt)}, body,
             {"y": (want, "int32"), "z": (deq, dt)}, tol=1e-5)
# dequantize of a constant int8 tensor (the usual form: a quantized weight)
qw = rng.integers(-128, 128, (3, 5))
for dt in ("fp32", "fp16"):
    zpw, scw, xw = rng.integers(-4, 4, 3), as_dt(np.abs(R(3)) * 0.1 + 0.01, dt), as_dt(R(3, 5), dt)
    case("dequantize_const_" + dt, {"x": (xw, dt)},
         [const("q", qw, "int8"), const("zp", zpw, "int8"), const("sc", scw, dt), const("ax", 0, "int32"),
          "tensor<%s, [3, 5]> w = dequantize(input = q, zero_point = zp, scale = sc, axis = ax);" % dt,
          "tensor<%s, [3, 5]> y = add(x = x, y = w);" % dt],
         {"y": (xw + (qw - zpw[:, None]) * scw[:, None].astype(np.float64), dt)}, tol=1e-5)


# random ops: the documented counter-based generator, in NumPy
def mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uni(seed, j):
    with np.errstate(over="ignore"):
        key = mix(np.array([seed], np.int64).astype(np.uint64))
        r = mix(key + (np.asarray(j, np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15))
    return (r >> np.uint64(40)).astype(np.float64) / 16777216.0


shp = (3, 4, 5)
n = int(np.prod(shp))
for dt in ("fp32", "fp16"):
    for seed in (-1, 7):
        u_ = uni(seed, np.arange(n)).reshape(shp)
        u2 = uni(seed, np.arange(2 * n))
        nrm = np.sqrt(-2 * np.log(1 - u2[0::2])) * np.cos(2 * np.pi * u2[1::2])
        a16 = lambda v: float(as_dt(np.float32(v), dt))
        for name, params, want in [
                ("random_uniform", [("low", -2.0), ("high", 3.0)], a16(-2.0) + (a16(3.0) - a16(-2.0)) * u_),
                ("random_normal", [("mean", 1.5), ("stddev", 0.5)], 1.5 + 0.5 * nrm.reshape(shp)),
                ("random_bernoulli", [("prob", 0.3)], (u_ < a16(0.3)).astype(np.float64))]:
            body = [const("sh", np.array(shp), "int32"), const("sd", seed, "int32")] + [const(a, v, dt) for a, v in params]
            body.append("%s y = %s(shape = sh, %s, seed = sd);" % (ty(want, dt), name, ", ".join("%s = %s" % (a, a) for a, _ in params)))
            case("%s_%s_%d" % (name, dt, seed), {"x": (np.zeros(1, np.float32), "fp32")}, body, {"y": (want, dt)}, tol=1e-5)
# the distribution itself, on many draws: mean and deviation within 4 standard errors
big = uni(3, np.arange(200000))
assert abs(big.mean() - 0.5) < 4 * np.sqrt(1 / 12 / big.size), "the generator's uniforms are not uniform"


def categorical_ref(x, size, seed, probs):
    rows = x.reshape(-1, x.shape[-1]).astype(np.float64)
    out = np.zeros((rows.shape[0], size))
    for r, row in enumerate(rows):
        w = np.maximum(row, 0) if probs else np.exp(row - row.max())
        cdf = np.cumsum(w)
        for s_ in range(size):
            t = uni(seed, r * size + s_)[0] * cdf[-1]
            j = 0
            while j < len(row) - 1 and not cdf[j] > t:
                j += 1
            out[r, s_] = j
    return out.reshape(x.shape[:-1] + (size,))


xl_ = R(2, 3, 6)
for dt in ("fp32", "fp16"):
    for mode in ("logits", "probs"):
        xin = as_dt(np.abs(xl_) if mode == "probs" else xl_ * 2, dt)
        want = categorical_ref(xin, 5, 11, mode == "probs")
        case("random_categorical_%s_%s" % (mode, dt), {"x": (xin, dt)},
             ['string m = const()[val = string("%s")];' % mode, const("n", 5, "int32"), const("sd", 11, "int32"),
              "%s y = random_categorical(x = x, mode = m, size = n, seed = sd);" % ty(want, dt)],
             {"y": (want, dt)})


# cond: a run-time predicate (both branches run, the results selected), a
# constant one (only its branch is lowered), a nested cond, every dtype
def cond_case(label, pred, dt, const_pred=False, nested=False):
    x, z = as_dt(R(2, 3) * 3, dt), as_dt(R(2, 3) * 3, dt)
    if dt == "bool":
        x, z = rng.random((2, 3)) > 0.5, rng.random((2, 3)) > 0.5
        ta, fb = "logical_not(x = x)", "logical_and(x = x, y = z)"
        tref, fref = np.logical_not(x), np.logical_and(x, z)
    else:
        ta, fb = "abs(x = x)", "maximum(x = x, y = z)"
        tref, fref = np.abs(x.astype(np.float64)), np.maximum(x, z).astype(np.float64)
    inner = fb
    if nested:  # the false branch is itself a cond on the negated predicate
        inner = None
    lines = []
    ins = {"x": (x, dt), "z": (z, dt)}
    if const_pred:
        lines.append(const("p", pred, "bool"))
    else:
        ins = {"p": (np.array(pred), "bool"), **ins}
    t = "tensor<%s, [2, 3]>" % dt
    lines += ["%s y, tensor<int32, [2]> w = cond(pred = p) {" % t,
              "    () {",
              "        %s a = %s;" % (t, ta),
              "        tensor<int32, [2]> c = const()[val = tensor<int32, [2]>([1, 2])];",
              "    } -> (a, c);",
              "    () {"]
    if nested:
        lines += ["        bool q = logical_not(x = p);",
                  "        %s b, tensor<int32, [2]> d = cond(pred = q) {" % t,
                  "            () {",
                  "                %s b1 = %s;" % (t, fb),
                  "                tensor<int32, [2]> d1 = const()[val = tensor<int32, [2]>([5, 6])];",
                  "            } -> (b1, d1);",
                  "            () {",
                  "            } -> (x, w0);",
                  "        };"]
        lines.insert(0, "tensor<int32, [2]> w0 = const()[val = tensor<int32, [2]>([7, 8])];")
    else:
        lines += ["        %s b = %s;" % (t, fb),
                  "        tensor<int32, [2]> d = const()[val = tensor<int32, [2]>([3, 4])];"]
    lines += ["    } -> (b, d);", "};"]
    wref = np.array([1, 2]) if pred else np.array([5, 6] if nested else [3, 4])
    case(label, ins, lines, {"y": (tref if pred else fref, dt), "w": (wref, "int32")})


for dt in ("fp32", "fp16", "int32", "bool"):
    for pred in (True, False):
        cond_case("cond_%s_%d" % (dt, pred), pred, dt)
for pred in (True, False):
    cond_case("cond_const_%d" % pred, pred, "fp32", const_pred=True)
    cond_case("cond_nested_%d" % pred, pred, "fp32", nested=True)


# while_loop: a trip count read at run time (0 and 3 iterations), every
# dtype of loop variable, variables swapped each iteration, a nested loop
def while_case(label, trips, dt):
    x = as_dt(R(2, 3) * 3, dt) if dt != "bool" else rng.random((2, 3)) > 0.5
    t = "tensor<%s, [2, 3]>" % dt
    step = {"fp32": "mul(x = s, y = fp32(0.5))", "fp16": "mul(x = s, y = fp16(0.5))", "int32": "add(x = s, y = int32(3))",
            "bool": "logical_not(x = s)"}[dt]
    lines = ["int32 i0 = const()[val = int32(0)];",
             "int32 m, %s y = while_loop(loop_vars = (i0, x)) {" % t,
             "    (int32 i, %s s) {" % t,
             "        bool go = less(x = i, y = n);",
             "    } -> (go);",
             "    (int32 i, %s s) {" % t,
             "        int32 j = add(x = i, y = int32(1));",
             "        %s u = %s;" % (t, step),
             "    } -> (j, u);",
             "};"]
    want = x.astype(np.float64) if dt != "bool" else x.copy()
    for _ in range(trips):
        want = {"fp32": lambda v: v * 0.5, "fp16": lambda v: v * 0.5, "int32": lambda v: v + 3, "bool": np.logical_not}[dt](want)
    case(label, {"n": (np.array(trips), "int32"), "x": (x, dt)}, lines, {"m": (np.array(trips), "int32"), "y": (want, dt)})


for dt in ("fp32", "fp16", "int32", "bool"):
    for trips in (0, 3):
        while_case("while_%s_%d" % (dt, trips), trips, dt)


# int8, uint8, int16 and uint16 inputs and outputs (int32 inside, converted
# at the boundary; an output wraps, as numpy's astype): data movement in the
# dtype itself, arithmetic after a cast to int32, and a cast back
for dt, lo, hi in (("int8", -128, 128), ("uint8", 0, 256), ("int16", -32768, 32768), ("uint16", 0, 65536)):
    npdt = np.dtype(dt)
    xv = rng.integers(lo, hi, (2, 3)).astype(npdt)
    gi = np.array([2, 0, 2], np.int32)
    moved = np.concatenate([xv.T, xv.T[::-1]], 0)[gi]  # [3, 2]
    wide = xv.astype(np.int64) * 3 - 7  # within float32 integers: the harness writes outputs as fp32
    case("narrow_int_" + dt, {"x": (xv, dt)},
         ["tensor<%s, [3, 2]> t = transpose(x = x, perm = tensor<int32, [2]>([1, 0]));" % dt,
          "tensor<%s, [3, 2]> r = reverse(x = t, axes = tensor<int32, [1]>([0]));" % dt,
          "tensor<%s, [6, 2]> c = concat(values = (t, r), axis = int32(0), interleave = bool(false));" % dt,
          const("gi", gi, "int32"),
          "tensor<%s, [3, 2]> g = gather(x = c, indices = gi, axis = int32(0));" % dt,
          'tensor<int32, [2, 3]> w = cast(x = x, dtype = string("int32"));',
          "tensor<int32, [2, 3]> m = mul(x = w, y = int32(3));",
          "tensor<int32, [2, 3]> z = sub(x = m, y = int32(7));",
          'tensor<%s, [2, 3]> n = cast(x = z, dtype = string("%s"));' % (dt, dt)],
         {"g": (moved, dt), "z": (wide, "int32"), "n": (wide.astype(npdt), dt)})


# fixed-length lists (dynamic_length false, a constant init_length): one
# buffer [N, *elem], zeros to start; written, scattered, read and gathered
# by row, also as a while_loop's variable
def list_case(label, dt):
    lt = "list<tensor<%s, [2, 3]>, 4>" % dt
    x, y, z = as_dt(R(2, 3) * 3, dt), as_dt(R(2, 3) * 3, dt), as_dt(R(2, 2, 3) * 3, dt)
    rows = np.zeros((4, 2, 3))
    rows[1], rows[3] = x, y
    rows[[0, 2]] = z
    lines = ["int32 e0 = const()[val = int32(2)];", "int32 e1 = const()[val = int32(3)];",
             '%s ls = make_list(dtype = string("%s"), dynamic_length = bool(false), elem_shape = (e0, e1), '
             'init_length = int32(4));' % (lt, dt),
             "%s l1 = list_write(ls = ls, index = int32(1), value = x);" % lt,
             "%s l2 = list_write(ls = l1, index = int32(3), value = y);" % lt,
             "tensor<int32, [2]> zi = const()[val = tensor<int32, [2]>([0, 2])];",
             "%s l3 = list_scatter(ls = l2, indices = zi, value = z);" % lt,
             "tensor<%s, [2, 3]> r = list_read(ls = l3, index = int32(3));" % dt,
             "tensor<%s, [2, 3]> r0 = list_read(ls = l1, index = int32(0));" % dt,
             "tensor<int32, [3]> gi = const()[val = tensor<int32, [3]>([3, 0, 1])];",
             "tensor<%s, [3, 2, 3]> g = list_gather(ls = l3, indices = gi);" % dt,
             "int32 n = list_length(ls = l3);"]
    case(label, {"x": (x, dt), "y": (y, dt), "z": (z, dt)}, lines,
         {"r": (rows[3], dt), "r0": (np.zeros((2, 3)), dt), "g": (rows[[3, 0, 1]], dt), "n": (np.array(4), "int32")})


for dt in ("fp32", "fp16", "int32"):
    list_case("list_fixed_" + dt, dt)
# a list as a while_loop's variable: row i = x · i for i < trips
xl = R(3)
lines = ["int32 e0 = const()[val = int32(3)];",
         'list<tensor<fp32, [3]>, 4> ls = make_list(dtype = string("fp32"), dynamic_length = bool(false), elem_shape = (e0), '
         'init_length = int32(4));',
         "int32 i0 = const()[val = int32(0)];",
         "int32 m, list<tensor<fp32, [3]>, 4> lo = while_loop(loop_vars = (i0, ls)) {",
         "    (int32 i, list<tensor<fp32, [3]>, 4> l) {",
         "        bool go = less(x = i, y = int32(3));",
         "    } -> (go);",
         "    (int32 i, list<tensor<fp32, [3]>, 4> l) {",
         "        fp32 fi = cast(x = i, dtype = string(\"fp32\"));",
         "        tensor<fp32, [3]> v = mul(x = x, y = fi);",
         "        list<tensor<fp32, [3]>, 4> l2 = list_write(ls = l, index = i, value = v);",
         "        int32 j = add(x = i, y = int32(1));",
         "    } -> (j, l2);",
         "};",
         "tensor<int32, [4]> ai = const()[val = tensor<int32, [4]>([0, 1, 2, 3])];",
         "tensor<fp32, [4, 3]> all = list_gather(ls = lo, indices = ai);"]
want = np.array([xl * i for i in range(3)] + [np.zeros(3)])
case("list_in_while_loop", {"x": (xl, "fp32")}, lines, {"all": (want, "fp32")})
a_, b_ = R(2, 2), R(2, 2)
pu, pv = a_.astype(np.float64), b_.astype(np.float64)
for _ in range(5):
    pu, pv = pv, pu + pv
case("while_swap", {"a": (a_, "fp32"), "b": (b_, "fp32")},
     ["int32 i0 = const()[val = int32(0)];",
      "int32 k, tensor<fp32, [2, 2]> p, tensor<fp32, [2, 2]> q = while_loop(loop_vars = (i0, a, b)) {",
      "    (int32 i, tensor<fp32, [2, 2]> u, tensor<fp32, [2, 2]> v) {",
      "        bool go = less(x = i, y = int32(5));",
      "    } -> (go);",
      "    (int32 i, tensor<fp32, [2, 2]> u, tensor<fp32, [2, 2]> v) {",
      "        int32 j = add(x = i, y = int32(1));",
      "        tensor<fp32, [2, 2]> w = add(x = u, y = v);",
      "    } -> (j, v, w);",
      "};"],
     {"k": (np.array(5), "int32"), "p": (pu, "fp32"), "q": (pv, "fp32")})
# nested: an outer loop of n rounds, each an inner loop of 2 doublings, then + x
xn_ = R(3)
acc = xn_.astype(np.float64)
for _ in range(3):
    acc = acc * 4 + xn_
case("while_nested", {"n": (np.array(3), "int32"), "x": (xn_, "fp32")},
     ["int32 i0 = const()[val = int32(0)];",
      "int32 m, tensor<fp32, [3]> y = while_loop(loop_vars = (i0, x)) {",
      "    (int32 i, tensor<fp32, [3]> s) {",
      "        bool go = less(x = i, y = n);",
      "    } -> (go);",
      "    (int32 i, tensor<fp32, [3]> s) {",
      "        int32 j = add(x = i, y = int32(1));",
      "        int32 k0 = const()[val = int32(0)];",
      "        int32 kk, tensor<fp32, [3]> d = while_loop(loop_vars = (k0, s)) {",
      "            (int32 k, tensor<fp32, [3]> e) {",
      "                bool more = less(x = k, y = int32(2));",
      "            } -> (more);",
      "            (int32 k, tensor<fp32, [3]> e) {",
      "                int32 k1 = add(x = k, y = int32(1));",
      "                tensor<fp32, [3]> e2 = add(x = e, y = e);",
      "            } -> (k1, e2);",
      "        };",
      "        tensor<fp32, [3]> t = add(x = d, y = x);",
      "    } -> (j, t);",
      "};"],
     {"m": (np.array(3), "int32"), "y": (acc, "fp32")})


# layout and index ops: views, copies and gathers
xa = R(2, 8, 3, 4)
for dt in ("fp32", "fp16"):
    op_case("pixel_shuffle_" + dt, "pixel_shuffle", {"x": xa}, dt,
            lambda v: v.reshape(2, 2, 2, 2, 3, 4).transpose(0, 1, 4, 2, 5, 3).reshape(2, 2, 6, 8), [("upscale_factor", 2, "int32")])
    op_case("pixel_unshuffle_" + dt, "pixel_unshuffle", {"x": R(2, 2, 6, 8)}, dt,
            lambda v: v.reshape(2, 2, 3, 2, 4, 2).transpose(0, 1, 3, 5, 2, 4).reshape(2, 8, 3, 4), [("downscale_factor", 2, "uint32")])
    op_case("crop_" + dt, "crop", {"x": xa}, dt, lambda v: v[:, :, 1:2, 1:3],
            [("crop_height", np.array([1, 1]), "int32"), ("crop_width", np.array([1, 1]), "int32")])
for dt in ("fp32", "fp16", "int32"):
    xw = R(3, 7, 2) * 3
    op_case("sliding_windows_" + dt, "sliding_windows", {"x": xw}, dt,
            lambda v: np.stack([v[:, k * 2:k * 2 + 3] for k in range(3)], 1),
            [("axis", 1, "int32"), ("size", 3, "int32"), ("stride", 2, "int32")])
xp_ = R(2, 3, 4) * 3
for dt in ("fp32", "fp16"):
    for mode, npm in [("constant", "constant"), ("reflect", "reflect"), ("replicate", "edge")]:
        xv = as_dt(xp_, dt)
        cv = 1.5
        want = np.pad(xv.astype(np.float64), [(0, 0), (1, 2), (2, 1)], npm, **({"constant_values": cv} if mode == "constant" else {}))
        body = [const("pd", np.array([1, 2, 2, 1]), "int32"), 'string m = const()[val = string("%s")];' % mode]
        extra = ""
        if mode == "constant":
            body.append(const("cv", cv, dt))
            extra = ", constant_val = cv"
        body.append("%s y = pad(x = x, pad = pd, mode = m%s);" % (ty(want, dt), extra))
        case("pad_%s_%s" % (mode, dt), {"x": (xv, dt)}, body, {"y": (want, dt)})
# one_hot: int32, fp32 and bool values, the axis inside and last
oi = rng.integers(0, 5, (2, 3))
for dt, on, off in [("int32", 7, -1), ("fp32", 0.5, -2.0), ("fp16", 1.0, 0.0), ("bool", True, False)]:
    for axis in (-1, 1):
        want = np.where(np.expand_dims(oi, axis % 3) == np.arange(5).reshape([5 if i == axis % 3 else 1 for i in range(3)]), on, off)
        case("one_hot_%s_%d" % (dt, axis), {"i": (oi, "int32")},
             [const("n", 5, "int32"), const("ax", axis, "int32"), const("on", on, dt), const("off", off, dt),
              "%s y = one_hot(indices = i, one_hot_vector_size = n, axis = ax, on_value = on, off_value = off);" % ty(want, dt)],
             {"y": (want, dt)})
# gather_nd: depth 1 and 2, negative components
xg_ = R(4, 3, 5) * 3
for dt in ("fp32", "fp16", "int32"):
    for idx in (np.array([[1, 2], [3, -1], [0, 0]]), np.array([[2], [-4]]), np.array([1, 2, 4])):
        xv = as_dt(xg_, dt)
        want = np.array([xv[tuple(int(c) for c in row)] for row in idx.reshape(-1, idx.shape[-1])]).astype(np.float64)
        want = want.reshape(idx.shape[:-1] + want.shape[1:])
        case("gather_nd_%s_%s" % (dt, "x".join(map(str, idx.shape))), {"x": (xv, dt)},
             [const("i", idx, "int32"), "%s y = gather_nd(x = x, indices = i);" % ty(want, dt)], {"y": (want, dt)})
# gather_nd with batch_dims 1 and 2: indices' leading dims are x's batch dims
xb_ = R(2, 3, 4, 5) * 3
for dt in ("fp32", "fp16", "int32", "int8"):
    xv = as_dt(xb_, dt if dt != "int8" else "int32")
    for bd, idx in ((1, rng.integers(-3, 3, (2, 4, 2))), (2, rng.integers(-4, 4, (2, 3, 1))), (1, rng.integers(-3, 3, (2, 1)))):
        rows = []
        for p in np.ndindex(*idx.shape[:-1]):
            rows.append(xv[p[:bd] + tuple(int(c) for c in idx[p])])
        want = np.array(rows).reshape(idx.shape[:-1] + xv.shape[bd + idx.shape[-1]:]).astype(np.float64)
        # int8 enters and leaves through casts (the CPU backend's I/O has no int8)
        body = [const("i", idx, "int32"), const("bd", bd, "int32")]
        if dt == "int8":
            body += ['%s x8 = cast(x = x, dtype = string("int8"));' % ty(xv, "int8"),
                     "%s y8 = gather_nd(x = x8, indices = i, batch_dims = bd);" % ty(want, "int8"),
                     '%s y = cast(x = y8, dtype = string("int32"));' % ty(want, "int32")]
        else:
            body.append("%s y = gather_nd(x = x, indices = i, batch_dims = bd);" % ty(want, dt))
        io = "int32" if dt == "int8" else dt
        case("gather_nd_b%d_%s_%s" % (bd, dt, "x".join(map(str, idx.shape))), {"x": (xv, io)}, body, {"y": (want, io)})
# einsum, Core ML's two forms, with a broadcast batch dim
for dt in ("fp32", "fp16"):
    a3, b3 = as_dt(R(2, 3, 4), dt), as_dt(R(4, 1, 5), dt)
    w3 = np.einsum("abc,cbd->abd", a3.astype(np.float64), np.broadcast_to(b3, (4, 3, 5)).astype(np.float64))
    case("einsum3_" + dt, {"a": (a3, dt), "b": (b3, dt)},
         ['%s y = einsum(values = (a, b), equation = string("abc,cbd->abd"));' % ty(w3, dt)], {"y": (w3, dt)}, tol=1e-5)
    a4, b4 = as_dt(R(2, 3, 4, 5), dt), as_dt(R(2, 5, 4, 6), dt)
    w4 = np.einsum("abcd,adce->abce", a4.astype(np.float64), b4.astype(np.float64))
    case("einsum4_" + dt, {"a": (a4, dt), "b": (b4, dt)},
         ['%s y = einsum(values = (a, b), equation = string("abcd,adce->abce"));' % ty(w4, dt)], {"y": (w4, dt)}, tol=1e-5)
# fill_like, reshape_like, range_1d
case("fill_like", {"x": (R(2, 3), "fp32")}, [const("v", 4, "int32"), "tensor<int32, [2, 3]> y = fill_like(ref_tensor = x, value = v);"],
     {"y": (np.full((2, 3), 4), "int32")})
xr_ = R(2, 6)
case("reshape_like", {"x": (xr_, "fp32"), "r": (R(3, 4, 5), "fp32")},
     [const("b0", 0, "int32"), const("e0", 2, "int32"), const("m0", False, "bool"),
      "tensor<fp32, [3, 4]> y = reshape_like(x = x, ref_tensors = (r), begins = (b0), ends = (e0), end_masks = (m0));"],
     {"y": (xr_.reshape(3, 4), "fp32")})
for dt, (st, en, sp) in [("int32", (2, 11, 3)), ("fp32", (-1.0, 1.0, 0.25)), ("fp16", (0.0, 2.0, 0.5))]:
    want = np.arange(st, en, sp)
    case("range_1d_" + dt, {"x": (R(1), "fp32")},
         [const("s", st, dt), const("e", en, dt), const("p", sp, dt), "%s y = range_1d(start = s, end = e, step = p);" % ty(want, dt)],
         {"y": (want, dt)})
# slice_update: a strided slice, a squeezed axis, every dtype
xs_ = R(4, 5, 6) * 3
for dt in ("fp32", "fp16", "int32", "bool"):
    xv = as_dt(xs_, dt) if dt != "bool" else rng.random((4, 5, 6)) > 0.5
    uv = as_dt(R(2, 3) * 3, dt) if dt != "bool" else rng.random((2, 3)) > 0.5
    want = xv.astype(np.float64) if dt != "bool" else xv.copy()
    want[1:4:2, 2, 0:6:2] = uv
    case("slice_update_" + dt, {"x": (xv, dt), "u": (uv, dt)},
         [const("b", np.array([1, 2, 0]), "int32"), const("e", np.array([4, 3, 6]), "int32"), const("st", np.array([2, 1, 2]), "int32"),
          const("sq", np.array([False, True, False]), "bool"),
          "%s y = slice_update(x = x, update = u, begin = b, end = e, stride = st, squeeze_mask = sq);" % ty(want, dt)],
         {"y": (want, dt)})
# reverse_sequence: lengths at run time, batch before and after the sequence axis
xq_ = R(3, 5, 2) * 3
lens = np.array([2, 5, 0])
for dt in ("fp32", "fp16", "int32"):
    for sa, ba in ((1, 0), (0, 2)):
        xv = as_dt(xq_ if sa == 1 else np.transpose(xq_, (1, 2, 0)), dt).copy()
        want = xv.astype(np.float64).copy()
        for b in range(3):
            L = lens[b]
            if sa == 1:
                want[b, :L] = want[b, :L][::-1]
            else:
                want[:L, :, b] = want[:L, :, b][::-1]
        case("reverse_sequence_%s_%d%d" % (dt, sa, ba), {"x": (xv, dt), "l": (lens, "int32")},
             [const("sa", sa, "int32"), const("ba", ba, "int32"),
              "%s y = reverse_sequence(x = x, lengths = l, seq_axis = sa, batch_axis = ba);" % ty(want, dt)],
             {"y": (want, dt)})


# space_to_batch / batch_to_space: TensorFlow's order
def s2b(x, bs, pads):
    xp = np.pad(x, [(0, 0), (0, 0), tuple(pads[0]), tuple(pads[1])])
    n, c, h, w = xp.shape
    y = xp.reshape(n, c, h // bs[0], bs[0], w // bs[1], bs[1]).transpose(3, 5, 0, 1, 2, 4)
    return y.reshape(bs[0] * bs[1] * n, c, h // bs[0], w // bs[1])


def b2s(x, bs, crops):
    b, c, h, w = x.shape
    n = b // (bs[0] * bs[1])
    y = x.reshape(bs[0], bs[1], n, c, h, w).transpose(2, 3, 4, 0, 5, 1).reshape(n, c, h * bs[0], w * bs[1])
    return y[:, :, crops[0][0]:h * bs[0] - crops[0][1], crops[1][0]:w * bs[1] - crops[1][1]]


for dt in ("fp32", "fp16"):
    xv = as_dt(R(2, 3, 4, 3), dt)
    pads = [[1, 1], [0, 3]]
    want = s2b(xv.astype(np.float64), (2, 3), pads)
    case("space_to_batch_" + dt, {"x": (xv, dt)},
         [const("bs", np.array([2, 3]), "int32"), const("pd", np.array(pads), "int32"),
          "%s y = space_to_batch(x = x, block_shape = bs, paddings = pd);" % ty(want, dt)], {"y": (want, dt)})
    xb_ = as_dt(R(12, 3, 2, 3), dt)
    crops = [[1, 0], [2, 1]]
    want = b2s(xb_.astype(np.float64), (2, 3), crops)
    case("batch_to_space_" + dt, {"x": (xb_, dt)},
         [const("bs", np.array([2, 3]), "int32"), const("cr", np.array(crops), "int32"),
          "%s y = batch_to_space(x = x, block_shape = bs, crops = cr);" % ty(want, dt)], {"y": (want, dt)})


# resampling: grid points as coremltools documents them per mode; the
# bilinear ones also against PyTorch's interpolate where it has the mode
def grid(mode, n, m):
    i = np.arange(m, dtype=np.float64)
    if mode == "nearest":
        return np.floor(i * n / m)
    if mode in ("ALIGN_CORNERS", "STRICT_ALIGN_CORNERS"):
        g = i * (n - 1) / (m - 1) if m > 1 else np.full(m, (n - 1) / 2 if mode == "ALIGN_CORNERS" else 0.0)
    elif mode == "UNALIGN_CORNERS":
        g = (i + 0.5) * n / m - 0.5
    elif mode == "LEGACY":
        g = i * n / m
    elif mode == "DEFAULT":
        g = i * (n - n / m) / (m - 1) if m > 1 else np.zeros(m)
    else:  # OFFSET_CORNERS
        d = max(1, n - 1) / m
        g = 0.5 * d + i * d
    return np.clip(g, 0, n - 1)


assert np.allclose(grid("UNALIGN_CORNERS", 2, 5), [0, 0.1, 0.5, 0.9, 1]) and np.allclose(grid("DEFAULT", 2, 5), [0, 0.4, 0.8, 1, 1])
assert np.allclose(grid("OFFSET_CORNERS", 2, 5), [0.1, 0.3, 0.5, 0.7, 0.9])  # coremltools' own examples


def resample(x, mode, *sizes):
    """The last len(sizes) dims resampled to sizes, one dim at a time."""
    for axis, m in zip(range(-len(sizes), 0), sizes):
        n = x.shape[axis]
        g = grid(mode, n, m)
        if mode == "nearest":
            x = np.take(x, g.astype(int), axis)
            continue
        i0 = np.floor(g).astype(int)
        i1 = np.minimum(i0 + 1, n - 1)
        f = (g - i0).reshape((-1,) + (1,) * (-axis - 1))
        x = np.take(x, i0, axis) * (1 - f) + np.take(x, i1, axis) * f
    return x


xi_ = R(2, 3, 4, 5)
try:
    import torch
    tx = torch.tensor(xi_.astype(np.float64))
    for ac, mode in ((True, "STRICT_ALIGN_CORNERS"), (False, "UNALIGN_CORNERS")):
        tref = torch.nn.functional.interpolate(tx, size=(7, 9), mode="bilinear", align_corners=ac).numpy()
        assert np.allclose(tref, resample(xi_.astype(np.float64), mode, 7, 9)), "the bilinear reference disagrees with PyTorch"
except ImportError:
    pass
for dt in ("fp32", "fp16"):
    xv = as_dt(xi_, dt)
    want = resample(xv.astype(np.float64), "nearest", 7, 3)
    case("resize_nearest_neighbor_" + dt, {"x": (xv, dt)},
         [const("h", 7, "int32"), const("w", 3, "int32"),
          "%s y = resize_nearest_neighbor(x = x, target_size_height = h, target_size_width = w);" % ty(want, dt)], {"y": (want, dt)})
    for mode in ("ALIGN_CORNERS", "STRICT_ALIGN_CORNERS", "UNALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS"):
        want = resample(xv.astype(np.float64), mode, 7, 3)
        case("resize_bilinear_%s_%s" % (mode.lower(), dt), {"x": (xv, dt)},
             [const("h", 7, "int32"), const("w", 3, "int32"), 'string m = const()[val = string("%s")];' % mode,
              "%s y = resize_bilinear(x = x, target_size_height = h, target_size_width = w, sampling_mode = m);" % ty(want, dt)],
             {"y": (want, dt)}, tol=1e-5)
    for ac, hp, mode in ((True, None, "STRICT_ALIGN_CORNERS"), (False, None, "UNALIGN_CORNERS"), (False, False, "LEGACY")):
        want = resample(xv.astype(np.float64), mode, 8, 12)
        body = [const("sh", 2.0, "fp32"), const("sw", 2.5, "fp32"), const("ac", ac, "bool")]
        extra = ""
        if hp is not None:
            body.append(const("hp", hp, "bool"))
            extra = ", half_pixel_centers = hp"
        body.append("%s y = upsample_bilinear(x = x, scale_factor_height = sh, scale_factor_width = sw, align_corners = ac%s);"
                    % (ty(want, dt), extra))
        case("upsample_bilinear_%s_%s" % (mode.lower(), dt), {"x": (xv, dt)}, body, {"y": (want, dt)}, tol=1e-5)


# resize (ios17): the last resized_dims dims to `shape`'s last entries (0:
# x's own size), LINEAR in every sampling mode, NEAREST_NEIGHBOR (DEFAULT:
# floor(i * in / out), as resize_nearest_neighbor) on fp32, fp16 and int32
for dt in ("fp32", "fp16", "int32"):
    xv = as_dt(xi_ * (4 if dt == "int32" else 1), dt)
    modes = (("NEAREST_NEIGHBOR", "DEFAULT"),) + ((() if dt == "int32" else
             tuple(("LINEAR", m) for m in ("DEFAULT", "ALIGN_CORNERS", "STRICT_ALIGN_CORNERS", "UNALIGN_CORNERS", "OFFSET_CORNERS"))))
    for im, sm in modes:
        for shape, nd in (([7, 3], 2), ([5, 0, 8], 3), ([1, 9], 1)):
            sizes = [v if v else xv.shape[xv.ndim - nd + i] for i, v in enumerate(shape[len(shape) - nd:])]
            want = resample(xv.astype(np.float64), "nearest" if im == "NEAREST_NEIGHBOR" else sm, *sizes)
            case("resize_%s_%s_%d_%s" % (im.lower(), sm.lower(), nd, dt), {"x": (xv, dt)},
                 [const("sh", np.array(shape), "int32"), "uint32 rd = const()[val = uint32(%d)];" % nd,
                  '%s y = resize(x = x, shape = sh, resized_dims = rd, interpolation_mode = string("%s"), sampling_mode = string("%s"));'
                  % (ty(want, dt), im, sm)], {"y": (want, dt)}, tol=1e-5)


# resample and affine: the image padded per padding_mode (constant, border,
# reflection about the edge pixel, symmetric with the edge repeated: the
# doc's 1-D examples), sampled at pixel coordinates from coordinates_mode
# and align_corners; nearest rounds half to even.  Checked against PyTorch's
# grid_sample / affine_grid where they mean the same (constant 0, border).
def pad_index(i, n, pad):
    if 0 <= i < n:
        return i
    if pad == "constant":
        return None
    if pad == "border" or n == 1:
        return 0 if i < 0 else n - 1
    per = 2 * (n - 1) if pad == "reflection" else 2 * n
    k = i % per
    return k if k < n else (per - k if pad == "reflection" else per - 1 - k)


assert [pad_index(i, 3, "reflection") for i in range(-3, 6)] == [1, 2, 1, 0, 1, 2, 1, 0, 1]  # |1, 2, 3| -> |2, 3, 2, 1, 2, 3, 2, 1, 2|
assert [pad_index(i, 3, "symmetric") for i in range(-3, 6)] == [2, 1, 0, 0, 1, 2, 2, 1, 0]   # -> |3, 2, 1, 1, 2, 3, 3, 2, 1|


def to_pixel(c, n, cmode, ac):
    if cmode == "unnormalized":
        return c
    if cmode == "normalized_zero_to_one":
        c = 2 * c - 1
    return (c + 1) / 2 * (n - 1) if ac else ((c + 1) * n - 1) / 2


def sample_ref(x, uv, mode, pad, pv, cmode, ac):
    B, C, H, W = x.shape
    Ho, Wo = uv.shape[1:3]
    y = np.zeros((B, C, Ho, Wo))

    def tap(b, r, c):
        rr, cc = pad_index(r, H, pad), pad_index(c, W, pad)
        return np.full(C, pv) if rr is None or cc is None else x[b, :, rr, cc]
    for b in range(B):
        for i in range(Ho):
            for j in range(Wo):
                u, v = to_pixel(uv[b, i, j, 0], W, cmode, ac), to_pixel(uv[b, i, j, 1], H, cmode, ac)
                if mode == "nearest":
                    y[b, :, i, j] = tap(b, int(np.rint(v)), int(np.rint(u)))
                    continue
                c0, r0 = int(np.floor(u)), int(np.floor(v))
                au, av = u - c0, v - r0
                y[b, :, i, j] = ((1 - av) * ((1 - au) * tap(b, r0, c0) + au * tap(b, r0, c0 + 1))
                                 + av * ((1 - au) * tap(b, r0 + 1, c0) + au * tap(b, r0 + 1, c0 + 1)))
    return y


def affine_grid(mats, B, Ho, Wo, cmode, ac):
    def g(m):
        j = np.arange(m, dtype=np.float64)
        if cmode == "unnormalized":
            return j
        c = (-1 + 2 * j / (m - 1) if m > 1 else np.zeros(m)) if ac else (2 * j + 1) / m - 1
        return (c + 1) / 2 if cmode == "normalized_zero_to_one" else c
    p, q = np.meshgrid(g(Wo), g(Ho))
    uv = np.zeros((B, Ho, Wo, 2))
    for b in range(B):
        a = mats[b if len(mats) > 1 else 0]
        uv[b, :, :, 0] = a[0] * p + a[1] * q + a[2]
        uv[b, :, :, 1] = a[3] * p + a[4] * q + a[5]
    return uv


xs_ = R(2, 3, 4, 5)
uv_ = rng.uniform(-1.4, 1.4, (2, 3, 6, 2))
mats_ = np.array([[0.9, -0.3, 0.1, 0.2, 1.1, -0.2], [1.2, 0.4, -0.3, -0.1, 0.8, 0.25]])
try:
    import torch
    import torch.nn.functional as TF
    for ac in (True, False):
        for mode, tpad, pad in (("bilinear", "zeros", "constant"), ("nearest", "border", "border"), ("bilinear", "border", "border")):
            tref = TF.grid_sample(torch.tensor(xs_.astype(np.float64)), torch.tensor(uv_), mode=mode, padding_mode=tpad,
                                  align_corners=ac).numpy()
            assert np.allclose(tref, sample_ref(xs_.astype(np.float64), uv_, mode, pad, 0.0, "normalized_minus_one_to_one", ac)), \
                "the resample reference disagrees with PyTorch"
        tg = TF.affine_grid(torch.tensor(mats_.reshape(2, 2, 3)), (2, 3, 6, 7), align_corners=ac).numpy()
        assert np.allclose(tg, affine_grid(mats_, 2, 6, 7, "normalized_minus_one_to_one", ac)), "the affine grid disagrees with PyTorch"
except ImportError:
    pass
for dt in ("fp32", "fp16"):
    xv = as_dt(xs_, dt)
    for mode, pad, cmode, ac, cdt in (("bilinear", "constant", "normalized_minus_one_to_one", True, "fp32"),
                                      ("bilinear", "border", "normalized_minus_one_to_one", False, "fp32"),
                                      ("nearest", "reflection", "normalized_zero_to_one", True, "fp32"),
                                      ("bilinear", "symmetric", "normalized_zero_to_one", False, "fp32"),
                                      ("bilinear", "reflection", "unnormalized", False, "fp32"),
                                      ("nearest", "symmetric", "unnormalized", True, "int32")):
        uv = uv_
        if cmode == "normalized_zero_to_one":
            uv = (uv_ + 1) / 2
        elif cmode == "unnormalized":
            uv = (uv_ + 1) / 2 * np.array([5, 4]) - 0.5 + (uv_ > 0) * 0.25
        if cdt == "int32":
            uv = np.round(uv * 2).astype(np.int32)
        uvv = uv.astype(np.float32) if cdt == "fp32" else uv
        want = sample_ref(xv.astype(np.float64), uvv.astype(np.float64), mode, pad, 0.5, cmode, ac)
        case("resample_%s_%s_%s_%d_%s" % (mode, pad, {"normalized_minus_one_to_one": "pm1", "normalized_zero_to_one": "01"}.get(cmode, "px"), ac, dt), {"x": (xv, dt), "c": (uvv, cdt)},
             [const("pv", 0.5, dt),
              '%s y = resample(x = x, coordinates = c, sampling_mode = string("%s"), padding_mode = string("%s"), '
              'padding_value = pv, coordinates_mode = string("%s"), align_corners = bool(%s));'
              % (ty(want, dt), mode, pad, cmode, "true" if ac else "false")], {"y": (want, dt)}, tol=1e-4)
    for B, ac in ((2, True), (1, False)):
        mv = as_dt(mats_[:B], dt)
        want = sample_ref(xv.astype(np.float64), affine_grid(mv.astype(np.float64), 2, 6, 7, "normalized_minus_one_to_one", ac),
                          "bilinear", "constant", 0.0, "normalized_minus_one_to_one", ac)
        case("affine_%d_%d_%s" % (B, ac, dt), {"x": (xv, dt), "m": (mv, dt)},
             [const("pv", 0.0, dt),
              '%s y = affine(x = x, transform_matrix = m, output_height = int32(6), output_width = int32(7), '
              'sampling_mode = string("bilinear"), padding_mode = string("constant"), padding_value = pv, '
              'coordinates_mode = string("normalized_minus_one_to_one"), align_corners = bool(%s));'
              % (ty(want, dt), "true" if ac else "false")], {"y": (want, dt)}, tol=1e-4)


# crop_resize: each box [start, end] along a dim is sampled at the grid of a
# bilinear resize over an extent of end - start + 1 pixels (Core ML's
# NeuralNetwork.proto SamplingMode, start 0 and end X - 1 being the box's),
# clamped to the box; a point outside the image reads pad_value
def crop_grid(mode, n, m):
    i = np.arange(m, dtype=np.float64)
    if mode in ("ALIGN_CORNERS", "STRICT_ALIGN_CORNERS"):
        g = i * (n - 1) / (m - 1) if m > 1 else np.full(1, (n - 1) / 2 if mode == "ALIGN_CORNERS" else 0.0)
    elif mode == "UNALIGN_CORNERS":
        g = (i + 0.5) * n / m - 0.5
    elif mode == "DEFAULT":
        g = i * (n - n / m) / (m - 1) if m > 1 else np.zeros(1)
    else:  # OFFSET_CORNERS
        g = (i + 0.5) * max(1.0, n - 1) / m
    return np.minimum(np.maximum(g, 0), n - 1)


def crop_ref(x, boxes, img, h, w, mode, box_mode, norm, scale, pad):
    B, C, H, W = x.shape
    out = np.zeros((len(boxes), C, h, w))
    for k, (bx, b) in enumerate(zip(boxes, img)):
        c = [float(v) for v in bx]
        if "WIDTH_FIRST" in box_mode:
            c = [c[1], c[0], c[3], c[2]]
        if box_mode.startswith("CENTER"):
            c = [c[0] - c[2] / 2, c[1] - c[3] / 2, c[0] + c[2] / 2, c[1] + c[3] / 2]
        sh, sw = scale * ((H - 1) if norm else 1), scale * ((W - 1) if norm else 1)
        vs = c[0] * sh + crop_grid(mode, (c[2] - c[0]) * sh + 1, h)
        us = c[1] * sw + crop_grid(mode, (c[3] - c[1]) * sw + 1, w)
        for i, v in enumerate(vs):
            for j, u in enumerate(us):
                if not (0 <= v <= H - 1 and 0 <= u <= W - 1):
                    out[k, :, i, j] = pad
                    continue
                r0, c0 = int(v), int(u)
                r1, c1 = min(r0 + 1, H - 1), min(c0 + 1, W - 1)
                av, au = v - r0, u - c0
                im = x[b]
                out[k, :, i, j] = ((1 - av) * ((1 - au) * im[:, r0, c0] + au * im[:, r0, c1]) +
                                   av * ((1 - au) * im[:, r1, c0] + au * im[:, r1, c1]))
    return out


xcr = R(2, 3, 8, 9) * 2
for dt, mode, box_mode, norm, scale, h, w in (
        ("fp32", "DEFAULT", "CORNERS_HEIGHT_FIRST", False, 1.0, 3, 4),
        ("fp16", "ALIGN_CORNERS", "CENTER_SIZE_WIDTH_FIRST", True, 1.0, 4, 3),
        ("fp32", "STRICT_ALIGN_CORNERS", "CORNERS_WIDTH_FIRST", False, 0.5, 1, 1),
        ("fp32", "UNALIGN_CORNERS", "CENTER_SIZE_HEIGHT_FIRST", False, 1.0, 5, 2),
        ("fp16", "OFFSET_CORNERS", "CORNERS_HEIGHT_FIRST", True, 1.0, 2, 6)):
    # the third box reaches past the image (pad_value), the second is cut from image 0
    bx = np.array([[1, 2, 6, 7], [0.5, 0, 3, 8], [5, 6, 10, 12]], np.float32)
    if norm:
        bx = bx / 10
    if box_mode.startswith("CENTER"):
        bx = np.concatenate([bx[:, :2], bx[:, 2:] - bx[:, :2]], 1)
    ix = np.array([1, 0, 1], np.int32)
    xv, bv = as_dt(xcr, dt), as_dt(bx, dt)
    want = crop_ref(xv.astype(np.float64), bv.astype(np.float64), ix, h, w, mode, box_mode, norm, scale, 0.25)
    case("crop_resize_%s_%s_%s" % (mode.lower(), box_mode.lower(), dt), {"x": (xv, dt), "b": (bv, dt)},
         [const("bi", ix, "int32"), const("pv", 0.25, dt),
          '%s y = crop_resize(x = x, boxes = b, box_indices = bi, target_height = int32(%d), target_width = int32(%d), '
          'normalized_coordinates = bool(%s), spatial_scale = fp32(%r), box_coordinate_mode = string("%s"), '
          'sampling_mode = string("%s"), pad_value = pv);'
          % (ty(want, dt), h, w, "true" if norm else "false", scale, box_mode, mode)], {"y": (want, dt)}, tol=1e-4)
# ios16's roi [K, 1, 5, 1, 1] (the image index first) and [K, 1, 4, 1, 1]
# (every box from every image: y [K, B, C, h, w])
# (the index form runs for one image: coremltools types its result [K, B, ..]
# where Core ML's layer gives [K, 1, ..])
roi5 = np.array([[0, 1, 2, 6, 7], [0, 0, 0, 7, 8]], np.float32)
want = crop_ref(xcr[:1].astype(np.float64), roi5[:, 1:], [0, 0], 3, 3, "DEFAULT", "CORNERS_HEIGHT_FIRST", False, 1.0, 0)
case("crop_resize_roi5_ios16", {"x": (xcr[:1], "fp32"), "r": (roi5.reshape(2, 1, 5, 1, 1), "fp32")},
     ['%s y = crop_resize(x = x, roi = r, target_height = int32(3), target_width = int32(3));' % ty(want[:, None])],
     {"y": (want[:, None], "fp32")}, opset="ios16")
roi4 = np.array([[1, 2, 6, 7], [0, 0, 7, 8]], np.float32)
want = np.stack([crop_ref(xcr.astype(np.float64), [b4] * 2, [0, 1], 2, 4, "ALIGN_CORNERS", "CORNERS_HEIGHT_FIRST",
                          False, 1.0, 0) for b4 in roi4])
case("crop_resize_roi4_ios15", {"x": (xcr, "fp32"), "r": (roi4.reshape(2, 1, 4, 1, 1), "fp32")},
     ['%s y = crop_resize(x = x, roi = r, target_height = int32(2), target_width = int32(4), '
      'sampling_mode = string("ALIGN_CORNERS"));' % ty(want)], {"y": (want, "fp32")}, opset="ios15")


# non_maximum_suppression (Core ML's NMS layer): boxes (centre x, centre y,
# width, height) best score first, kept unless an earlier kept box (of the
# same best class, per class) overlaps by IoU > threshold; scores below the
# threshold are never candidates; padded with 0, 0, -1; never empty
def nms_iou(a, b):
    iw = min(a[0] + a[2] / 2, b[0] + b[2] / 2) - max(a[0] - a[2] / 2, b[0] - b[2] / 2)
    ih = min(a[1] + a[3] / 2, b[1] + b[3] / 2) - max(a[1] - a[3] / 2, b[1] - b[3] / 2)
    inter = iw * ih if iw > 0 and ih > 0 else 0.0
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


def nms_ref(boxes, scores, iou_thr, score_thr, m, per_class):
    B, N, K = scores.shape
    ob, osc, oi, cnt = np.zeros((B, m, 4)), np.zeros((B, m, K)), -np.ones((B, m), np.int64), np.zeros(B, np.int64)
    for b in range(B):
        best, cls = scores[b].max(1), scores[b].argmax(1)
        order = sorted(range(N), key=lambda i: (-best[i], i))
        kept = []
        for i in order:
            if len(kept) == m:
                break
            if best[i] >= score_thr and all((per_class and cls[j] != cls[i]) or not nms_iou(boxes[b, i], boxes[b, j]) > iou_thr
                                            for j in kept):
                kept.append(i)
        cnt[b] = len(kept) or 1
        for k, i in enumerate(kept or order[:1]):
            ob[b, k], osc[b, k], oi[b, k] = boxes[b, i], scores[b, i], i
    return ob, osc, oi, cnt


NB_, NN_, NK_ = 2, 12, 3
nbx = np.concatenate([rng.uniform(0, 10, (NB_, NN_, 2)), rng.uniform(2, 5, (NB_, NN_, 2))], 2).astype(np.float32)
nsc = rng.permutation(NB_ * NN_ * NK_).reshape(NB_, NN_, NK_).astype(np.float32) / (NB_ * NN_ * NK_)
for label, dt, iou_t, score_t, m, pc in (("ios16", "fp32", 0.3, 0.2, 6, False), ("ios16_per_class_padded", "fp32", 0.2, 0.0, 15, True),
                                         ("ios16_none_pass", "fp32", 0.5, 2.0, 3, False), ("ios17_fp16", "fp16", 0.25, None, 5, False),
                                         ("ios17_per_class", "fp32", 0.1, None, 8, True)):
    bv, sv = as_dt(nbx, dt), as_dt(nsc, dt)
    ob, osc, oi, cnt = nms_ref(bv.astype(np.float64), sv.astype(np.float64), iou_t, -np.inf if score_t is None else score_t, m, pc)
    pcs = "true" if pc else "false"
    if score_t is None:  # ios17: boxes [B, 4, N], scores [B, K, N], no counts
        ob, osc = ob.transpose(0, 2, 1), osc.transpose(0, 2, 1)
        case("nms_" + label, {"b": (bv.transpose(0, 2, 1), dt), "s": (sv.transpose(0, 2, 1), dt)},
             [const("it", iou_t, dt),
              "%s ob, %s os, %s oi = non_maximum_suppression(boxes = b, scores = s, iou_threshold = it, max_boxes = int32(%d), "
              "per_class_suppression = bool(%s));" % (ty(ob, dt), ty(osc, dt), ty(oi, "int32"), m, pcs)],
             {"ob": (ob, dt), "os": (osc, dt), "oi": (oi, "int32")})
        continue
    case("nms_" + label, {"b": (bv, dt), "s": (sv, dt)},
         [const("it", iou_t, dt), const("st", score_t, dt),
          "%s ob, %s os, %s oi, %s oc = non_maximum_suppression(boxes = b, scores = s, iou_threshold = it, score_threshold = st, "
          "max_boxes = int32(%d), per_class_suppression = bool(%s));" % (ty(ob, dt), ty(osc, dt), ty(oi, "int32"), ty(cnt, "int32"), m, pcs)],
         {"ob": (ob, dt), "os": (osc, dt), "oi": (oi, "int32"), "oc": (cnt, "int32")}, opset="ios16")


# the ios16/17 forms of constexpr_lut_to_dense and constexpr_sparse_to_dense:
# indices / mask bits packed into uint8 bytes, least significant bit first,
# the dense shape given as 'shape' (coremltools' decompress: np.unpackbits
# with bitorder little)
def pack_bits(vals, bits):
    flat = np.array([(int(v) >> k) & 1 for v in np.ravel(vals) for k in range(bits)], np.uint8)
    return np.packbits(flat, bitorder="little")


for opset in ("ios16", "ios17"):
    for bits, dt in ((1, "fp32"), (2, "fp16"), (4, "fp32"), (6, "fp16"), (8, "fp32")):
        shp = (3, 5)
        idx = rng.integers(0, 1 << bits, shp)
        lut = as_dt(R(1 << bits), dt)
        xw = as_dt(R(*shp), dt)
        want = xw.astype(np.float64) + lut.astype(np.float64)[idx]
        packed = pack_bits(idx, bits)
        assert np.array_equal(np.unpackbits(packed, bitorder="little")[:idx.size * bits].reshape(-1, bits) @ (1 << np.arange(bits)),
                              idx.ravel())
        case("lut16_%s_%dbit_%s" % (opset, bits, dt), {"x": (xw, dt)},
             [const("ix", packed, "uint8"), const("lt", lut, dt), const("sh", np.array(shp), "uint32"),
              "%s w = constexpr_lut_to_dense(indices = ix, lut = lt, shape = sh);" % ty(want, dt),
              "%s y = add(x = x, y = w);" % ty(want, dt)], {"y": (want, dt)}, opset=opset)
    for dt in ("fp32", "fp16"):
        shp = (2, 7)
        m = rng.random(shp) < 0.5
        nz = as_dt(R(int(m.sum())), dt)
        dense = np.zeros(shp)
        dense[m] = nz.astype(np.float64)
        xw = as_dt(R(*shp), dt)
        case("sparse16_%s_%s" % (opset, dt), {"x": (xw, dt)},
             [const("nz", nz, dt), const("mk", pack_bits(m, 1), "uint8"), const("sh", np.array(shp), "uint32"),
              "%s w = constexpr_sparse_to_dense(nonzero_data = nz, mask = mk, shape = sh);" % ty(dense, dt),
              "%s y = add(x = x, y = w);" % ty(dense, dt)], {"y": (xw.astype(np.float64) + dense, dt)}, opset=opset)


# vector palettes (ios18): lut [*blocks, palette, vec] entries are vectors
# that widen dim vector_axis: output[.., i·vec + k, ..] = lut[block, id(i), k]
def vec_lut_ref(idx, lut, axis):
    vec = lut.shape[-1]
    out_shape = list(idx.shape)
    out_shape[axis] *= vec
    out = np.zeros(out_shape)
    for c in np.ndindex(*idx.shape):
        blk = tuple(c[d] // (idx.shape[d] // lut.shape[d]) for d in range(idx.ndim))
        for k in range(vec):
            o = list(c)
            o[axis] = c[axis] * vec + k
            out[tuple(o)] = lut[blk + (idx[c], k)]
    return out


for dt in ("fp32", "fp16"):
    for bits, ishape, blocks, vec, axis, consumer in ((4, (4, 6), (2, 1), 2, 0, "add"), (2, (3, 4), (1, 2), 3, -1, "add"),
                                                     (4, (4, 8), (1, 1), 2, 1, "linear"), (8, (2, 4), (2, 1), 4, 0, "linear")):
        idx = rng.integers(0, 1 << bits, ishape)
        lut = as_dt(R(*(blocks + (1 << bits, vec))), dt)
        wd = vec_lut_ref(idx, lut.astype(np.float64), axis)
        body = [const("ix", idx, "uint%d" % bits), const("lut", lut, dt), const("va", axis, "int32"),
                "%s w = constexpr_lut_to_dense(indices = ix, lut = lut, vector_axis = va);" % ty(wd, dt)]
        if consumer == "add":
            xv = as_dt(R(*wd.shape), dt)
            want = xv.astype(np.float64) + wd
            body.append("%s y = add(x = x, y = w);" % ty(want, dt))
        else:
            xv = as_dt(R(3, wd.shape[1]), dt)
            want = xv.astype(np.float64) @ wd.T
            body.append("%s y = linear(x = x, weight = w);" % ty(want, dt))
        case("lut_vector_%dbit_v%d_a%d_%s_%s" % (bits, vec, axis, consumer, dt), {"x": (xv, dt)}, body, {"y": (want, dt)}, tol=1e-4)


# linear over 1- to 8-bit palettized weights (ios18): RT_OP_LUT_GEMM on the
# packed indices, per-tensor or grouped palettes; rows that are not whole
# bytes (5 3-bit indices) take the dense weight
for bits, (n, k), blocks, m in ((1, (6, 512), (1, 1), 1), (2, (8, 256), (2, 1), 3), (2, (5, 40), (5, 1), 1),
                                (3, (4, 40), (1, 1), 2), (6, (3, 12), (3, 1), 1), (3, (4, 5), (1, 1), 1)):
    for dt in ("fp32", "fp16"):
        idx = rng.integers(0, 1 << bits, (n, k))
        lut = as_dt(R(*(blocks + (1 << bits, 1))), dt)
        wd = vec_lut_ref(idx, lut.astype(np.float64), 0)
        xv = as_dt(R(m, k), dt)
        case("lut_linear_%dbit_%dx%d_%s" % (bits, n, k, dt), {"x": (xv, dt)},
             [const("ix", idx, "uint%d" % bits), const("lut", lut, dt),
              "%s w = constexpr_lut_to_dense(indices = ix, lut = lut);" % ty(wd, dt),
              "%s y = linear(x = x, weight = w);" % ty(np.zeros((m, n)), dt)],
             {"y": (xv.astype(np.float64) @ wd.T, dt)}, tol=1e-4)


# rnn: h_t = act(W_ih x_t + b + W_hh h_t-1), forward and reverse, with and
# without the sequence output (fp32 only in ios15-16: the ios18 program
# here takes fp16 too).  Reverse gives its outputs in processing order (last
# time first), as coremltools' tests check Core ML: PyTorch on the flipped
# sequence, its output not flipped back.
S_, B_, I_, H_ = 5, 2, 3, 4
xr5, h0_ = R(S_, B_, I_), R(B_, H_)
wi_, wh_, bb_ = R(H_, I_) * 0.5, R(H_, H_) * 0.5, R(H_) * 0.5
acts_ = {"tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "relu": lambda v: np.maximum(v, 0), "linear": lambda v: v}
for dt in ("fp32", "fp16"):
    for act, direction, seq in (("tanh", "forward", True), ("sigmoid", "reverse", True), ("relu", "forward", False), ("linear", "reverse", False)):
        xv, hv = as_dt(xr5, dt), as_dt(h0_, dt)
        wiv, whv, bv = as_dt(wi_, dt), as_dt(wh_, dt), as_dt(bb_, dt)
        h = hv.astype(np.float64)
        outs = np.zeros((S_, B_, H_))
        for k, t in enumerate(range(S_) if direction == "forward" else range(S_ - 1, -1, -1)):
            h = acts_[act](xv[t] @ wiv.T.astype(np.float64) + bv + h @ whv.T.astype(np.float64))
            outs[k] = h
        ys = outs if seq else h[None]
        case("rnn_%s_%s_%s" % (act, direction, dt), {"x": (xv, dt), "h0": (hv, dt)},
             [const("wi", wiv, dt), const("wh", whv, dt), const("b", bv, dt), 'string d = const()[val = string("%s")];' % direction,
              'string a = const()[val = string("%s")];' % act, const("sq", seq, "bool"),
              "%s ys, %s yh = rnn(x = x, initial_h = h0, weight_ih = wi, weight_hh = wh, bias = b, direction = d, "
              "output_sequence = sq, activation = a);" % (ty(ys, dt), ty(h, dt))],
             {"ys": (ys, dt), "yh": (h, dt)}, tol=1e-4)


# lstm: gates [i, f, o, z], c = f c + i z (clipped), h = o act(c), peephole
# p_i, p_f on c_t-1 and p_o on c_t; forward, reverse (processing order) and
# bidirectional (the backward half at its own time, states [B, 2H])
wil, whl, bl = R(4 * H_, I_) * 0.5, R(4 * H_, H_) * 0.5, R(4 * H_) * 0.5
c0_ = R(B_, H_)
sg = lambda v: 1 / (1 + np.exp(-v))


def lstm_ref(xv, h, c, wi, wh, b, rev, rf, peep=None, clip=None):
    outs = np.zeros((S_,) + h.shape)
    for k, t in enumerate(range(S_ - 1, -1, -1) if rev else range(S_)):
        g = xv[t] @ wi.T + b + h @ wh.T
        H = h.shape[1]
        pi, pf, po = (peep[:H], peep[H:2 * H], peep[2 * H:]) if peep is not None else (0, 0, 0)
        i, f, z = rf(g[:, :H] + pi * c), rf(g[:, H:2 * H] + pf * c), np.tanh(g[:, 3 * H:])
        c = f * c + i * z
        if clip is not None:
            c = np.clip(c, -clip, clip)
        o = rf(g[:, 2 * H:3 * H] + po * c)
        h = o * np.tanh(c)
        outs[t if rev == "own" else k] = h
    return outs, h, c


f64 = lambda a: np.asarray(a, np.float64)
for dt in ("fp32", "fp16"):
    for direction, seq, ra, peep, clip in (("forward", True, "sigmoid", False, None), ("reverse", False, "sigmoid", False, None),
                                           ("forward", False, "relu", False, None), ("reverse", True, "sigmoid", True, 0.7),
                                           ("forward", True, "sigmoid", True, None), ("forward", False, "sigmoid", False, 0.5)):
        xv, hv, cv = as_dt(xr5, dt), as_dt(h0_, dt), as_dt(c0_, dt)
        wiv, whv, bv = as_dt(wil, dt), as_dt(whl, dt), as_dt(bl, dt)
        pv = as_dt(R(3 * H_), dt)
        outs, h, c = lstm_ref(f64(xv), f64(hv), f64(cv), f64(wiv), f64(whv), f64(bv), direction == "reverse", acts_[ra],
                              f64(pv) if peep else None, clip)
        ys = outs if seq else h[None]
        body = [const("wi", wiv, dt), const("wh", whv, dt), const("b", bv, dt), 'string d = const()[val = string("%s")];' % direction,
                'string ra = const()[val = string("%s")];' % ra, const("sq", seq, "bool")]
        extra = ""
        if peep:
            body.append(const("pp", pv, dt))
            extra += ", peephole = pp"
        if clip is not None:
            body.append(const("cl", clip, dt))
            extra += ", clip = cl"
        body.append("%s ys, %s yh, %s yc = lstm(x = x, initial_h = h0, initial_c = c0, weight_ih = wi, weight_hh = wh, bias = b, "
                    "direction = d, output_sequence = sq, recurrent_activation = ra%s);" % (ty(ys, dt), ty(h, dt), ty(c, dt), extra))
        case("lstm_%s_%s_%s%s%s%s" % (direction, ra, "seq_" if seq else "", "peep_" if peep else "", "clip_" if clip else "", dt),
             {"x": (xv, dt), "h0": (hv, dt), "c0": (cv, dt)}, body, {"ys": (ys, dt), "yh": (h, dt), "yc": (c, dt)}, tol=1e-4)
    # bidirectional, with and without the sequence, peepholes on both directions
    for seq, peep in ((True, False), (False, True)):
        xv, hv, cv = as_dt(xr5, dt), as_dt(R(B_, 2 * H_), dt), as_dt(R(B_, 2 * H_), dt)
        w = [as_dt(a, dt) for a in (wil, whl, bl, R(4 * H_, I_) * 0.5, R(4 * H_, H_) * 0.5, R(4 * H_) * 0.5, R(3 * H_), R(3 * H_))]
        of, hf, cf = lstm_ref(f64(xv), f64(hv[:, :H_]), f64(cv[:, :H_]), f64(w[0]), f64(w[1]), f64(w[2]), False, sg,
                              f64(w[6]) if peep else None)
        ob, hb, cb = lstm_ref(f64(xv), f64(hv[:, H_:]), f64(cv[:, H_:]), f64(w[3]), f64(w[4]), f64(w[5]), "own", sg,
                              f64(w[7]) if peep else None)
        ys = np.concatenate([of, ob], 2) if seq else np.concatenate([hf, hb], 1)[None]
        yh, yc = np.concatenate([hf, hb], 1), np.concatenate([cf, cb], 1)
        names = ("wi", "wh", "b", "wib", "whb", "bb", "pp", "ppb")
        body = [const(n, a, dt) for n, a in zip(names, w)][:8 if peep else 6] + [const("sq", seq, "bool")]
        extra = ", peephole = pp, peephole_back = ppb" if peep else ""
        body.append("%s ys, %s yh, %s yc = lstm(x = x, initial_h = h0, initial_c = c0, weight_ih = wi, weight_hh = wh, bias = b, "
                    "weight_ih_back = wib, weight_hh_back = whb, bias_back = bb, direction = string(\"bidirectional\"), "
                    "output_sequence = sq%s);" % (ty(ys, dt), ty(yh, dt), ty(yc, dt), extra))
        case("lstm_bidirectional_%s%s%s" % ("seq_" if seq else "", "peep_" if peep else "", dt),
             {"x": (xv, dt), "h0": (hv, dt), "c0": (cv, dt)}, body, {"ys": (ys, dt), "yh": (yh, dt), "yc": (yc, dt)}, tol=1e-4)


# gru: Core ML stacks the gates [r, o, z]; reset_after false: o = act(W_io x
# + b_o + W_ho (r h)); true (ios18, PyTorch's GRU): o = act(W_io x + b_io +
# r (W_ho h + b_ho)) with input_bias b_i and bias b_h; h = (1 - z) o + z h
wig, whg, bg, big = R(3 * H_, I_) * 0.5, R(3 * H_, H_) * 0.5, R(3 * H_) * 0.5, R(3 * H_) * 0.5


def gru_ref(xv, h, wi, wh, b, ib, rev, rf, af, after):
    H = h.shape[1]
    outs = np.zeros((S_,) + h.shape)
    bi = ib if ib is not None else np.zeros(3 * H)
    for k, t in enumerate(range(S_ - 1, -1, -1) if rev else range(S_)):
        gx = xv[t] @ wi.T + bi
        r = rf(gx[:, :H] + b[:H] + h @ wh[:H].T)
        z = rf(gx[:, 2 * H:] + b[2 * H:] + h @ wh[2 * H:].T)
        if after:
            o = af(gx[:, H:2 * H] + r * (h @ wh[H:2 * H].T + b[H:2 * H]))
        else:
            o = af(gx[:, H:2 * H] + b[H:2 * H] + (r * h) @ wh[H:2 * H].T)
        h = (1 - z) * o + z * h
        outs[k] = h
    return outs, h


for dt in ("fp32", "fp16"):
    for direction, seq, ra, act, after, has_ib in (("forward", True, "sigmoid", "tanh", False, False),
                                                   ("reverse", True, "sigmoid", "tanh", False, False),
                                                   ("forward", False, "tanh", "sigmoid", False, False),
                                                   ("forward", True, "sigmoid", "tanh", True, True),
                                                   ("reverse", False, "sigmoid", "relu", True, False),
                                                   ("forward", True, "sigmoid", "tanh", False, True)):
        xv, hv = as_dt(xr5, dt), as_dt(h0_, dt)
        wiv, whv, bv, ibv = as_dt(wig, dt), as_dt(whg, dt), as_dt(bg, dt), as_dt(big, dt)
        outs, h = gru_ref(f64(xv), f64(hv), f64(wiv), f64(whv), f64(bv), f64(ibv) if has_ib else None, direction == "reverse",
                          acts_[ra], acts_[act], after)
        ys = outs if seq else h[None]
        body = [const("wi", wiv, dt), const("wh", whv, dt), const("b", bv, dt), const("sq", seq, "bool")]
        extra = ""
        if has_ib:
            body.append(const("ib", ibv, dt))
            extra += ", input_bias = ib"
        if after:
            extra += ", reset_after = bool(true)"
        body.append('%s ys, %s yh = gru(x = x, initial_h = h0, weight_ih = wi, weight_hh = wh, bias = b, direction = string("%s"), '
                    'output_sequence = sq, recurrent_activation = string("%s"), activation = string("%s")%s);'
                    % (ty(ys, dt), ty(h, dt), direction, ra, act, extra))
        case("gru_%s_%s_%s%s%s%s" % (direction, ra, act, "_seq" if seq else "", "_after" if after else "", "_ib_" + dt if has_ib else "_" + dt),
             {"x": (xv, dt), "h0": (hv, dt)}, body, {"ys": (ys, dt), "yh": (h, dt)}, tol=1e-4)


# non_zero of run-time data: returned as it is, its rows counted at run time
# (np.argwhere: the nonzero coordinates in row-major order), for every dtype
# and rank 1-4, none and all of the elements nonzero among them.
for label, shape, dt, frac in (("fp32_r2", (3, 5), "fp32", 0.5), ("fp16_r3", (2, 3, 4), "fp16", 0.3),
                               ("int32_r1", (17,), "int32", 0.6), ("bool_r4", (2, 2, 3, 2), "bool", 0.5),
                               ("none", (4, 4), "fp32", 0.0), ("all", (2, 3), "int32", 1.0)):
    v = rng.uniform(1, 5, shape) * rng.choice([-1, 1], shape) * (rng.uniform(0, 1, shape) < frac)
    v = v.astype(np.bool_) if dt == "bool" else np.round(v) if dt == "int32" else as_dt(v.astype(np.float32), dt)
    case("non_zero_" + label, {"x": (v, dt)},
         ["tensor<int32, [?, %d]> y = non_zero(x = x);" % len(shape)], {"y": (np.argwhere(v), "int32")})
