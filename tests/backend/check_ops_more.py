# check_ops_more.py — the ops beyond the transformer set (elementwise math,
# activations, comparisons and logic, every reduction, normalizations,
# convolution, pooling) against NumPy, for each dtype MIL allows them:
# fp32 (max relative error), fp16 (relative L2 <= 2e-3 against a reference
# on fp16-rounded inputs), int32 and bool (exact).  Run by check_ops.py,
# whose helpers (case, const, ty, R, rng) it uses.
import itertools


def f16(a):
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float32)


def as_dt(a, dt):
    if dt == "fp16":
        return f16(a)
    if dt == "int32":
        return np.round(a).astype(np.int32)
    if dt == "bool":
        return np.asarray(a, bool)
    return np.asarray(a, np.float32)


def op_case(label, name, ins, dt, ref, params=(), out_dt=None, tol=2e-5, shape=None):
    """One op: inputs ins (name -> array, in dtype dt), const params
    (argname, value, dtype), reference ref(*inputs as float64 / bool)."""
    ins = {n: as_dt(a, dt) for n, a in ins.items()}
    body = [const("p_" + a, v, pdt) for a, v, pdt in params]
    args = ", ".join(["%s = in_%s" % (n, n) for n in ins] + ["%s = p_%s" % (a, a) for a, _, _ in params])
    want = ref(*[a if dt == "bool" else a.astype(np.float64) for a in ins.values()])
    out_dt = out_dt or dt
    want = np.asarray(want)
    body.append("%s y = %s(%s);" % (ty(want, out_dt) if want.ndim else out_dt, name, args))
    case(label, {"in_" + n: (a, dt) for n, a in ins.items()}, body, {"y": (want, out_dt)}, tol=tol)


u = R(2, 3, 4)
pos = np.abs(u) + 0.5
unit = np.tanh(u) * 0.9
sig_ = lambda v: 1 / (1 + np.exp(-v))
FLOAT = ("fp32", "fp16")
NUM = ("fp32", "fp16", "int32")
unary = [
    ("abs", u * 3, np.abs, NUM), ("acos", unit, np.arccos, FLOAT), ("asin", unit, np.arcsin, FLOAT),
    ("atan", u, np.arctan, FLOAT), ("atanh", unit, np.arctanh, FLOAT), ("ceil", u * 3, np.ceil, FLOAT),
    ("cos", u, np.cos, FLOAT), ("cosh", u, np.cosh, FLOAT), ("erf", u, np.vectorize(math.erf), FLOAT),
    ("exp2", u * 3, np.exp2, FLOAT), ("exp2", np.abs(u) * 4, lambda v: np.exp2(v).astype(np.int64), ("int32",)),
    ("floor", u * 3, np.floor, FLOAT), ("inverse", pos, lambda v: 1 / (v + 1e-4), FLOAT),
    ("log", pos, np.log, FLOAT), ("round", u * 3, np.round, FLOAT), ("sign", u * 3, np.sign, NUM),
    ("sin", u, np.sin, FLOAT), ("sinh", u, np.sinh, FLOAT), ("square", u * 3, np.square, NUM),
    ("tan", unit, np.tan, FLOAT), ("relu", u, lambda v: np.maximum(v, 0), FLOAT),
    ("relu6", u * 4, lambda v: np.clip(v, 0, 6), FLOAT),
    ("softplus", u * 3, lambda v: np.log1p(np.exp(v)), FLOAT), ("softsign", u, lambda v: v / (1 + np.abs(v)), FLOAT),
]
for name, x, ref, dts in unary:
    for dt in dts:
        op_case("%s_%s" % (name, dt), name, {"x": x}, dt, ref, tol=1e-4)
# activations with scalar parameters (fp32 parameters: ios17+ lets them differ from x's dtype)
acts = [
    ("clip", [("alpha", -0.5), ("beta", 0.7)], lambda v: np.clip(v, -0.5, 0.7)),
    ("threshold", [("alpha", 0.2)], lambda v: np.maximum(v, 0.2)),
    ("thresholded_relu", [("alpha", 0.3)], lambda v: np.where(v >= 0.3, v, 0)),
    ("elu", [("alpha", 0.8)], lambda v: np.where(v > 0, v, 0.8 * np.expm1(v))),
    ("leaky_relu", [("alpha", 0.1)], lambda v: np.where(v < 0, 0.1 * v, v)),
    ("clamped_relu", [("alpha", 0.1), ("beta", 0.6)],
     lambda v: np.minimum(np.maximum(v, 0), 0.6) + np.minimum(np.minimum(v, 0) * 0.1, 0.6)),
    ("linear_activation", [("alpha", 2.0), ("beta", -1.0)], lambda v: 2 * v - 1),
    ("scaled_tanh", [("alpha", 1.5), ("beta", 0.7)], lambda v: 1.5 * np.tanh(0.7 * v)),
    ("sigmoid_hard", [("alpha", 0.2), ("beta", 0.5)], lambda v: np.clip(0.2 * v + 0.5, 0, 1)),
]
for name, ps, ref in acts:
    for dt in FLOAT:
        pdt = "fp32" if name != "clip" and name != "threshold" else dt
        op_case("%s_%s" % (name, dt), name, {"x": u * 2}, dt, ref, [(a, v, pdt) for a, v in ps], tol=1e-4)
op_case("threshold_int32", "threshold", {"x": u * 5}, "int32", lambda v: np.maximum(v, 1), [("alpha", 1, "int32")])
x4 = R(2, 3, 4, 5)
al, be = np.array([0.1, -0.5, 2.0], np.float32), np.array([0.5, 1.0, 2.0], np.float32)
for dt in FLOAT:
    op_case("prelu_" + dt, "prelu", {"x": x4}, dt, lambda v: np.where(v > 0, v, al[None, :, None, None] * v),
            [("alpha", al, "fp32")])
    op_case("softplus_parametric_" + dt, "softplus_parametric", {"x": x4}, dt,
            lambda v: al[None, :, None, None] * np.log1p(np.exp(be[None, :, None, None] * v)),
            [("alpha", al, "fp32"), ("beta", be, "fp32")], tol=1e-4)
# binary: broadcasting, every dtype
a, b = R(2, 3, 4) * 4, R(3, 1) * 4
bnz = np.where(np.abs(np.round(b)) < 1, 2.0, b)  # int32 divisors stay nonzero after rounding
binary = [("maximum", np.maximum, NUM, None), ("minimum", np.minimum, NUM, None),
          ("floor_div", lambda p, q: np.floor_divide(p, q), NUM, None), ("mod", np.mod, NUM, None),
          ("equal", np.equal, NUM, "bool"), ("not_equal", np.not_equal, NUM, "bool"),
          ("greater", np.greater, NUM, "bool"), ("greater_equal", np.greater_equal, NUM, "bool"),
          ("less", np.less, NUM, "bool"), ("less_equal", np.less_equal, NUM, "bool")]
for name, fn, dts, odt in binary:
    for dt in dts:
        # ties on purpose: y repeats some of x's values (after rounding to the dtype)
        yv = np.where(rng.random(bnz.shape) < 0.3, np.round(bnz), bnz)
        op_case("%s_%s" % (name, dt), name, {"x": np.round(a) if dt != "fp32" else a, "y": yv}, dt, fn, out_dt=odt, tol=1e-5)
ba, bb = rng.random((2, 3, 4)) > 0.5, rng.random((3, 1)) > 0.5
for name, fn in [("logical_and", np.logical_and), ("logical_or", np.logical_or), ("logical_xor", np.logical_xor)]:
    op_case(name, name, {"x": ba, "y": bb}, "bool", fn)
op_case("logical_not", "logical_not", {"x": ba}, "bool", np.logical_not)
# reductions over any axes
rx = R(3, 4, 5)
reds = [("reduce_sum", np.sum, NUM), ("reduce_mean", np.mean, FLOAT), ("reduce_max", np.max, NUM),
        ("reduce_min", np.min, NUM), ("reduce_prod", np.prod, NUM),
        ("reduce_l1_norm", lambda v, axis, keepdims: np.abs(v).sum(axis, keepdims=keepdims), NUM),
        ("reduce_l2_norm", lambda v, axis, keepdims: np.sqrt((v * v).sum(axis, keepdims=keepdims)), FLOAT),
        ("reduce_log_sum", lambda v, axis, keepdims: np.log(v.sum(axis, keepdims=keepdims)), FLOAT),
        ("reduce_log_sum_exp", lambda v, axis, keepdims: np.log(np.exp(v).sum(axis, keepdims=keepdims)), FLOAT),
        ("reduce_sum_square", lambda v, axis, keepdims: (v * v).sum(axis, keepdims=keepdims), NUM)]
for name, fn, dts in reds:
    for dt, (axes, keep) in itertools.product(dts, [((0, 2), False), ((1,), True), ((0, 1, 2), False)]):
        src = np.abs(rx) + 0.5 if name == "reduce_log_sum" else rx * (1.2 if name == "reduce_prod" else 3)
        if dt == "int32" and name == "reduce_prod":
            src = np.clip(src, -2, 2)
        ax = np.array(axes)
        op_case("%s_%s_%s" % (name, dt, "".join(map(str, axes))), name, {"x": src}, dt,
                lambda v: fn(v, axis=axes, keepdims=keep), [("axes", ax, "int32"), ("keep_dims", keep, "bool")], tol=1e-4)
for name, fn in [("reduce_argmax", np.argmax), ("reduce_argmin", np.argmin)]:
    for dt, (axis, keep) in itertools.product(NUM, [(1, False), (-1, True)]):
        src = np.round(rx * 3) if dt != "fp32" else rx  # ties: the first index wins
        op_case("%s_%s_%d" % (name, dt, axis), name, {"x": src}, dt,
                lambda v: np.expand_dims(fn(v, axis), axis) if keep else fn(v, axis),
                [("axis", axis, "int32"), ("keep_dims", keep, "bool")], out_dt="int32")
# normalizations
xn = R(2, 3, 4, 5) * 2 + 1
mu_, var_ = R(3), np.abs(R(3)) + 0.5
for dt in FLOAT:
    op_case("batch_norm_" + dt, "batch_norm", {"x": xn}, dt,
            lambda v: (v - mu_[:, None, None]) / np.sqrt(var_[:, None, None] + 1e-3) * al[:, None, None] + be[:, None, None],
            [("mean", mu_, "fp32"), ("variance", var_, "fp32"), ("gamma", al, "fp32"), ("beta", be, "fp32"),
             ("epsilon", 1e-3, "fp32")], tol=1e-4)
    m_, v_ = xn.mean((2, 3), keepdims=True), xn.var((2, 3), keepdims=True)
    op_case("instance_norm_" + dt, "instance_norm", {"x": xn}, dt,
            lambda v: (v - v.mean((2, 3), keepdims=True)) / np.sqrt(v.var((2, 3), keepdims=True) + 1e-5) * al[:, None, None]
            + be[:, None, None], [("gamma", al, "fp32"), ("beta", be, "fp32")], tol=1e-4)


# convolution and pooling: NumPy references, any spatial rank
def conv_ref(x, w, bias, s, d, plo, phi, g):
    nsp = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(plo, phi)))
    k = w.shape[2:]
    out = [(xp.shape[2 + i] - (k[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(nsp)]
    cout, cg = w.shape[0], x.shape[1] // g
    og = cout // g
    y = np.zeros((x.shape[0], cout) + tuple(out))
    for t in np.ndindex(*k):
        sl = tuple(slice(t[i] * d[i], t[i] * d[i] + (out[i] - 1) * s[i] + 1, s[i]) for i in range(nsp))
        patch = xp[(slice(None), slice(None)) + sl]
        for gi in range(g):
            y[:, gi * og:(gi + 1) * og] += np.einsum("oc,bc...->bo...", w[(slice(gi * og, (gi + 1) * og), slice(None)) + t],
                                                     patch[:, gi * cg:(gi + 1) * cg])
    if bias is not None:
        y += bias.reshape((1, -1) + (1,) * nsp)
    return y


def convt_ref(x, w, bias, s, d, plo, out, g):
    nsp = x.ndim - 2
    k, n = w.shape[2:], x.shape[2:]
    full = [(n[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 for i in range(nsp)]
    cg, og = x.shape[1] // g, w.shape[1]
    y = np.zeros((x.shape[0], og * g) + tuple(max(full[i], plo[i] + out[i]) for i in range(nsp)))
    for t in np.ndindex(*k):
        sl = tuple(slice(t[i] * d[i], t[i] * d[i] + (n[i] - 1) * s[i] + 1, s[i]) for i in range(nsp))
        for gi in range(g):
            part = np.einsum("co,bc...->bo...", w[(slice(gi * cg, (gi + 1) * cg), slice(None)) + t], x[:, gi * cg:(gi + 1) * cg])
            y[(slice(None), slice(gi * og, (gi + 1) * og)) + sl] += part
    y = y[(slice(None), slice(None)) + tuple(slice(plo[i], plo[i] + out[i]) for i in range(nsp))]
    return y + bias.reshape((1, -1) + (1,) * nsp) if bias is not None else y


def conv_case(label, xs, ws, s, d, pad, g, dt="fp32", pad_type="custom", bias=True):
    nsp = len(xs) - 2
    x, w = R(*xs), R(*ws) * 0.3
    bv = R(ws[0]) if bias else None
    if pad_type == "same":
        plo, phi = [], []
        for i in range(nsp):
            o = -(-xs[2 + i] // s[i])
            tot = max((o - 1) * s[i] + (ws[2 + i] - 1) * d[i] + 1 - xs[2 + i], 0)
            plo.append(tot // 2), phi.append(tot - tot // 2)
    else:
        plo, phi = list(pad[0::2]), list(pad[1::2])
    xi, wi = as_dt(x, dt), as_dt(w, dt)
    want = conv_ref(xi.astype(np.float64), wi.astype(np.float64), None if bv is None else as_dt(bv, dt).astype(np.float64),
                    s, d, plo, phi, g)
    body = [const("w", wi, dt), const("st", np.array(s), "int32"), const("dl", np.array(d), "int32"),
            'string pt = const()[val = string("%s")];' % pad_type, const("pd", np.array(pad if pad_type == "custom" else [0] * 2 * nsp), "int32"),
            const("g", g, "int32")]
    bias_arg = ""
    if bias:
        body.append(const("b", as_dt(bv, dt), dt))
        bias_arg = ", bias = b"
    body.append("%s y = conv(x = x, weight = w%s, strides = st, pad_type = pt, pad = pd, dilations = dl, groups = g);"
                % (ty(want, dt), bias_arg))
    case(label, {"x": (xi, dt)}, body, {"y": (want, dt)}, tol=1e-4)


for dt in FLOAT:
    conv_case("conv3x3_s1_" + dt, (1, 8, 9, 10), (16, 8, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, dt)
    conv_case("conv3x3_s2_" + dt, (2, 6, 11, 9), (5, 6, 3, 3), (2, 2), (1, 1), (1, 0, 2, 1), 1, dt)
conv_case("conv_dilated_same", (1, 4, 12, 12), (6, 4, 3, 3), (1, 1), (2, 2), None, 1, pad_type="same")
conv_case("conv_same_s2", (1, 4, 13, 12), (6, 4, 5, 3), (2, 2), (1, 1), None, 1, pad_type="same", bias=False)
conv_case("conv_valid_rect", (1, 3, 10, 7), (4, 3, 2, 4), (1, 2), (1, 1), (0, 0, 0, 0), 1, pad_type="valid")
conv_case("conv_groups", (1, 8, 9, 9), (6, 4, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 2)
conv_case("conv_depthwise", (2, 6, 10, 10), (6, 1, 3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 6)
conv_case("conv_depthwise_fp16", (1, 6, 10, 10), (12, 1, 3, 3), (1, 1), (2, 1), (2, 2, 1, 1), 6, "fp16")
conv_case("conv1d", (2, 5, 17), (7, 5, 3), (2,), (1,), (1, 1), 1)
conv_case("conv1d_dw_dilated", (1, 4, 20), (4, 1, 5), (1,), (3,), (4, 2), 4)
conv_case("conv3d", (1, 3, 5, 6, 7), (4, 3, 3, 2, 3), (1, 2, 1), (1, 1, 2), (1, 1, 0, 1, 2, 2), 1)
conv_case("conv1x1_s2", (1, 8, 8, 8), (4, 8, 1, 1), (2, 2), (1, 1), (0, 0, 0, 0), 1)


# conv_quantized ('linear'): W = W_q · quant_scale + quant_bias (one value or
# one per output channel), its uint8 bias the numbers it holds
def conv_quantized_case(label, xs, ws, groups, per_channel, bias, dt):
    cout = ws[0]
    wq = rng.integers(0, 256, ws)
    shp = (cout,) if per_channel else ()
    sc, qb = as_dt(np.abs(R(*shp)) * 0.02 + 0.005, dt), as_dt(R(*shp) * 0.5, dt)
    bq = rng.integers(0, 256, cout)
    w = wq * (sc.reshape(-1, 1, 1, 1) if per_channel else sc) + (qb.reshape(-1, 1, 1, 1) if per_channel else qb)
    x = as_dt(R(*xs), dt)
    want = conv_ref(x.astype(np.float64), w.astype(np.float64), bq.astype(np.float64) if bias else None, (1, 1), (1, 1),
                    (1, 1), (1, 1), groups)
    body = [const("wq", wq, "uint8"), const("qs", sc, dt), const("qb", qb, dt), const("g", groups, "int32"),
            const("pd", np.array([1, 1, 1, 1]), "int32")]
    if bias:
        body.append(const("b", bq, "uint8"))
    body.append('%s y = conv_quantized(x = x, weight = wq%s, quantization_type = string("linear"), quant_scale = qs, '
                'quant_bias = qb, pad_type = string("custom"), pad = pd, groups = g);' % (ty(want, dt), ", bias = b" if bias else ""))
    case(label, {"x": (x, dt)}, body, {"y": (want, dt)}, tol=1e-4, opset="ios16")


conv_quantized_case("conv_quantized_per_channel", (1, 6, 7, 8), (10, 6, 3, 3), 1, True, True, "fp32")
conv_quantized_case("conv_quantized_groups_fp16", (2, 4, 6, 6), (6, 2, 3, 3), 2, False, False, "fp16")
# the implicit GEMM (CONV_GEMM): output rows longer than a tile, Cout past one
# 64-column panel with a partial last one, odd channel counts, K-blocks that
# cross the spans of kernel rows (depth 1350), dilation across with stride 2,
# a batch of 2
conv_case("conv_gemm_panels", (2, 13, 15, 17), (70, 13, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1)
conv_case("conv_gemm_deep", (1, 150, 6, 7), (20, 150, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1)
conv_case("conv_gemm_dil_s2", (1, 5, 17, 19), (9, 5, 3, 2), (2, 2), (2, 3), (2, 1, 0, 3), 1)
conv_case("conv_gemm_s2_fp16", (1, 33, 14, 14), (65, 33, 3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1, "fp16")


def convt_case(label, xs, ws, s, d, pad, g, dt="fp32"):
    nsp = len(xs) - 2
    x, w, bv = R(*xs), R(*ws) * 0.3, R(ws[1] * g)
    xi, wi, bi = as_dt(x, dt), as_dt(w, dt), as_dt(bv, dt)
    out = [(xs[2 + i] - 1) * s[i] + (ws[2 + i] - 1) * d[i] + 1 - pad[2 * i] - pad[2 * i + 1] for i in range(nsp)]
    want = convt_ref(xi.astype(np.float64), wi.astype(np.float64), bi.astype(np.float64), s, d, pad[0::2], out, g)
    body = [const("w", wi, dt), const("b", bi, dt), const("st", np.array(s), "int32"), const("dl", np.array(d), "int32"),
            'string pt = const()[val = string("custom")];', const("pd", np.array(pad), "int32"), const("g", g, "int32"),
            "%s y = conv_transpose(x = x, weight = w, bias = b, strides = st, pad_type = pt, pad = pd, dilations = dl, groups = g);"
            % ty(want, dt)]
    case(label, {"x": (xi, dt)}, body, {"y": (want, dt)}, tol=1e-4)


for dt in FLOAT:
    convt_case("conv_transpose_s2_" + dt, (1, 4, 5, 6), (4, 3, 3, 3), (2, 2), (1, 1), (1, 1, 0, 1), 1, dt)
convt_case("conv_transpose_groups", (2, 6, 4, 4), (6, 2, 2, 3), (1, 2), (2, 1), (0, 0, 1, 0), 3)
convt_case("conv_transpose_1d", (1, 3, 7), (3, 5, 4), (3,), (1,), (1, 2), 1)


def pool_case(label, op, xs, k, s, pad, dt="fp32", exclude=False, pad_type="custom"):
    nsp = len(xs) - 2
    x = as_dt(R(*xs), dt)
    xd = x.astype(np.float64)
    plo, phi = list(pad[0::2]), list(pad[1::2])
    out = [(xs[2 + i] + plo[i] + phi[i] - k[i]) // s[i] + 1 for i in range(nsp)]
    fill = -np.inf if op == "max_pool" else 0.0
    xp = np.pad(xd, [(0, 0), (0, 0)] + list(zip(plo, phi)), constant_values=fill)
    ones = np.pad(np.ones(xd.shape), [(0, 0), (0, 0)] + list(zip(plo, phi)))
    acc = np.full(xd.shape[:2] + tuple(out), -np.inf if op == "max_pool" else 0.0)
    cnt = np.zeros_like(acc)
    for t in np.ndindex(*k):
        sl = (slice(None), slice(None)) + tuple(slice(t[i], t[i] + (out[i] - 1) * s[i] + 1, s[i]) for i in range(nsp))
        v = xp[sl]
        acc = np.maximum(acc, v) if op == "max_pool" else acc + (v * v if op == "l2_pool" else v)
        cnt += ones[sl] if exclude else 1
    want = acc if op == "max_pool" else np.sqrt(acc) if op == "l2_pool" else acc / cnt
    body = [const("k", np.array(k), "int32"), const("st", np.array(s), "int32"),
            'string pt = const()[val = string("%s")];' % pad_type, const("pd", np.array(pad), "int32"),
            const("cm", False, "bool")]
    extra = ""
    if op == "avg_pool":
        body.append(const("ex", exclude, "bool"))
        extra = ", exclude_padding_from_average = ex"
    body.append("%s y = %s(x = x, kernel_sizes = k, strides = st, pad_type = pt, pad = pd, ceil_mode = cm%s);"
                % (ty(want, dt), op, extra))
    case(label, {"x": (x, dt)}, body, {"y": (want, dt)}, tol=1e-4)


for dt in FLOAT:
    for op in ("max_pool", "avg_pool", "l2_pool"):
        pool_case("%s_%s" % (op, dt), op, (1, 3, 9, 10), (3, 3), (2, 2), (1, 1, 1, 0), dt)
pool_case("avg_pool_exclude", "avg_pool", (2, 2, 7, 8), (3, 2), (1, 2), (1, 1, 0, 1), exclude=True)
pool_case("max_pool_1d", "max_pool", (2, 3, 11), (4,), (3,), (2, 1))
pool_case("avg_pool_3d", "avg_pool", (1, 2, 5, 6, 4), (2, 3, 2), (1, 2, 2), (0, 1, 1, 0, 0, 0))
# data movement
xd = R(2, 3, 4, 6)
for dt in ("fp32", "fp16", "int32"):
    op_case("identity_" + dt, "identity", {"x": xd * 3}, dt, lambda v: v)
    op_case("reverse_" + dt, "reverse", {"x": xd * 3}, dt, lambda v: v[:, ::-1, :, ::-1], [("axes", np.array([1, -1]), "int32")])
    op_case("flatten2d_" + dt, "flatten2d", {"x": xd * 3}, dt, lambda v: v.reshape(6, 24), [("axis", 2, "int32")])
    op_case("space_to_depth_" + dt, "space_to_depth", {"x": xd}, "fp32" if dt == "int32" else dt,
            lambda v: v.reshape(2, 3, 2, 2, 3, 2).transpose(0, 3, 5, 1, 2, 4).reshape(2, 12, 2, 3), [("block_size", 2, "int32")])
    op_case("depth_to_space_" + dt, "depth_to_space", {"x": R(2, 12, 2, 3)}, "fp32" if dt == "int32" else dt,
            lambda v: v.reshape(2, 2, 2, 3, 2, 3).transpose(0, 3, 4, 1, 5, 2).reshape(2, 3, 4, 6), [("block_size", 2, "int32")])
op_case("reverse_all", "reverse", {"x": xd}, "fp32", lambda v: v[::-1, ::-1, ::-1, ::-1])
op_case("upsample_nn", "upsample_nearest_neighbor", {"x": xd}, "fp32", lambda v: v.repeat(2, 2).repeat(3, 3),
        [("scale_factor_height", 2, "int32"), ("scale_factor_width", 3, "int32")])
op_case("upsample_nn_fp16", "upsample_nearest_neighbor", {"x": xd}, "fp16", lambda v: v.repeat(3, 2).repeat(1, 3),
        [("scale_factor_height", 3.0, "fp32"), ("scale_factor_width", 1.0, "fp32")])
s1, s2, s3 = R(3, 4), R(3, 4), R(3, 4)
for axis in (0, 1, -1):
    case("stack_%d" % axis, {"a": (s1, "fp32"), "b": (s2, "fp32"), "c": (s3, "fp32")},
         [const("ax", axis, "int32"), "%s y = stack(values = (a, b, c), axis = ax);" % ty(np.stack([s1, s2, s3], axis))],
         {"y": (np.stack([s1, s2, s3], axis), "fp32")})
case("fill", {"x": (s1, "fp32")}, [const("sh", np.array([2, 5]), "int32"), const("v", 2.5),
                                    "tensor<fp32, [2, 5]> f = fill(shape = sh, value = v);", "tensor<fp32, [3, 4]> y = add(x = x, y = x);"],
     {"f": (np.full((2, 5), 2.5), "fp32"), "y": (s1 * 2, "fp32")})
case("fill_int32", {"x": (s1, "fp32")}, [const("sh", np.array([4]), "int32"), const("v", 7, "int32"),
                                          "tensor<int32, [4]> f = fill(shape = sh, value = v);"], {"f": (np.full(4, 7), "int32")})
case("shape", {"x": (xd, "fp32")}, ["tensor<int32, [4]> y = shape(x = x);", "tensor<fp32, [2, 3, 4, 6]> z = relu(x = x);"],
     {"y": (np.array(xd.shape), "int32"), "z": (np.maximum(xd, 0), "fp32")})
# palettized weights: constexpr_lut_to_dense read as packed indices by linear, or made dense for other consumers


def lut_case(label, m, n, k, bits, blocks, dt="fp32", bias=True, consumer="linear"):
    idx = rng.integers(0, 1 << bits, (n, k))
    lut = as_dt(R(blocks[0], blocks[1], 1 << bits, 1), dt)
    rn, rk = n // blocks[0], k // blocks[1]
    wd = np.array([[lut[i // rn, j // rk, idx[i, j], 0] for j in range(k)] for i in range(n)], np.float64)
    ity = "uint%d" % bits
    body = [const("ix", idx, ity), const("lut", lut, dt),
            "tensor<%s, [%d, %d]> w = constexpr_lut_to_dense(indices = ix, lut = lut);" % (dt, n, k)]
    if consumer == "linear":
        x = as_dt(R(m, k), dt)
        bv = as_dt(R(n), dt)
        want = x.astype(np.float64) @ wd.T + (bv if bias else 0)
        if bias:
            body.append(const("b", bv, dt))
        body.append("%s y = linear(x = x, weight = w%s);" % (ty(want, dt), ", bias = b" if bias else ""))
    else:
        x = as_dt(R(n, k), dt)
        want = x.astype(np.float64) + wd
        body.append("%s y = add(x = x, y = w);" % ty(want, dt))
    case(label, {"x": (x, dt)}, body, {"y": (want, dt)}, tol=1e-4)


lut_case("lut4_linear", 1, 8, 256, 4, (1, 1))
lut_case("lut4_linear_m6_fp16", 6, 8, 384, 4, (4, 3), "fp16")
lut_case("lut4_linear_perchannel_tail", 5, 8, 40, 4, (8, 1), bias=False)
lut_case("lut8_linear", 3, 4, 24, 8, (2, 1))
lut_case("lut2_dense_add", 0, 3, 4, 2, (1, 2), consumer="add")
lut_case("lut3_dense_add", 0, 4, 6, 3, (2, 1), consumer="add")
# the other constexpr_* ops: dense weights built at compile time, feeding linear or an add
xl = R(3, 8)
w16 = f16(R(4, 8))
case("constexpr_cast", {"x": (xl, "fp32")},
     [const("s", w16, "fp16"), 'tensor<fp32, [4, 8]> w = constexpr_cast(source_val = s, output_dtype = string("fp32"));',
      "tensor<fp32, [3, 4]> y = linear(x = x, weight = w);"], {"y": (xl @ w16.T.astype(np.float64), "fp32")})
q8 = rng.integers(-128, 128, (6, 8))
zp8, sc6 = rng.integers(-5, 5, 6), np.abs(R(6)) * 0.05 + 0.01
case("constexpr_affine_dequantize", {"x": (xl, "fp32")},
     [const("q", q8, "int8"), const("zp", zp8, "int8"), const("sc", sc6), const("ax", 0, "int32"),
      "tensor<fp32, [6, 8]> w = constexpr_affine_dequantize(quantized_data = q, zero_point = zp, scale = sc, axis = ax);",
      "tensor<fp32, [3, 6]> y = linear(x = x, weight = w);"],
     {"y": (xl @ ((q8 - zp8[:, None]) * sc6[:, None]).T, "fp32")})
d8, off8, sc42 = rng.integers(-100, 100, (4, 8)), rng.integers(-3, 3, (4, 2)), np.abs(R(4, 2)) * 0.1
xb = R(4, 8)
case("constexpr_blockwise_shift_scale", {"x": (xb, "fp32")},
     [const("d", d8, "int8"), const("sc", sc42), const("of", off8, "int8"),
      "tensor<fp32, [4, 8]> w = constexpr_blockwise_shift_scale(data = d, scale = sc, offset = of);",
      "tensor<fp32, [4, 8]> y = add(x = x, y = w);"],
     {"y": (xb + (d8 - off8.repeat(4, 1)) * sc42.repeat(4, 1), "fp32")})
# linear over 8- and 4-bit weights runs RT_OP_QGEMM on the integers as
# stored: per tensor (uint8, a bias, one row of x: the decode path), per
# output channel with x of rank 3, blocks along N and K with and without
# offsets; a scale per input channel, and 4-bit blocks of an odd length
# (they split a byte), take the dense path
def linear_over(label, body, x, xs, n, wd, dt, bias):
    """body (which makes w) then y = linear(x, w[, b]) against x @ wd.T"""
    b = as_dt(R(n), dt)
    if bias:
        body.append(const("b", b, dt))
    yshape = ", ".join(map(str, list(xs) + [n]))
    body.append("tensor<%s, [%s]> y = linear(x = x, weight = w%s);" % (dt, yshape, ", bias = b" if bias else ""))
    ref = x.astype(np.float64) @ wd.T + (b if bias else 0)
    case(label, {"x": (x, dt)}, body, {"y": (ref, dt)}, tol=2e-5 if dt == "fp32" else 2e-3)


def q_linear_case(label, xs, n, k, qdt, form, bias=False, dt="fp32"):
    lo, hi = {"int8": (-128, 128), "uint8": (0, 256), "int4": (-8, 8), "uint4": (0, 16)}[qdt]
    qv, x = rng.integers(lo, hi, (n, k)), as_dt(R(*xs, k), dt)
    body = [const("q", qv, qdt)]
    if form == "tensor" or form == "channel" or form == "input":
        shp = {"tensor": (), "channel": (n,), "input": (k,)}[form]
        sc, zp = as_dt(np.abs(R(*shp)) * 0.05 + 0.01, dt), rng.integers(lo // 16, hi // 16, shp)
        body += [const("sc", sc, dt), const("zp", zp, qdt), const("ax", 1 if form == "input" else 0, "int32"),
                 "tensor<%s, [%d, %d]> w = constexpr_affine_dequantize(quantized_data = q, zero_point = zp, "
                 "scale = sc, axis = ax);" % (dt, n, k)]
        a = 1 if form == "input" else 0
        wd = (qv - np.expand_dims(zp, 1 - a) if np.ndim(zp) else qv - zp) * (np.expand_dims(sc, 1 - a) if np.ndim(sc) else sc)
    else:
        bn, bk, off = form
        sc = as_dt(np.abs(R(bn, bk)) * 0.05 + 0.01, dt)
        rep = lambda a: np.repeat(np.repeat(a, n // bn, 0), k // bk, 1)
        of = rng.integers(lo // 16, hi // 16, (bn, bk)) if off else np.zeros((bn, bk), np.int64)
        body += [const("sc", sc, dt)] + ([const("of", of, qdt)] if off else [])
        body.append("tensor<%s, [%d, %d]> w = constexpr_blockwise_shift_scale(data = q, scale = sc%s);" % (
            dt, n, k, ", offset = of" if off else ""))
        wd = (qv - rep(of)) * rep(sc)
    linear_over(label, body, x, xs, n, wd, dt, bias)


q_linear_case("q8_linear_tensor_decode", (1,), 6, 40, "uint8", "tensor", bias=True)
q_linear_case("q8_linear_channel_rank3", (2, 3), 7, 64, "int8", "channel")
q_linear_case("q8_linear_channel_fp16", (5,), 6, 48, "int8", "channel", bias=True, dt="fp16")
q_linear_case("q8_linear_input_dense", (3,), 5, 24, "int8", "input")
q_linear_case("q8_linear_blocks_offset", (9,), 6, 64, "int8", (3, 4, True), bias=True)
q_linear_case("q8_linear_blocks_uint8", (1,), 8, 32, "uint8", (8, 2, False))
q_linear_case("q4_linear_blocks", (3,), 4, 16, "int4", (1, 2, False))
q_linear_case("q4_linear_decode_offset", (1,), 6, 64, "int4", (6, 4, True), bias=True)
q_linear_case("q4_linear_uint4_fp16", (5,), 8, 48, "uint4", (2, 2, True), dt="fp16")
q_linear_case("q4_linear_odd_blocks_dense", (2,), 4, 36, "int4", (2, 4, True))
mask = rng.random((3, 5)) > 0.5
nzv = R(int(mask.sum()))
dense = np.zeros((3, 5))
dense[mask] = nzv
xs_ = R(3, 5)
case("constexpr_sparse_to_dense", {"x": (xs_, "fp32")},
     [const("nz", nzv), const("m", mask.astype(np.int64), "uint1"),
      "tensor<fp32, [3, 5]> w = constexpr_sparse_to_dense(nonzero_data = nz, mask = m);",
      "tensor<fp32, [3, 5]> y = add(x = x, y = w);"], {"y": (xs_ + dense, "fp32")})
# linear over constexpr_sparse_to_dense runs RT_OP_SPGEMM on the mask and the
# nonzero values: K past the last 16 bits, fp16 values, a row with nothing
# set, rows of x of rank 3
def sparse_linear_case(label, xs, n, k, density, dt="fp32", bias=False):
    m = rng.random((n, k)) < density
    m[0] = False
    vals = as_dt(R(int(m.sum())), dt)
    wd = np.zeros((n, k))
    wd[m] = vals
    x = as_dt(R(*xs, k), dt)
    body = [const("nz", vals, dt), const("m", m.astype(np.int64), "uint1"),
            "tensor<%s, [%d, %d]> w = constexpr_sparse_to_dense(nonzero_data = nz, mask = m);" % (dt, n, k)]
    linear_over(label, body, x, xs, n, wd, dt, bias)


sparse_linear_case("sparse_linear_decode", (1,), 6, 37, 0.4, bias=True)
sparse_linear_case("sparse_linear_fp16", (5,), 8, 64, 0.3, dt="fp16")
sparse_linear_case("sparse_linear_rank3", (2, 3), 5, 48, 0.7)


# ios18's sparse-to-sparse ops, then constexpr_sparse_to_dense: each nonzero
# value is decompressed by the palette or scale block of its dense place; a
# vector palette widens dim vector_axis of the mask and the values
def lut_to_sparse_case(label, shape, bits, blocks, vec, axis, dt, consumer):
    m = rng.random(shape) < 0.5
    idx = rng.integers(0, 1 << bits, int(m.sum()))
    lut = as_dt(R(*(blocks + (1 << bits, vec))), dt)
    dense_ix = np.zeros(shape, np.int64)
    dense_ix[m] = idx
    wd = np.zeros([d * (vec if a == axis % len(shape) else 1) for a, d in enumerate(shape)])
    for c in np.ndindex(*shape):
        if not m[c]:
            continue
        blk = tuple(c[d] // (shape[d] // blocks[d]) for d in range(len(shape)))
        for k in range(vec):
            o = list(c)
            o[axis] = c[axis] * vec + k
            wd[tuple(o)] = lut.astype(np.float64)[blk + (dense_ix[c], k)]
    wm = np.repeat(m, vec, axis=axis)
    body = [const("m", m.astype(np.int64), "uint1"), const("ix", idx, "uint%d" % bits), const("lut", lut, dt)]
    va = ", vector_axis = va" if vec > 1 else ""
    if vec > 1:
        body.append(const("va", axis, "int32"))
    body += ["%s wm, %s wv = constexpr_lut_to_sparse(indices_mask = m, indices_nonzero_data = ix, lut = lut%s);"
             % (ty(wm, "uint1"), "tensor<%s, [%d]>" % (dt, wm.sum()), va),
             "%s w = constexpr_sparse_to_dense(nonzero_data = wv, mask = wm);" % ty(wd, dt)]
    if consumer == "linear":
        x = as_dt(R(3, wd.shape[1]), dt)
        linear_over(label, body, x, (3,), wd.shape[0], wd, dt, True)
    else:
        x = as_dt(R(*wd.shape), dt)
        body.append("%s y = add(x = x, y = w);" % ty(wd, dt))
        case(label, {"x": (x, dt)}, body, {"y": (x.astype(np.float64) + wd, dt)}, tol=2e-5 if dt == "fp32" else 2e-3)


lut_to_sparse_case("lut_to_sparse_2bit_blocks", (4, 6), 2, (2, 3), 1, 0, "fp32", "add")
lut_to_sparse_case("lut_to_sparse_1bit_fp16", (3, 5), 1, (1, 1), 1, 0, "fp16", "add")
lut_to_sparse_case("lut_to_sparse_vector_axis0", (4, 10), 4, (2, 1), 2, 0, "fp32", "linear")
lut_to_sparse_case("lut_to_sparse_vector_last", (2, 3, 4), 3, (1, 3, 1), 3, -1, "fp16", "add")


def sparse_shift_scale_case(label, shape, qdt, blocks, offset, dt, consumer):
    lo, hi = {"int8": (-128, 128), "uint8": (0, 256), "int4": (-8, 8), "uint4": (0, 16)}[qdt]
    m = rng.random(shape) < 0.6
    q = rng.integers(lo, hi, int(m.sum()))
    sc = as_dt(np.abs(R(*blocks)) * 0.05 + 0.01, dt)
    of = rng.integers(lo // 4, hi // 4, blocks)
    dq = np.zeros(shape, np.int64)
    dq[m] = q
    rep = [shape[d] // blocks[d] for d in range(len(shape))]
    big = lambda a: np.kron(a.astype(np.float64), np.ones(rep))
    wd = np.where(m, (dq - (big(of) if offset else 0)) * big(sc), 0)
    body = [const("m", m.astype(np.int64), "uint1"), const("q", q, qdt), const("sc", sc, dt)]
    if offset:
        body.append(const("of", of, qdt))
    body += ["%s wm, %s wv = constexpr_sparse_blockwise_shift_scale(data_mask = m, nonzero_data = q, scale = sc%s);"
             % (ty(m, "uint1"), "tensor<%s, [%d]>" % (dt, m.sum()), ", offset = of" if offset else ""),
             "%s w = constexpr_sparse_to_dense(nonzero_data = wv, mask = wm);" % ty(wd, dt)]
    if consumer == "linear":
        x = as_dt(R(2, shape[1]), dt)
        linear_over(label, body, x, (2,), shape[0], wd, dt, False)
    else:
        x = as_dt(R(*shape), dt)
        body.append("%s y = add(x = x, y = w);" % ty(wd, dt))
        case(label, {"x": (x, dt)}, body, {"y": (x.astype(np.float64) + wd, dt)}, tol=2e-5 if dt == "fp32" else 2e-3)


sparse_shift_scale_case("sparse_shift_scale_int8_offset", (6, 16), "int8", (3, 4), True, "fp32", "linear")
sparse_shift_scale_case("sparse_shift_scale_int4_fp16", (4, 8), "int4", (4, 1), False, "fp16", "linear")
sparse_shift_scale_case("sparse_shift_scale_uint8_add", (2, 3, 4), "uint8", (1, 3, 2), True, "fp32", "add")
# l2_norm (over the last three dims) and local_response_norm (a window of channels)
x5 = R(2, 3, 4, 5) * 2
for dt in FLOAT:
    op_case("l2_norm_" + dt, "l2_norm", {"x": x5}, dt, lambda v: v / np.sqrt((v * v).sum((1, 2, 3), keepdims=True) + 1e-6), tol=1e-4)
    op_case("l2_norm_rank5_" + dt, "l2_norm", {"x": R(2, 2, 3, 4, 5)}, dt,
            lambda v: v / np.sqrt((v * v).sum((2, 3, 4), keepdims=True) + 1e-6), tol=1e-4)


def lrn_ref(v, size, alpha, beta, k):
    c = v.shape[1]
    out = np.empty_like(v)
    for i in range(c):
        lo, hi = max(0, i - (size - 1) // 2), min(c, i + size // 2 + 1)
        out[:, i] = v[:, i] / (k + alpha / size * (v[:, lo:hi] ** 2).sum(1)) ** beta
    return out


xl5 = R(2, 7, 3, 4) * 2
for dt in FLOAT:
    for size in (3, 4):
        op_case("local_response_norm_%d_%s" % (size, dt), "local_response_norm", {"x": xl5}, dt,
                lambda v: lrn_ref(v, size, 0.5, 0.75, 2.0),
                [("size", size, "int32"), ("alpha", 0.5, "fp32"), ("beta", 0.75, "fp32"), ("k", 2.0, "fp32")], tol=1e-4)
# cumsum and gather_along_axis
xc4 = R(3, 4, 5) * 3


def cum_ref(v, axis, exclusive, reverse):
    w = np.flip(v, axis) if reverse else v
    c = np.cumsum(w, axis)
    if exclusive:
        c = c - w
    return np.flip(c, axis) if reverse else c


for dt in NUM:
    for axis, ex, rv in [(1, False, False), (-1, True, False), (0, False, True), (2, True, True)]:
        op_case("cumsum_%s_%d%d%d" % (dt, axis, ex, rv), "cumsum", {"x": xc4}, dt,
                lambda v: cum_ref(v, axis, ex, rv), [("axis", axis, "int32"), ("exclusive", ex, "bool"), ("reverse", rv, "bool")],
                tol=1e-4)
gi = rng.integers(-4, 4, (3, 6, 5))
for dt in ("fp32", "fp16", "int32"):
    xg = as_dt(xc4, dt)
    case("gather_along_axis_" + dt, {"x": (xg, dt)},
         [const("i", gi, "int32"), const("ax", 1, "int32"), "%s y = gather_along_axis(x = x, indices = i, axis = ax);" % ty(gi, dt)],
         {"y": (np.take_along_axis(xg.astype(np.float64), np.where(gi < 0, gi + 4, gi), 1), dt)})
