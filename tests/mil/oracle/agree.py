#!/usr/bin/python3
"""agree.py — milc's type and shape inference against coremltools', op by op.

For every op family below and every opset (iOS15..iOS18), random well-typed and
ill-typed calls are built with coremltools' Builder (its op definitions, type
domains and type_inference decide: accepted with these output types, or
refused).  Each call is then written as a model.mil function whose results are
declared with the types coremltools inferred, and `milc check --json` judges
the file.  milc agrees when it accepts exactly the calls coremltools accepts
(accepting means its inferred types equal the declared ones) and refuses the
others with a diagnostic about the op itself, not only about the declared type.

  agree.py MILC ORACLE_DIR KNOWN_DIFFERENCES [--seed N] [--per-op N] [--ops OP,OP...]
           [--parse-driver MIL_CHECK_DRIVER]

Prints the agreement table (op x opset: cases, agree, disagree) and exits 1 on
any disagreement not listed in KNOWN_DIFFERENCES (lines `OP accepts|refuses
TEXT`: coremltools accepts or refuses, and milc's diagnostic contains TEXT; a
listed case counts as agreeing).  Without the oracle it exits
77 (skipped) locally and 1 under CI=true.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np

MILC, ORACLE, KNOWN = sys.argv[1], sys.argv[2], sys.argv[3]
args = sys.argv[4:]
SEED = int(args[args.index("--seed") + 1]) if "--seed" in args else 16
PER_OP = int(args[args.index("--per-op") + 1]) if "--per-op" in args else 6
ONLY = args[args.index("--ops") + 1].split(",") if "--ops" in args else None
PARSER = args[args.index("--parse-driver") + 1] if "--parse-driver" in args else None
OPSETS = ["iOS15", "iOS16", "iOS17", "iOS18"]

try:
    sys.path.insert(0, ORACLE)
    import oracle  # noqa: E402

    ct = oracle.coremltools()
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import types
except Exception as e:  # the oracle is not set up on this machine
    msg = "coremltools oracle not available (%s): run %s/setup.sh and set PYTHONPATH as it prints" % (e, ORACLE)
    print(msg)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

rng = random.Random(SEED)
DT = {"fp16": types.fp16, "fp32": types.fp32, "int32": types.int32, "bool": types.bool, "uint16": types.uint16,
      "int8": types.int8, "uint8": types.uint8, "int16": types.int16}
NP = {"fp16": np.float16, "fp32": np.float32, "int32": np.int32, "bool": np.bool_, "uint16": np.uint16,
      "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint32": np.uint32}
OPSET = "iOS18"  # the opset the current case is made for (main sets it)


class Sub:
    """A constant of a sub-byte dtype (uint1..uint6, int4): its values as uint8
    or int8 and the dtype's name; coremltools gets them in its own NumPy dtype."""

    def __init__(self, v, dt):
        self.v, self.dt = np.asarray(v), dt

    def oracle(self):
        return self.v.astype(getattr(types, "np_%s_dtype" % self.dt))


class ListArg:
    """A list built by make_list before the op (argument ls), or make_list's own
    arguments: element dtype, elem_shape (ints; a string is a run-time dim),
    init_length, dynamic_length (None: left to the default)."""

    def __init__(self, dt, elem, init=None, dynamic=None):
        self.dt, self.elem, self.init, self.dynamic = dt, elem, init, dynamic

    def kwargs(self):
        kw = {"dtype": self.dt, "elem_shape": self.elem}
        if self.init is not None:
            kw["init_length"] = np.int32(self.init)
        if self.dynamic is not None:
            kw["dynamic_length"] = np.bool_(self.dynamic)
        return kw

    def milc_type(self):
        dims = ", ".join("?" if isinstance(d, str) else str(d) for d in self.elem)
        fixed = self.dynamic is False
        # A dtype coremltools does not know is declared fp32: make_list must refuse it.
        dt = self.dt if self.dt in NP else "fp32"
        return "list<tensor<%s, [%s]>, %s>" % (dt, dims, (self.init if self.init is not None else 1) if fixed else "?")

    def milc_lines(self, name):
        lines, items = [], []
        for i, d in enumerate(self.elem):
            items.append("%s_e%d" % (name, i))
            lines.append("        %s %s = const()[name = string(\"%s\"), val = %s];\n" % (
                "string" if isinstance(d, str) else "int32", items[-1], items[-1], lit(d) if isinstance(d, str) else "int32(%d)" % d))
        args = ["dtype = %s" % lit(self.dt), "elem_shape = (%s)" % ", ".join(items)]
        if self.init is not None:
            args.append("init_length = int32(%d)" % self.init)
        if self.dynamic is not None:
            args.append("dynamic_length = bool(%s)" % ("true" if self.dynamic else "false"))
        lines.append("        %s %s = make_list(%s)[name = string(\"%s\")];\n" % (self.milc_type(), name, ", ".join(sorted(args)), name))
        return lines


LIST_RESULT = {"make_list", "list_write", "list_scatter"}  # ops whose result is a list: list_gather gives it out


class Tup:
    """A tuple of constant scalars (reshape_like's begins, ends, end_masks):
    coremltools gets a Python tuple, milc a tuple of named const values."""

    def __init__(self, vals, dt):
        self.vals, self.dt = list(vals), dt

    def oracle(self):
        return tuple(np.array(v, dtype=NP[self.dt])[()] for v in self.vals)

    def milc_lines(self, name):
        return ["        %s %s%d = const()[name = string(\"%s%d\"), val = %s];\n" % (
            self.dt, name, i, name, i, lit(np.array(v, dtype=NP[self.dt])[()], self.dt)) for i, v in enumerate(self.vals)]


class In:
    """A runtime input of the function (a tensor of this shape and dtype)."""

    def __init__(self, shape, dt):
        self.shape, self.dt = tuple(shape), dt


class StateIn(In):
    """A state input of the function: state<tensor<dt, shape>> (iOS18)."""


def const(a, dt):
    """A constant argument: a NumPy value (a scalar for rank 0) or a Python string."""
    if dt == "string":
        return a
    v = np.array(a, dtype=NP[dt])
    return v[()] if v.ndim == 0 else v


def shape(lo=1, hi=4, rmin=1, rmax=4):
    return [rng.randint(lo, hi) for _ in range(rng.randint(rmin, rmax))]


def rand_const(shp, dt):
    if dt == "bool":
        return np.array(np.random.default_rng(rng.randint(0, 1 << 30)).random(shp) > 0.5)
    v = np.random.default_rng(rng.randint(0, 1 << 30)).standard_normal(shp) * 2
    return v.astype(NP[dt])


# ---- case generators: each returns a dict of arguments ----

def g_unary(dts, bad):
    def g():
        return {"x": In(shape(), rng.choice(dts + bad if rng.random() < 0.3 else dts))}
    return g


def g_act(nparams, scalar=True):
    def g():
        dt = rng.choice(["fp16", "fp32"])
        a = {"x": In(shape(rmin=3 if not scalar else 1), dt)}
        for p in ["alpha", "beta"][:nparams]:
            pdt = rng.choice([dt, dt, "fp32", "int32"])
            if scalar:
                a[p] = const(rng.uniform(0.1, 2), pdt) if pdt != "int32" else const(1, "int32")
            else:
                c = a["x"].shape[1] + (1 if rng.random() < 0.2 else 0)
                a[p] = rand_const((c,), pdt)
        return a
    return g


def broadcastable(s):
    t = [d if rng.random() < 0.6 else 1 for d in s][rng.randint(0, len(s) - 1):]
    if rng.random() < 0.15:
        t = [d + 1 for d in t]
    return t or [1]


def g_binary(dts):
    def g():
        s = shape()
        dt = rng.choice(dts)
        dt2 = dt if rng.random() < 0.8 else rng.choice(["fp16", "fp32", "int32", "bool"])
        x, y = In(s, dt), In(broadcastable(s), dt2)
        return {"x": x, "y": y} if rng.random() < 0.5 else {"x": y, "y": x}
    return g


def pick_axes(r, n=None):
    n = rng.randint(1, r) if n is None else n
    ax = rng.sample(range(r), min(n, r))
    ax = [a - r if rng.random() < 0.4 else a for a in ax]
    if rng.random() < 0.1:
        ax.append(r + rng.randint(0, 2))  # out of range
    return ax


def g_reduce(dts):
    def g():
        s = shape()
        a = {"x": In(s, rng.choice(dts + ["bool"] if rng.random() < 0.1 else dts))}
        if rng.random() < 0.8:
            a["axes"] = const(pick_axes(len(s)), "int32")
        if rng.random() < 0.5:
            a["keep_dims"] = const(rng.random() < 0.5, "bool")
        return a
    return g


def g_reduce_arg():
    s = shape()
    a = {"x": In(s, rng.choice(["fp16", "fp32", "int32"]))}
    if rng.random() < 0.8:
        a["axis"] = const(pick_axes(len(s), 1)[-1], "int32")
    if rng.random() < 0.5:
        a["keep_dims"] = const(rng.random() < 0.5, "bool")
    return a


def g_pool():
    ns = rng.randint(1, 3)
    sp = [rng.randint(2, 9) for _ in range(ns)]
    a = {"x": In([1, rng.randint(1, 3)] + sp, rng.choice(["fp16", "fp32"])),
         "kernel_sizes": const([rng.randint(1, 4) for _ in range(ns)], "int32"),
         "pad_type": const(rng.choice(["valid", "same", "custom", "same_lower"]), "string")}
    if rng.random() < 0.7:
        a["strides"] = const([rng.randint(1, 3) for _ in range(ns)], "int32")
    if a["pad_type"] == "custom" or rng.random() < 0.2:
        a["pad"] = const([rng.randint(0, 1) for _ in range(2 * ns)], "int32")
    if rng.random() < 0.5:
        a["ceil_mode"] = const(rng.random() < 0.5, "bool")
    return a


def g_softmax():
    s = shape()
    return {"x": In(s, rng.choice(["fp16", "fp32"])), "axis": const(pick_axes(len(s), 1)[-1], "int32")}


def g_transpose():
    s = shape()
    p = list(range(len(s)))
    rng.shuffle(p)
    p = [v - len(s) if rng.random() < 0.4 else v for v in p]
    if rng.random() < 0.1:
        p = p[:-1] or [0, 0]
    return {"x": In(s, rng.choice(["fp16", "fp32", "int32", "bool"])), "perm": const(p, "int32")}


def g_concat_stack(stack):
    def g():
        s = shape()
        n = rng.randint(1, 3)
        ax = rng.randint(-len(s) - stack, len(s) - 1 + stack)
        vals = []
        for _ in range(n):
            t = list(s)
            if not stack and rng.random() < 0.5:
                t[ax if ax >= 0 else ax + len(s)] = rng.randint(1, 4) if -len(s) <= ax < len(s) else 1
            if rng.random() < 0.1:
                t[0] += 1
            vals.append(In(t, "fp16"))
        a = {"values": vals, "axis": const(ax, "int32")}
        if not stack:
            a["interleave"] = const(False, "bool")
        return a
    return g


def g_expand_squeeze(expand):
    def g():
        s = shape()
        if expand:
            n = rng.randint(1, 2)
            r = len(s) + n
            return {"x": In(s, "fp32"), "axes": const(rng.sample(range(-r, r), n), "int32")}
        s = [d if rng.random() < 0.5 else 1 for d in s]
        ones = [i for i, d in enumerate(s) if d == 1] or [0]
        a = {"x": In(s, "fp32")}
        if rng.random() < 0.8:
            a["axes"] = const([i - len(s) if rng.random() < 0.5 else i for i in rng.sample(ones, rng.randint(1, len(ones)))], "int32")
        return a
    return g


def g_shape():
    return {"x": In(shape(), rng.choice(["fp16", "fp32", "int32", "bool"]))}


def g_gather():
    s = shape()
    a = {"x": In(s, rng.choice(["fp16", "fp32", "int32"])),
         "indices": const(np.array([rng.randint(0, 1) for _ in range(rng.randint(1, 3))]), "int32"),
         "axis": const(pick_axes(len(s), 1)[-1], "int32")}
    return a


def g_prelu(nparams):
    return g_act(nparams, scalar=False)


def g_matmul():
    b = shape(rmin=0, rmax=2)
    m, k, n = rng.randint(1, 4), rng.randint(1, 4), rng.randint(1, 4)
    k2 = k if rng.random() < 0.85 else k + 1
    dt = rng.choice(["fp16", "fp32"])
    return {"x": In(b + [m, k], dt), "y": In(broadcastable(b) + [k2, n] if b else [k2, n], dt)}


def g_reshape():
    s = shape()
    n = int(np.prod(s))
    t = [n] if rng.random() < 0.3 else [1, n]
    if rng.random() < 0.3:
        t = [-1] + ([1] if rng.random() < 0.5 else [])
    if rng.random() < 0.15:
        t = [n + 1]
    return {"x": In(s, rng.choice(["fp16", "int32", "bool"])), "shape": const(t, "int32")}


def g_tile():
    s = shape()
    reps = [rng.randint(1, 3) for _ in s] if rng.random() < 0.85 else [2]
    return {"x": In(s, rng.choice(["fp16", "fp32", "int32", "bool"])), "reps": const(reps, "int32")}


def g_cast():
    return {"x": In(shape(), rng.choice(["fp16", "fp32", "int32", "bool"])),
            "dtype": const(rng.choice(["fp16", "fp32", "int32", "bool", "int8", "uint8", "fp64"]), "string")}


def g_select():
    s = shape()
    dt = rng.choice(["fp16", "fp32", "int32"])
    return {"cond": In(broadcastable(s), rng.choice(["bool", "bool", "fp16"])), "a": In(s, dt), "b": In(broadcastable(s), dt)}


def g_band_part():
    s = shape(rmin=1, rmax=4)
    return {"x": In(s, "fp16"), "lower": const(rng.randint(-1, 2), "int32"), "upper": const(rng.randint(-1, 2), "int32")}


def g_gelu():
    return {"x": In(shape(), rng.choice(["fp16", "fp32", "int32"])),
            "mode": const(rng.choice(["EXACT", "TANH_APPROXIMATION", "SIGMOID_APPROXIMATION", "FAST"]), "string")}


def g_rsqrt():
    dt = rng.choice(["fp16", "fp32"])
    return {"x": In(shape(), dt), "epsilon": const(1e-3, rng.choice([dt, "fp32", "fp16"]))}


def g_layer_norm():
    s = shape()
    r = len(s)
    ax = sorted(set(a % r for a in pick_axes(r)) if rng.random() < 0.9 else [])
    a = {"x": In(s, rng.choice(["fp16", "fp32"])), "axes": const([v - r for v in ax] if rng.random() < 0.5 else ax, "int32")}
    if rng.random() < 0.5:
        g = [s[v] for v in ax]
        if rng.random() < 0.2:
            g = [d + 1 for d in g] or [2]
        a["gamma"] = rand_const(g, a["x"].dt)
    return a


def g_linear():
    s = shape(rmax=3)
    dout = rng.randint(1, 4)
    din = s[-1] if rng.random() < 0.85 else s[-1] + 1
    dt = rng.choice(["fp16", "fp32"])
    a = {"x": In(s, dt), "weight": rand_const((dout, din), dt)}
    if rng.random() < 0.5:
        a["bias"] = rand_const((dout if rng.random() < 0.9 else dout + 1,), dt)
    return a


def g_conv():
    ns = rng.randint(1, 2)
    g = rng.choice([1, 1, 2])
    cin = g * rng.randint(1, 2)
    cout = g * rng.randint(1, 2)
    sp = [rng.randint(3, 8) for _ in range(ns)]
    k = [rng.randint(1, 3) for _ in range(ns)]
    a = {"x": In([1, cin] + sp, "fp32"), "weight": rand_const([cout, cin // g] + k, "fp32"),
         "pad_type": const(rng.choice(["valid", "same", "custom", "same_lower"]), "string")}
    if g > 1:
        a["groups"] = const(g, "int32")
    if rng.random() < 0.5:
        a["strides"] = const([rng.randint(1, 2) for _ in range(ns)], "int32")
    if rng.random() < 0.4:
        a["dilations"] = const([rng.randint(1, 2) for _ in range(ns)], "int32")
    if a["pad_type"] == "custom":
        a["pad"] = const([rng.randint(0, 1) for _ in range(2 * ns)], "int32")
    return a


def g_split():
    s = shape()
    ax = rng.randint(-len(s), len(s) - 1)
    d = s[ax]
    a = {"x": In(s, "fp16"), "axis": const(ax, "int32")}
    if rng.random() < 0.5:
        a["num_splits"] = const(rng.choice([1, d, 2]), "int32")
    else:
        cut = rng.randint(0, d)
        a["split_sizes"] = const([cut, d - cut] if rng.random() < 0.9 else [d, 1], "int32")
    return a


def g_slice_by_size():
    s = shape()
    b = [rng.randint(0, d - 1) for d in s]
    sz = [rng.choice([-1, rng.randint(1, d - bb)]) for d, bb in zip(s, b)]
    if rng.random() < 0.1:
        sz[0] = s[0] + 1
    return {"x": In(s, "fp16"), "begin": const(b, "int32"), "size": const(sz, "int32")}


def g_sdpa():
    b = shape(rmin=1, rmax=2)
    L, S, E, Ev = (rng.randint(1, 4) for _ in range(4))
    a = {"query": In(b + [L, E], "fp16"), "key": In(b + [S, E if rng.random() < 0.9 else E + 1], "fp16"),
         "value": In(b + [S, Ev], "fp16")}
    if rng.random() < 0.4:
        a["attn_mask"] = In([L, S], rng.choice(["bool", "fp16"]))
    return a


def g_norm(kind):
    def g():
        r = rng.randint(2, 5)
        s = [rng.randint(1, 3) for _ in range(r)]
        dt = rng.choice(["fp16", "fp32"])
        a = {"x": In(s, dt)}
        c = s[1] if rng.random() < 0.9 else s[1] + 1
        pdt = dt if rng.random() < 0.8 else "fp32"
        if kind == "batch_norm":
            a["mean"], a["variance"] = rand_const((c,), pdt), np.abs(rand_const((c,), pdt))
        if kind in ("batch_norm", "instance_norm") and rng.random() < 0.5:
            a["gamma"] = rand_const((c,), pdt)
        if kind == "local_response_norm":
            a["size"] = const(rng.randint(1, 3), "int32")
        return a
    return g


def g_axis_op(op):
    def g():
        s = shape()
        a = {"x": In(s, rng.choice(["fp16", "fp32", "int32"]))}
        if op == "reverse":
            if rng.random() < 0.8:
                a["axes"] = const(pick_axes(len(s)), "int32")
        else:
            a["axis"] = const(pick_axes(len(s), 1)[-1], "int32")
        return a
    return g


def g_flatten2d():
    s = shape()
    return {"x": In(s, rng.choice(["fp16", "int32"])), "axis": const(rng.randint(-len(s), len(s)), "int32")}


def g_fill():
    a = {"shape": const(shape(rmin=1, rmax=3), "int32")}
    if rng.random() < 0.7:
        a["value"] = const(1, rng.choice(["fp16", "fp32", "int32", "bool"]))
    return a


def g_random(op):
    def g():
        a = {"shape": const(shape(rmin=1, rmax=3), "int32")}
        if rng.random() < 0.5:
            a["mean" if op == "random_normal" else "low"] = const(0, rng.choice(["fp16", "fp32"]))
        return a
    return g


def g_gather_along_axis():
    s = shape()
    ax = rng.randint(-len(s), len(s) - 1)
    t = list(s)
    t[ax] = rng.randint(1, 3)
    if rng.random() < 0.1:
        t = t + [1]
    return {"x": In(s, rng.choice(["fp16", "int32"])), "indices": const(np.zeros(t, np.int32), "int32"), "axis": const(ax, "int32")}


def g_scatter_along_axis():
    s = shape()
    ax = rng.randint(-len(s), len(s) - 1)
    t = list(s)
    t[ax] = rng.randint(1, 3)
    return {"data": In(s, "fp32"), "indices": const(np.zeros(t, np.int32), "int32"), "updates": In(t, "fp32"),
            "axis": const(ax, "int32"), "mode": const(rng.choice(["update", "add", "max", "bogus"]), "string")}


def g_space_depth(down):
    def g():
        b = rng.randint(1, 3)
        if down:
            s = [1, rng.randint(1, 3), b * rng.randint(1, 3), b * rng.randint(1, 3) + (1 if rng.random() < 0.15 else 0)]
        else:
            s = [1, b * b * rng.randint(1, 2) + (1 if rng.random() < 0.15 else 0), rng.randint(1, 3), rng.randint(1, 3)]
        return {"x": In(s, "fp16"), "block_size": const(b, "int32")}
    return g


def g_upsample():
    return {"x": In(shape(rmin=3, rmax=4), "fp32"), "scale_factor_height": const(rng.choice([1, 2, 3]), "int32"),
            "scale_factor_width": const(rng.choice([1, 2]), "int32")}


def g_quantize():
    s = shape()
    return {"input": In(s, "fp32"), "scale": const(0.5, "fp32"), "output_dtype": const(rng.choice(["int8", "uint8", "int32"]), "string")}


def g_dequantize():
    s = shape()
    return {"input": rand_const(s, "int32").astype(np.int8), "scale": const(0.5, rng.choice(["fp16", "fp32"]))}


def g_affine():
    s = shape(rmin=2)
    ax = rng.randint(0, len(s) - 1)
    return {"quantized_data": rand_const(s, "int32").astype(np.uint8), "zero_point": np.uint8(1),
            "scale": const(0.5, rng.choice(["fp16", "fp32"])), "axis": const(ax, "int32")}


def g_conv_transpose():
    ns = rng.randint(1, 2)
    g = rng.choice([1, 1, 2])
    cin, coutg = g * rng.randint(1, 2), rng.randint(1, 2)
    sp = [rng.randint(1, 5) for _ in range(ns)]
    a = {"x": In([1, cin] + sp, "fp32"), "weight": rand_const([cin, coutg] + [rng.randint(1, 3) for _ in range(ns)], "fp32"),
         "pad_type": const(rng.choice(["valid", "same", "custom"]), "string")}
    if g > 1:
        a["groups"] = const(g, "int32")
    if rng.random() < 0.6:
        a["strides"] = const([rng.randint(1, 3) for _ in range(ns)], "int32")
    if rng.random() < 0.4:
        a["dilations"] = const([rng.randint(1, 2) for _ in range(ns)], "int32")
    if a["pad_type"] == "custom":
        a["pad"] = const([rng.randint(0, 1) for _ in range(2 * ns)], "int32")
    if rng.random() < 0.3:
        a["bias"] = rand_const((coutg * g if rng.random() < 0.9 else coutg * g + 1,), "fp32")
    return a


FAMILIES = {
    "conv_transpose": g_conv_transpose,
    "batch_norm": g_norm("batch_norm"), "instance_norm": g_norm("instance_norm"),
    "local_response_norm": g_norm("local_response_norm"),
    "cumsum": g_axis_op("cumsum"), "argsort": g_axis_op("argsort"), "reverse": g_axis_op("reverse"),
    "flatten2d": g_flatten2d, "fill": g_fill, "random_normal": g_random("random_normal"),
    "random_uniform": g_random("random_uniform"), "gather_along_axis": g_gather_along_axis,
    "scatter_along_axis": g_scatter_along_axis, "space_to_depth": g_space_depth(True),
    "depth_to_space": g_space_depth(False), "upsample_nearest_neighbor": g_upsample,
    "quantize": g_quantize, "dequantize": g_dequantize, "constexpr_affine_dequantize": g_affine,
    "identity": g_unary(["fp16", "fp32", "int32", "bool"], []),
    "reshape": g_reshape, "tile": g_tile, "cast": g_cast, "select": g_select, "band_part": g_band_part,
    "gelu": g_gelu, "rsqrt": g_rsqrt, "layer_norm": g_layer_norm, "linear": g_linear, "conv": g_conv,
    "split": g_split, "slice_by_size": g_slice_by_size, "scaled_dot_product_attention": g_sdpa,
    "relu": g_unary(["fp16", "fp32"], ["int32", "bool"]),
    "relu6": g_unary(["fp16", "fp32"], ["int32"]),
    "sigmoid": g_unary(["fp16", "fp32"], ["int32"]),
    "tanh": g_unary(["fp16", "fp32"], ["int32"]),
    "exp": g_unary(["fp16", "fp32"], ["int32"]),
    "sqrt": g_unary(["fp16", "fp32"], ["int32"]),
    "erf": g_unary(["fp16", "fp32"], ["int32"]),
    "floor": g_unary(["fp16", "fp32"], ["int32"]),
    "ceil": g_unary(["fp16", "fp32"], ["int32"]),
    "round": g_unary(["fp16", "fp32"], ["int32"]),
    "sin": g_unary(["fp16", "fp32"], ["int32"]),
    "cos": g_unary(["fp16", "fp32"], ["int32"]),
    "tan": g_unary(["fp16", "fp32"], ["int32"]),
    "asin": g_unary(["fp16", "fp32"], ["int32"]),
    "acos": g_unary(["fp16", "fp32"], ["int32"]),
    "atan": g_unary(["fp16", "fp32"], ["int32"]),
    "atanh": g_unary(["fp16", "fp32"], ["int32"]),
    "sinh": g_unary(["fp16", "fp32"], ["int32"]),
    "cosh": g_unary(["fp16", "fp32"], ["int32"]),
    "exp2": g_unary(["fp16", "fp32"], ["int32"]),
    "softplus": g_unary(["fp16", "fp32"], ["int32"]),
    "softsign": g_unary(["fp16", "fp32"], ["int32"]),
    "silu": g_unary(["fp16", "fp32"], ["int32"]),
    "abs": g_unary(["fp16", "fp32", "int32"], ["bool"]),
    "sign": g_unary(["fp16", "fp32", "int32"], ["bool"]),
    "square": g_unary(["fp16", "fp32", "int32"], ["bool"]),
    "logical_not": g_unary(["bool"], ["fp16", "int32"]),
    "elu": g_act(1), "leaky_relu": g_act(1), "thresholded_relu": g_act(1),
    "clamped_relu": g_act(2), "linear_activation": g_act(2), "scaled_tanh": g_act(2), "sigmoid_hard": g_act(2),
    "prelu": g_prelu(1), "softplus_parametric": g_prelu(2),
    "add": g_binary(["fp16", "fp32", "int32"]), "sub": g_binary(["fp16", "fp32", "int32"]),
    "mul": g_binary(["fp16", "fp32", "int32"]), "real_div": g_binary(["fp16", "fp32"]),
    "maximum": g_binary(["fp16", "fp32", "int32"]), "minimum": g_binary(["fp16", "fp32", "int32"]),
    "floor_div": g_binary(["fp16", "fp32", "int32"]), "mod": g_binary(["fp16", "fp32", "int32"]),
    "pow": g_binary(["fp16", "fp32"]),
    "equal": g_binary(["fp16", "fp32", "int32"]), "not_equal": g_binary(["fp16", "fp32", "int32"]),
    "greater": g_binary(["fp16", "fp32", "int32"]), "greater_equal": g_binary(["fp16", "fp32", "int32"]),
    "less": g_binary(["fp16", "fp32", "int32"]), "less_equal": g_binary(["fp16", "fp32", "int32"]),
    "logical_and": g_binary(["bool"]), "logical_or": g_binary(["bool"]), "logical_xor": g_binary(["bool"]),
    "reduce_sum": g_reduce(["fp16", "fp32", "int32"]), "reduce_mean": g_reduce(["fp16", "fp32", "int32"]),
    "reduce_max": g_reduce(["fp16", "fp32", "int32"]), "reduce_min": g_reduce(["fp16", "fp32", "int32"]),
    "reduce_prod": g_reduce(["fp16", "fp32", "int32"]), "reduce_l1_norm": g_reduce(["fp16", "fp32", "int32"]),
    "reduce_l2_norm": g_reduce(["fp16", "fp32", "int32"]), "reduce_log_sum": g_reduce(["fp16", "fp32", "int32"]),
    "reduce_log_sum_exp": g_reduce(["fp16", "fp32", "int32"]), "reduce_sum_square": g_reduce(["fp16", "fp32", "int32"]),
    "reduce_argmax": g_reduce_arg, "reduce_argmin": g_reduce_arg,
    "max_pool": g_pool, "avg_pool": g_pool, "l2_pool": g_pool,
    "softmax": g_softmax, "transpose": g_transpose,
    "concat": g_concat_stack(False), "stack": g_concat_stack(True),
    "expand_dims": g_expand_squeeze(True), "squeeze": g_expand_squeeze(False),
    "shape": g_shape, "gather": g_gather, "matmul": g_matmul,
}


def g_slice_update():
    s = shape()
    b = [rng.randint(0, d - 1) for d in s]
    e = [rng.randint(bb + 1, d) for bb, d in zip(b, s)]
    st = [rng.choice([1, 1, 2]) for _ in s]
    a = {"x": In(s, rng.choice(["fp16", "fp32", "int32"])), "begin": const(b, "int32"), "end": const(e, "int32")}
    if rng.random() < 0.5:
        a["stride"] = const(st, "int32")
    else:
        st = [1] * len(s)
    u = list(np.empty(s)[tuple(slice(bb, ee, ss) for bb, ee, ss in zip(b, e, st))].shape)
    if rng.random() < 0.15:
        u[0] += 1
    a["update"] = In(u, a["x"].dt)
    return a


def g_pad():
    s = shape()
    k = rng.randint(1, len(s))
    p = [rng.randint(0, 2) for _ in range(2 * k)]
    if rng.random() < 0.1:
        p = p + [1]
    return {"x": In(s, rng.choice(["fp16", "fp32", "fp32", "int32"])), "pad": const(p, "int32"),
            "mode": const(rng.choice(["constant", "constant", "reflect", "replicate", "wrap"]), "string")}


def g_topk():
    s = shape()
    ax = pick_axes(len(s), 1)[-1]
    d = s[ax] if -len(s) <= ax < len(s) else 1
    a = {"x": In(s, rng.choice(["fp16", "fp32", "int32"])), "k": const(rng.randint(1, d + (1 if rng.random() < 0.15 else 0)), "int32"),
         "axis": const(ax, "int32")}
    if rng.random() < 0.3:
        a["return_indices"] = const(rng.random() < 0.6, "bool")
    if rng.random() < 0.3 and a.get("return_indices", True):
        a["output_indices_dtype"] = const(rng.choice(["int32", "uint16", "int8"]), "string")
    return a


def g_gather_nd():
    s = shape(rmin=1, rmax=4)
    depth = rng.randint(1, len(s) + (1 if rng.random() < 0.15 else 0))
    ishape = shape(rmin=1, rmax=2) + [depth]
    a = {"x": In(s, rng.choice(["fp16", "fp32", "int32"])), "indices": const(np.zeros(ishape, np.int32), "int32")}
    return a


def g_one_hot():
    s = shape(rmax=3)
    a = {"indices": In(s, "int32"), "one_hot_vector_size": const(rng.randint(1, 5), "int32")}
    if rng.random() < 0.7:
        a["axis"] = const(rng.randint(-len(s) - 1 - (1 if rng.random() < 0.1 else 0), len(s)), "int32")
    if rng.random() < 0.5:
        dt = rng.choice(["fp16", "fp32", "int32"])
        a["on_value"] = const(1, dt)
        a["off_value"] = const(0, dt if rng.random() < 0.85 else "fp32")
    return a


def g_einsum():
    dt = rng.choice(["fp16", "fp32"])
    b, c, h, w, r = (rng.randint(1, 4) for _ in range(5))
    w2 = w if rng.random() < 0.85 else w + 1
    if rng.random() < 0.5:
        x, y, eq = [b, c, w], [w2, c if rng.random() < 0.5 else 1, r], "abc,cbd->abd"
    else:
        x, y, eq = [b, c, h, w], [b if rng.random() < 0.5 else 1, w2, h, r], "nchw,nwhr->nchr"
    if rng.random() < 0.1:
        eq = "abc,cbd->adb"
    return {"values": [In(x, dt), In(y, dt)], "equation": const(eq, "string")}


def g_range_1d():
    dt = rng.choice(["int32", "fp32"])
    st = rng.choice([1, 2, 3])
    s = rng.randint(-3, 3)
    a = {"start": const(s, dt), "end": const(s + rng.randint(0, 9), dt), "step": const(st, dt)}
    if rng.random() < 0.1:
        a["step"] = const(st, "int32" if dt == "fp32" else "fp32")
    return a


def g_fill_like():
    a = {"ref_tensor": In(shape(), rng.choice(["fp16", "fp32", "int32", "bool"]))}
    if rng.random() < 0.7:
        a["value"] = const(1, rng.choice(["fp16", "fp32", "int32", "bool"]))
    return a


def g_pixel(up):
    def g():
        f = rng.randint(1, 3)
        if up:
            s = [1, f * f * rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 3)]
            return {"x": In(s if rng.random() < 0.9 else s[1:], "fp16"), "upscale_factor": const(f, "int32")}
        s = [1, rng.randint(1, 3), f * rng.randint(1, 3), f * rng.randint(1, 3)]
        return {"x": In(s if rng.random() < 0.9 else s[1:], "fp32"), "downscale_factor": np.uint32(f)}
    return g


def g_sliding_windows():
    s = shape(lo=2, hi=6)
    ax = rng.randint(-len(s), len(s) - 1)
    return {"x": In(s, rng.choice(["fp16", "fp32", "int32"])), "axis": const(ax, "int32"),
            "size": const(rng.randint(1, s[ax]), "int32"), "stride": const(rng.randint(1, 2), "int32")}


def g_reverse_sequence():
    s = shape(rmin=2)
    return {"x": In(s, rng.choice(["fp16", "fp32", "int32", "bool"])), "lengths": In([s[0]], "int32"),
            "seq_axis": const(rng.randint(1, len(s) - 1), "int32"), "batch_axis": const(0, "int32")}


def g_space_batch(down):
    def g():
        bs = [rng.randint(1, 2), rng.randint(1, 2)]
        p = [[rng.randint(0, 1) for _ in range(2)] for _ in range(2)]
        if down:
            sp = [bs[i] * rng.randint(1, 3) - sum(p[i]) for i in range(2)]
            sp = [max(v, 0) + (bs[i] if v <= 0 else 0) for i, v in enumerate(sp)]
            sp = [v if (v + sum(p[i])) % bs[i] == 0 else v + 1 for i, v in enumerate(sp)]
            return {"x": In([1, 2] + sp, "fp16"), "block_shape": const(bs, "int32"), "paddings": const(p, "int32")}
        n = bs[0] * bs[1] * rng.randint(1, 2) + (1 if rng.random() < 0.15 else 0)
        sp = [rng.randint(1, 3) for _ in range(2)]
        p = [[min(v, (sp[i] * bs[i] - 1) // 2) for v in p[i]] for i in range(2)]
        return {"x": In([n, 2] + sp, "fp16"), "block_shape": const(bs, "int32"), "crops": const(p, "int32")}
    return g


def g_crop():
    s = shape(lo=3, hi=6, rmin=3, rmax=4)
    return {"x": In(s, rng.choice(["fp16", "fp32"])),
            "crop_height": const([rng.randint(0, 1), rng.randint(0, 1)], "int32"),
            "crop_width": const([rng.randint(0, 1)] * rng.choice([2, 2, 2, 3]), "int32")}


def g_resize(op):
    def g():
        a = {"x": In(shape(rmin=2 if rng.random() < 0.1 else 3, rmax=4), "fp32"),
             "target_size_height": const(rng.randint(1, 6), "int32"), "target_size_width": const(rng.randint(1, 6), "int32")}
        if op == "resize_bilinear" and rng.random() < 0.5:
            a["sampling_mode"] = const(rng.choice(["DEFAULT", "ALIGN_CORNERS", "UNALIGN_CORNERS", "CUBIC"]), "string")
        return a
    return g


def g_upsample_bilinear():
    dt = rng.choice(["int32", "fp32"])
    sh = rng.choice([1, 2, 3]) if dt == "int32" else rng.choice([1.0, 1.5, 2.0])
    return {"x": In(shape(rmin=3, rmax=4), "fp32"), "scale_factor_height": const(sh, dt),
            "scale_factor_width": const(rng.choice([1, 2]), dt), "align_corners": const(rng.random() < 0.5, "bool")}


FAMILIES.update({
    "slice_update": g_slice_update, "pad": g_pad, "topk": g_topk, "gather_nd": g_gather_nd, "one_hot": g_one_hot,
    "einsum": g_einsum, "range_1d": g_range_1d, "fill_like": g_fill_like, "non_zero": g_unary(["fp16", "fp32", "int32", "bool"], []),
    "pixel_shuffle": g_pixel(True), "pixel_unshuffle": g_pixel(False), "sliding_windows": g_sliding_windows,
    "reverse_sequence": g_reverse_sequence, "space_to_batch": g_space_batch(True), "batch_to_space": g_space_batch(False),
    "crop": g_crop, "resize_nearest_neighbor": g_resize("resize_nearest_neighbor"),
    "resize_bilinear": g_resize("resize_bilinear"), "upsample_bilinear": g_upsample_bilinear,
})


def g_recurrent(op):
    def g():
        gates = {"rnn": 1, "gru": 3, "lstm": 4}[op]
        seq, b, i, h = (rng.randint(1, 4) for _ in range(4))
        dt = rng.choice(["fp32", "fp32", "fp16"])
        hw = h if rng.random() < 0.9 else h + 1
        a = {"x": In([seq, b, i], dt), "initial_h": In([b, h], dt),
             "weight_ih": rand_const((gates * h, i), dt), "weight_hh": rand_const((gates * hw, h) if op != "rnn" else (h, h), dt)}
        if op == "lstm":
            a["initial_c"] = In([b, h], dt)
        if rng.random() < 0.5:
            a["output_sequence"] = const(rng.random() < 0.5, "bool")
        if rng.random() < 0.3:
            a["direction"] = const(rng.choice(["forward", "reverse", "sideways"]), "string")
        return a
    return g


def g_random_categorical():
    return {"x": In(shape(), rng.choice(["fp16", "fp32"])), "size": const(rng.randint(1, 4), "int32"),
            "seed": const(rng.randint(0, 9), "int32")}


FAMILIES.update({"rnn": g_recurrent("rnn"), "gru": g_recurrent("gru"), "lstm": g_recurrent("lstm"),
                 "random_categorical": g_random_categorical})


# ---- image sampling, detection, compressed weights ----

def bad(p):
    return rng.random() < p


def g_resize_nd():
    s = shape(rmin=1, rmax=4)
    k = rng.randint(1, len(s)) if not bad(0.1) else len(s) + 1
    a = {"x": In(s, rng.choice(["fp16", "fp32", "int32"] + (["bool"] if bad(0.1) else [])))}
    if bad(0.2):
        k = min(k, len(s))
        a["shape"] = In([k], "int32")
    else:
        a["shape"] = const([rng.randint(0, 5) for _ in range(k)], "int32")
    a["resized_dims"] = np.uint32(rng.randint(0, k + (1 if bad(0.1) else 0)))
    if rng.random() < 0.4:
        a["interpolation_mode"] = const(rng.choice(["LINEAR", "NEAREST_NEIGHBOR"] + (["CUBIC"] if bad(0.2) else [])), "string")
    if rng.random() < 0.4:
        a["sampling_mode"] = const(rng.choice(["DEFAULT", "ALIGN_CORNERS", "OFFSET_CORNERS"] + (["BOGUS"] if bad(0.2) else [])), "string")
    return a


def g_affine():
    dt = rng.choice(["fp16", "fp32"])
    n = rng.randint(1, 2)
    return {"x": In([n, rng.randint(1, 3), rng.randint(2, 5), rng.randint(2, 5)][:3 if bad(0.1) else 4], dt),
            "transform_matrix": In([n, 6 if not bad(0.1) else 5], dt if not bad(0.1) else "fp32"),
            "output_height": const(rng.randint(1, 5), "int32"), "output_width": const(rng.randint(1, 5), "int32"),
            "sampling_mode": const(rng.choice(["bilinear", "BILINEAR"] + (["nearest"] if bad(0.2) else [])), "string"),
            "padding_mode": const("constant" if not bad(0.1) else "reflection", "string"),
            "padding_value": const(0.0 if not bad(0.1) else 1.0, dt),
            "coordinates_mode": const("normalized_minus_one_to_one" if not bad(0.1) else "unnormalized", "string"),
            "align_corners": const(rng.random() < 0.5, "bool")}


def g_resample():
    dt = rng.choice(["fp16", "fp32"])
    n = rng.randint(1, 2)
    cdt = rng.choice(["fp32", "fp32", "int32", "fp16", "int8", "uint16"])
    return {"x": In([n, rng.randint(1, 3), rng.randint(2, 5), rng.randint(2, 5)], dt),
            "coordinates": In([n if not bad(0.1) else n + 1, rng.randint(1, 4), rng.randint(1, 4), 2 if not bad(0.1) else 3][:4 if not bad(0.05) else 3], cdt),
            "sampling_mode": const(rng.choice(["bilinear", "nearest"]), "string"),
            "padding_mode": const(rng.choice(["constant", "border", "reflection", "symmetric"]), "string"),
            "padding_value": const(0.5, dt),
            "coordinates_mode": const(rng.choice(["unnormalized", "normalized_minus_one_to_one", "normalized_zero_to_one"]), "string"),
            "align_corners": const(rng.random() < 0.5, "bool")}


def g_crop_resize():
    dt = rng.choice(["fp16", "fp32"])
    b, n = rng.randint(1, 3), rng.randint(1, 3)
    a = {"x": In([b, rng.randint(1, 3), rng.randint(2, 6), rng.randint(2, 6)][:3 if bad(0.05) else 4], dt)}
    if OPSET in ("iOS15", "iOS16") and not bad(0.1):
        a["roi"] = In([n, 1, 4, 1, 1][:5 if not bad(0.1) else 4], dt)
    else:
        a["boxes"] = In([n, 4 if not bad(0.1) else 5], rng.choice([dt, dt, "uint16"]))
        if rng.random() < 0.6:
            if rng.random() < 0.5:
                a["box_indices"] = In([n], rng.choice(["int32", "uint16"]))
            else:
                a["box_indices"] = const([rng.randint(0, b - 1 + (1 if bad(0.15) else 0)) for _ in range(n)], "int32")
    if rng.random() < 0.7:
        a["target_height"] = const(rng.randint(1, 4), "int32")
        a["target_width"] = const(rng.randint(1, 4), "int32")
    if rng.random() < 0.3:
        a["normalized_coordinates"] = const(rng.random() < 0.5, "bool")
    if rng.random() < 0.3:
        a["spatial_scale"] = const(0.5, "fp32")
    if rng.random() < 0.4:
        a["box_coordinate_mode"] = const(rng.choice(["CORNERS_HEIGHT_FIRST", "CENTER_SIZE_WIDTH_FIRST"] + (["CORNERS"] if bad(0.2) else [])), "string")
    if rng.random() < 0.3:
        a["sampling_mode"] = const(rng.choice(["DEFAULT", "ALIGN_CORNERS"] + (["CUBIC"] if bad(0.2) else [])), "string")
    if rng.random() < 0.3:
        a["pad_value"] = const(0.0, dt)
    return a


def g_nms():
    dt = rng.choice(["fp16", "fp32"])
    b, n, k = rng.randint(1, 2), rng.randint(1, 6), rng.randint(1, 3)
    old = OPSET in ("iOS15", "iOS16")
    a = {"boxes": In([b, n, 4] if old else [b, 4, n], dt),
         "scores": In(([b, n, k] if old else [b, k, n])[:3 if not bad(0.1) else 2], dt),
         "iou_threshold": const(0.5, dt), "max_boxes": const(rng.randint(1, 5), "int32")}
    if old != bad(0.1):
        a["score_threshold"] = const(0.1, dt)
    if rng.random() < 0.4:
        a["per_class_suppression"] = const(rng.random() < 0.5, "bool")
    return a


def g_conv_quantized():
    a = g_conv()
    a["weight"] = (np.abs(a["weight"]) * 10).astype(np.uint8)
    a["x"] = In(a["x"].shape, rng.choice(["fp16", "fp32"]))
    a["quantization_type"] = const("linear", "string")
    a["quant_scale"] = const(0.1, a["x"].dt)
    a["quant_bias"] = const(0.0, a["x"].dt)
    return a


def sub_rand(shp, dt):
    bits = int(dt[4:]) if dt.startswith("uint") else 4
    lo, hi = (0, (1 << bits) - 1) if dt.startswith("uint") else (-8, 7)
    v = np.random.default_rng(rng.randint(0, 1 << 30)).integers(lo, hi + 1, shp)
    return Sub(v.astype(np.uint8 if dt.startswith("uint") else np.int8), dt)


def lut_case(ishape):
    nbits = rng.choice([1, 2, 4, 6, 8])
    blocks = [d if rng.random() < 0.3 else 1 for d in ishape]
    if bad(0.1):
        blocks[0] = ishape[0] + 1
    vec = rng.choice([1, 1, 2])
    pal = 1 << (nbits if not bad(0.1) else nbits + 1)
    lut = rand_const(blocks + [pal, vec], rng.choice(["fp16", "fp32"]))
    return nbits, lut, vec


def packed_case(s, bits):
    """The ios16/17 forms' packed bytes (uint8 [ceil(n·bits/8)], sometimes a byte off) and shape (uint32)."""
    m = (int(np.prod(s)) * bits + 7) // 8 + (rng.choice([-1, 1]) if bad(0.1) else 0)
    raw = np.random.default_rng(rng.randint(0, 1 << 30)).integers(0, 256, max(m, 1)).astype(np.uint8)
    return raw, const(s, "uint32")


def g_lut_to_dense():
    s = shape(rmin=1, rmax=3)
    if OPSET in ("iOS16", "iOS17"):  # lut [2^bits], indices packed in bytes, the dense shape given
        nbits = rng.choice([1, 2, 4, 6, 8] + ([3] if bad(0.1) else []))
        raw, shp = packed_case(s, nbits)
        return {"indices": raw, "lut": rand_const([1 << nbits], rng.choice(["fp16", "fp32"])), "shape": shp}
    nbits, lut, vec = lut_case(s)
    a = {"indices": sub_rand(s, "uint%d" % nbits) if nbits != 8 else rand_const(s, "int32").astype(np.uint8), "lut": lut}
    if vec > 1 or bad(0.2):
        a["vector_axis"] = const(rng.randint(-len(s), len(s) - 1 + (1 if bad(0.1) else 0)), "int32")
    return a


def sparse_mask(s):
    m = np.random.default_rng(rng.randint(0, 1 << 30)).random(s) < 0.5
    return m, int(m.sum()) + (1 if bad(0.1) else 0)


def g_lut_to_sparse():
    s = shape(rmin=1, rmax=3)
    nbits, lut, vec = lut_case(s)
    m, nz = sparse_mask(s)
    a = {"indices_mask": Sub(m.astype(np.uint8), "uint1"), "lut": lut,
         "indices_nonzero_data": sub_rand([nz], "uint%d" % nbits) if nbits != 8 else rand_const([nz], "int32").astype(np.uint8)}
    if vec > 1 or bad(0.2):
        a["vector_axis"] = const(rng.randint(-len(s), len(s) - 1), "int32")
    return a


def g_sparse_to_dense():
    s = shape(rmin=1, rmax=3)
    if OPSET in ("iOS16", "iOS17"):  # mask bits packed in bytes, the padding bits 0
        m, nz = sparse_mask(s)
        raw = np.packbits(m.ravel().astype(np.uint8), bitorder="little")
        if bad(0.1) and m.size % 8:
            raw[-1] |= 0x80  # a padding bit set
        return {"mask": raw, "nonzero_data": rand_const([nz], rng.choice(["fp16", "fp32"])), "shape": const(s, "uint32")}
    m, nz = sparse_mask(s)
    return {"mask": Sub(m.astype(np.uint8), "uint1"), "nonzero_data": rand_const([nz], rng.choice(["fp16", "fp32"]))}


def shift_scale_args(s, ddt):
    blocks = [d if rng.random() < 0.4 else 1 for d in s]
    if bad(0.1):
        blocks = blocks[1:] or [2]
    a = {"scale": rand_const(blocks, rng.choice(["fp16", "fp32"]))}
    if rng.random() < 0.5:
        odt = rng.choice([ddt, ddt, "fp16", "int8"])
        a["offset"] = sub_rand(blocks, odt) if odt in ("uint4", "int4") else (
            rand_const(blocks, "int32").astype(np.int8) if odt == "int8" else rand_const(blocks, odt))
    return a


def sub_or_byte(shp, dt):
    return sub_rand(shp, dt) if dt in ("uint4", "int4") else rand_const(shp, "int32").astype(NP[dt])


def g_shift_scale():
    s = shape(rmin=1, rmax=3)
    ddt = rng.choice(["int8", "uint8", "int4", "uint4"])
    a = {"data": sub_or_byte(s, ddt)}
    a.update(shift_scale_args(s, ddt))
    return a


def g_sparse_shift_scale():
    s = shape(rmin=1, rmax=3)
    ddt = rng.choice(["int8", "uint8", "int4", "uint4"])
    m, nz = sparse_mask(s)
    a = {"data_mask": Sub(m.astype(np.uint8), "uint1"), "nonzero_data": sub_or_byte([nz], ddt)}
    a.update(shift_scale_args(s, ddt))
    return a


def g_constexpr_cast():
    return {"source_val": rand_const(shape(), rng.choice(["fp16", "fp16", "fp32"])),
            "output_dtype": const(rng.choice(["fp32", "fp32", "int32"]), "string")}


def list_arg():
    dt = rng.choice(["fp16", "fp32", "int32", "bool"] + (["float"] if bad(0.05) else []))
    elem = shape(rmin=1, rmax=3)
    if bad(0.1):
        elem[0] = "w"
    return ListArg(dt, elem, init=rng.randint(0, 3) if rng.random() < 0.6 else None,
                   dynamic=rng.random() < 0.5 if rng.random() < 0.6 else None)


def list_value(ls, lead=()):
    s = [d if isinstance(d, int) else 2 for d in ls.elem]
    if bad(0.15):
        s[-1] += 1
    dt = ls.dt if ls.dt != "float" else "fp32"
    return In(list(lead) + s, dt if not bad(0.1) else rng.choice(["fp16", "fp32", "int32"]))


def g_list(op):
    def g():
        ls = list_arg()
        a = {"ls": ls}
        if op in ("list_write", "list_read"):
            a["index"] = const(rng.randint(0, 2), "int32")
        if op == "list_write":
            a["value"] = list_value(ls)
        if op in ("list_gather", "list_scatter"):
            n = rng.randint(1, 3)
            a["indices"] = const(list(range(n)), "int32")
            if op == "list_scatter":
                a["value"] = list_value(ls, [n if not bad(0.1) else n + 1])
        return a
    return g


def g_eps(op):
    def g():
        dt = rng.choice(["fp16", "fp32"])
        a = {"x": In(shape(rmin=3 if op == "l2_norm" and not bad(0.1) else 1), dt if not bad(0.1) else "int32")}
        if rng.random() < 0.6:
            a["epsilon"] = const(1e-3, rng.choice([dt, dt, "fp32", "fp16"]))
        return a
    return g


def g_clip_threshold(op):
    def g():
        dt = rng.choice(["fp16", "fp32"] + (["int32"] if op == "threshold" else []))
        a = {"x": In(shape(), dt), "alpha": const(-1, dt if not bad(0.1) else "fp32")}
        if op == "clip":
            a["beta"] = const(1, dt)
        return a
    return g


def g_slice_by_index():
    s = shape()
    b = [rng.randint(0, d - 1) for d in s]
    e = [rng.randint(bb + 1, d) for bb, d in zip(b, s)]
    a = {"x": In(s, rng.choice(["fp16", "fp32", "int32", "bool"])), "begin": const(b, "int32"),
         "end": const(e if not bad(0.1) else e + [1], "int32")}
    if rng.random() < 0.5:
        a["stride"] = const([rng.choice([1, 1, 2]) for _ in s], "int32")
    if rng.random() < 0.3:
        a["squeeze_mask"] = const([rng.random() < 0.3 and e[i] - b[i] == 1 for i in range(len(s))], "bool")
    if rng.random() < 0.3:
        a["begin_mask"] = const([rng.random() < 0.5 for _ in s], "bool")
    return a


def g_scatter(op):
    def g():
        s = shape()
        if op == "scatter":
            n = rng.randint(1, 3)
            u = [n] + s[1:]
            if bad(0.1):
                u = u + [1]
            return {"data": In(s, "fp32"), "indices": const(np.zeros([n], np.int32), "int32"), "updates": In(u, "fp32"),
                    "axis": const(0, "int32"), "mode": const(rng.choice(["update", "add", "mul", "max"]), "string")}
        k = rng.randint(1, len(s))
        n = rng.randint(1, 3)
        u = [n] + s[k:]
        if bad(0.1):
            u[0] += 1
        return {"data": In(s, "fp32"), "indices": const(np.zeros([n, k], np.int32), "int32"), "updates": In(u, "fp32"),
                "mode": const(rng.choice(["update", "add", "sub", "min"]), "string")}
    return g


def g_bernoulli():
    a = {"shape": const(shape(rmin=1, rmax=3), "int32")}
    if rng.random() < 0.6:
        a["prob"] = const(0.3, rng.choice(["fp16", "fp32"]))
    if rng.random() < 0.4:
        a["seed"] = const(rng.randint(0, 9), "int32")
    return a


FAMILIES.update({"inverse": g_eps("inverse"), "log": g_eps("log"), "l2_norm": g_eps("l2_norm"),
                 "clip": g_clip_threshold("clip"), "threshold": g_clip_threshold("threshold"),
                 "slice_by_index": g_slice_by_index, "scatter": g_scatter("scatter"), "scatter_nd": g_scatter("scatter_nd"),
                 "random_bernoulli": g_bernoulli})

FAMILIES.update({op: g_list(op) for op in ("make_list", "list_length", "list_write", "list_read", "list_gather", "list_scatter")})

def g_reshape_like():
    """x takes the shape made of each ref_tensors[i]'s dims begins[i]..ends[i]
    (to its rank where end_masks[i]); ill-typed: an element count that
    differs, a range outside a ref's rank, tuples of different lengths."""
    n = rng.randint(1, 3)
    refs, b, e, m, out = [], [], [], [], []
    for _ in range(n):
        s = shape(rmax=3)
        refs.append(In(s, rng.choice(["fp16", "fp32", "int32", "bool"])))
        lo = rng.randint(0, len(s) - 1)
        hi = rng.randint(lo + 1, len(s))
        mask = rng.random() < 0.3
        b.append(lo), e.append(hi if not mask else rng.randint(0, len(s))), m.append(mask)
        out += s[lo:len(s) if mask else hi]
    numel = int(np.prod(out))
    xs = [numel] if rng.random() < 0.5 else [1, numel]
    if bad(0.15):
        xs[-1] += 1
    if bad(0.1):
        b[0] = len(refs[0].shape) + 1
    if bad(0.1):
        e = e + [1]
    return {"x": In(xs, rng.choice(["fp16", "fp32", "int32", "bool"])), "ref_tensors": refs,
            "begins": Tup(b, "int32"), "ends": Tup(e, "int32"), "end_masks": Tup(m, "bool")}


def g_state(op):
    """read_state(input) and coreml_update_state(state, value): a state of a
    dtype Core ML allows (ill-typed: another dtype, a plain tensor where the
    state goes, a value of another shape or dtype)."""
    def g():
        s = shape(rmax=3)
        dt = rng.choice(["fp16", "fp16", "fp32"] + (["int32", "bool"] if bad(0.15) else []))
        st = In(s, dt) if bad(0.1) else StateIn(s, dt)
        if op == "read_state":
            return {"input": st}
        v = list(s)
        if bad(0.15):
            v[-1] += 1
        return {"state": st, "value": In(v, dt if not bad(0.1) else rng.choice(["fp16", "fp32", "int32"]))}
    return g


FAMILIES.update({
    "read_state": g_state("read_state"), "coreml_update_state": g_state("coreml_update_state"),
    "reshape_like": g_reshape_like,
    "resize": g_resize_nd, "affine": g_affine, "resample": g_resample, "crop_resize": g_crop_resize,
    "non_maximum_suppression": g_nms, "conv_quantized": g_conv_quantized,
    "constexpr_lut_to_dense": g_lut_to_dense, "constexpr_lut_to_sparse": g_lut_to_sparse,
    "constexpr_sparse_to_dense": g_sparse_to_dense, "constexpr_blockwise_shift_scale": g_shift_scale,
    "constexpr_sparse_blockwise_shift_scale": g_sparse_shift_scale, "constexpr_cast": g_constexpr_cast,
})


# ---- nested blocks: cond and while_loop ----
# A block's values are kept tiny: a name in scope returned as is, or one simple
# op on names in scope.  The milc text declares every value's type, so each
# expression carries the type it gives (worked out here; the inner ops are
# always well typed, so only the cond or while_loop itself can be ill typed).

class Ex:
    """A value made in a block (or just before the op, for cond's pred): the
    name x in scope as is (op None), or op(x, y) for add, mul, less (y a name
    or a NumPy scalar), cast(x, y = dtype), squeeze(x).  t = (dtype, shape)."""

    def __init__(self, op, x, t, y=None):
        self.op, self.x, self.t, self.y = op, x, t, y

    def oracle(self, env):
        x = env[self.x]
        if self.op is None:
            return x
        if self.op == "squeeze":
            return mb.squeeze(x=x)
        if self.op == "cast":
            return mb.cast(x=x, dtype=self.y)
        return getattr(mb, self.op)(x=x, y=env[self.y] if isinstance(self.y, str) else self.y)

    def milc(self, name, ind):
        """(lines, name of the value) in milc's text."""
        if self.op is None:
            return [], self.x
        args = ["x = %s" % self.x]
        if self.op == "cast":
            args.append("dtype = %s" % lit(self.y))
        elif self.op != "squeeze":
            args.append("y = %s" % (self.y if isinstance(self.y, str) else lit(self.y)))
        return ["%s%s %s = %s(%s)[name = string(\"%s\")];\n" % (ind, ty(self.t[0], self.t[1]), name, self.op,
                                                                 ", ".join(sorted(args)), name)], name


def block_lines(inputs, exs, tag, ind):
    """A nested block in milc's text: (inputs) { values } -> (outputs)."""
    lines, outs = [ind + "(%s) {\n" % ", ".join("%s %s" % (ty(*t), n) for n, t in inputs)], []
    for k, e in enumerate(exs):
        ls, n = e.milc("%s%d" % (tag, k), ind + "    ")
        lines += ls
        outs.append(n)
    return lines + [ind + "} -> (%s);\n" % ", ".join(outs)]


class CondCase:
    """cond(pred) { () {true} -> (...); () {false} -> (...); }: pred an Ex
    made before the op (or a NumPy bool: a literal), each branch a list of Ex
    over the function's inputs."""

    def __init__(self, pred, true, false):
        self.pred, self.true, self.false = pred, true, false

    def oracle(self, env):
        pred = self.pred if isinstance(self.pred, np.generic) else self.pred.oracle(env)
        return mb.cond(pred=pred, _true_fn=lambda: [e.oracle(env) for e in self.true],
                       _false_fn=lambda: [e.oracle(env) for e in self.false])

    def milc_lines(self, res):
        ind = "        "
        lines, p = ([], lit(self.pred)) if isinstance(self.pred, np.generic) else self.pred.milc("pc", ind)
        lines.append("%s%s = cond(pred = %s)[name = string(\"r\")] {\n" % (ind, res, p))
        lines += block_lines([], self.true, "t", ind + "    ") + block_lines([], self.false, "f", ind + "    ")
        return lines + [ind + "};\n"]


class LoopCase:
    """while_loop(loop_vars) { (b0, b1, ...) {cond} -> (c); (b0, b1, ...) {body} -> (...); }:
    the loop variables are function inputs by name, or NumPy values (consts:
    the counter, a tensor); both blocks see the function's inputs and take the
    loop variables as b0, b1, ... (types in btypes)."""

    def __init__(self, loop_vars, btypes, cond, body):
        self.loop_vars, self.btypes, self.cond, self.body = loop_vars, btypes, cond, body

    def oracle(self, env):
        def scope(bs):
            return dict(env, **{"b%d" % i: b for i, b in enumerate(bs)})
        lv = tuple(env[v] if isinstance(v, str) else v for v in self.loop_vars)
        return mb.while_loop(_cond=lambda *bs: self.cond.oracle(scope(bs)),
                             _body=lambda *bs: [e.oracle(scope(bs)) for e in self.body], loop_vars=lv)

    def milc_lines(self, res):
        ind = "        "
        lines, names = [], []
        for i, v in enumerate(self.loop_vars):
            if isinstance(v, str):
                names.append(v)
            else:
                names.append("lv%d" % i)
                lines.append("%s%s lv%d = const()[name = string(\"lv%d\"), val = %s];\n" % (ind, ty(*self.btypes[i]), i, i, lit(v)))
        lines.append("%s%s = while_loop(loop_vars = (%s))[name = string(\"r\")] {\n" % (ind, res, ", ".join(names)))
        bins = [("b%d" % i, t) for i, t in enumerate(self.btypes)]
        lines += block_lines(bins, [self.cond], "c", ind + "    ") + block_lines(bins, self.body, "n", ind + "    ")
        return lines + [ind + "};\n"]


def make_ex(env, t):
    """A random Ex over env (name -> (dtype, shape)) giving type t: a name of
    type t as is, one added to or multiplied by a value of its dtype that
    broadcasts into it, or a value of t's shape cast to t's dtype."""
    dt, s = t
    def fits(sh):
        try:
            return list(np.broadcast_shapes(tuple(s), tuple(sh))) == list(s)
        except ValueError:
            return False
    same = [n for n, u in env.items() if u == (dt, list(s))]
    partners = [n for n, u in env.items() if u[0] == dt and fits(u[1])]
    casts = [n for n, u in env.items() if u[0] != dt and list(u[1]) == list(s)]
    kinds = (["id"] if same else []) + (["arith"] if same and partners and dt != "bool" else []) + (["cast"] if casts else [])
    k = rng.choice(kinds)
    if k == "id":
        return Ex(None, rng.choice(same), t)
    if k == "arith":
        x, y = rng.choice(same), rng.choice(partners)
        return Ex(rng.choice(["add", "mul"]), x, t, y) if rng.random() < 0.5 else Ex(rng.choice(["add", "mul"]), y, t, x)
    return Ex("cast", rng.choice(casts), t, dt)


VDT = ["fp16", "fp32", "int32"]


def g_cond():
    """Branches giving x's type (and z's, for a second output); ill-typed: a
    pred not bool or not a scalar, a false branch of another dtype or shape,
    branches giving different numbers of outputs."""
    s = shape(rmax=3)
    dt, dt2 = rng.sample(VDT, 2)
    pdt = "bool" if not bad(0.1) else rng.choice(["fp16", "int32"])
    env = {"x": (dt, s), "y": (dt, [d if rng.random() < 0.5 else 1 for d in s][rng.randint(0, len(s) - 1):]),
           "z": (dt2, s), "w": (dt, s[:-1] + [s[-1] + 1]), "p": (pdt, [1])}
    a = {n: In(sh, d) for n, (d, sh) in env.items()}
    pred = Ex("squeeze", "p", (pdt, [])) if not bad(0.1) else Ex(None, "p", (pdt, [1]))
    if rng.random() < 0.15:
        pred = np.bool_(rng.random() < 0.5)
    ts = [(dt, s)] + ([(dt2, s)] if rng.random() < 0.3 else [])
    true = [make_ex(env, t) for t in ts]
    false = [make_ex(env, t) for t in ts]
    if bad(0.15):  # the false branch's last output of another dtype or shape
        dtn, sn = false[-1].t
        false[-1] = make_ex(env, (rng.choice([d for d in VDT if d != dtn]), sn) if rng.random() < 0.5 else (dtn, env["w"][1]))
    if bad(0.1):  # one output more or less in the false branch
        false = false[:-1] if len(false) > 1 else false + [make_ex(env, (dt, s))]
    a["nest"] = CondCase(pred, true, false)
    return a


def g_while_loop():
    """Loop variables: an int32 counter (a const 0) and one or two tensors
    (function inputs, or consts); the condition compares the counter (or
    squeezes a bool input), the body keeps each variable's type.  Ill-typed:
    a condition that is not a bool scalar, a body that changes a variable's
    dtype, rank or dims, a body giving one output more or less than there are
    loop variables."""
    counter = rng.random() < 0.7
    vs = [(rng.choice(VDT), shape(rmax=3)) for _ in range(rng.randint(1, 2))]
    env = {"p": ("bool", [1])}
    lv, bt = ([np.int32(0)], [("int32", [])]) if counter else ([], [])
    for i, (d, s) in enumerate(vs):
        const_var = rng.random() < 0.2
        if not const_var:
            env["v%d" % i] = (d, s)
        env["u%d" % i] = (d, [2] + s)  # a value that broadcasts v to a higher rank
        env["w%d" % i] = (d, [2 if n == 1 else n for n in s])  # to other dims of the same rank (when v has a 1)
        lv.append(rand_const(s, d) if const_var else "v%d" % i)
        bt.append((d, s))
    benv = dict(env, **{"b%d" % i: t for i, t in enumerate(bt)})
    a = {n: In(sh, d) for n, (d, sh) in env.items()}
    if counter:
        cond = Ex("less", "b0", ("bool", []), np.int32(rng.randint(1, 4)))
    else:
        cond = Ex("squeeze", "p", ("bool", []))
    if bad(0.15):  # the counter itself (int32) or a comparison of a tensor (bool, not a scalar)
        k = len(bt) - 1
        cond = Ex(None, "b0", bt[0]) if counter and rng.random() < 0.5 else Ex("less", "b%d" % k, ("bool", bt[k][1]), np.array(3, NP[bt[k][0]])[()])
    # A variable's next value reads no other const variable (the counter, a
    # const tensor): coremltools folds the values of a first pass through the
    # body, makes a variable whose value changed a run-time one, takes a
    # second pass, and refuses a valid loop when a value then changes again
    # ("Block output ... is not equal to block input ... after value changes").
    fixed = {"b%d" % i for i, v in enumerate(lv) if not isinstance(v, str)}
    body = [Ex("add", "b0", bt[0], np.int32(1)) if counter and i == 0 else
            make_ex({n: u for n, u in benv.items() if n not in fixed or n == "b%d" % i}, t) for i, t in enumerate(bt)]
    if bad(0.15):  # the last variable comes back as another dtype, or broadcast to a higher rank or other dims
        k = len(bt) - 1
        d, s = bt[k]
        j = k - 1 if counter else k  # the index of its u and w
        r = rng.random()
        if r < 0.4:
            nd = rng.choice([x for x in VDT if x != d])
            body[k] = Ex("cast", "b%d" % k, (nd, s), nd)
        elif r < 0.7 or 1 not in s:
            body[k] = Ex("add", "b%d" % k, (d, [2] + s), "u%d" % j)
        else:
            body[k] = Ex("add", "b%d" % k, env["w%d" % j], "w%d" % j)
    if bad(0.1):  # one output less, or one more
        body = body[:-1] if len(body) > 1 and rng.random() < 0.5 else body + [Ex(None, "b0", bt[0])]
    a["nest"] = LoopCase(lv, bt, cond, body)
    return a


NESTED = {"cond", "while_loop"}
FAMILIES.update({"cond": g_cond, "while_loop": g_while_loop})


# ---- coremltools side ----

def oracle_case(op, opset, a):
    """(accepted, [(dtype, shape), ...] or the error text)."""
    ins = [(k, v) for k, v in a.items() if isinstance(v, In)]
    tup = [(k, v) for k, v in a.items() if isinstance(v, list)]
    flat = ins + [("%s%d" % (k, i), v) for k, vs in tup for i, v in enumerate(vs)]
    specs = [(mb.StateTensorSpec if isinstance(v, StateIn) else mb.TensorSpec)(shape=v.shape, dtype=DT[v.dt])
             for _, v in flat]
    def body(*xs):
        kw = {}
        it = iter(xs)
        for k, v in flat[:len(ins)]:
            kw[k] = next(it)
        for k, vs in tup:
            kw[k] = [next(it) for _ in vs]
        for k, v in a.items():
            if not isinstance(v, (In, list)):
                kw[k] = v.oracle() if isinstance(v, (Sub, Tup)) else v
        if op == "make_list":
            r = mb.make_list(**kw.pop("ls").kwargs())
        elif op in NESTED:  # the blocks are Python functions over the inputs
            r = kw.pop("nest").oracle(kw)
        else:
            if isinstance(kw.get("ls"), ListArg):
                kw["ls"] = mb.make_list(**kw["ls"].kwargs())
            r = getattr(mb, op)(**kw)
        if op in LIST_RESULT:
            r = mb.list_gather(ls=r, indices=np.array([0], np.int32))
        return list(r) if isinstance(r, (tuple, list)) else r
    # mb.program reads the inputs from the function's parameter names.
    names = ", ".join("i%d" % i for i in range(len(flat)))
    scope = {"body": body}
    exec("def fn(%s):\n    return body(%s)\n" % (names, names), scope)
    try:
        prog = mb.program(input_specs=specs, opset_version=getattr(ct.target, opset))(scope["fn"])
    except Exception as e:  # coremltools refuses the call
        return False, str(e).split("\n")[0][:200]
    outs = []
    for v in prog.functions["main"].outputs:
        dims = [d if isinstance(d, (int, np.integer)) else -1 for d in v.shape]
        outs.append((types.builtin_to_string(v.dtype), dims))
    return True, outs


# ---- milc side ----

def lit(v, dt=None):
    if isinstance(v, str):
        return 'string("%s")' % v
    if isinstance(v, Sub):
        v, dt = v.v, v.dt
    v = np.asarray(v)
    dt = dt or {np.dtype(np.float16): "fp16", np.dtype(np.float32): "fp32", np.dtype(np.int32): "int32",
                np.dtype(np.bool_): "bool", np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8",
                np.dtype(np.uint32): "uint32", np.dtype(np.uint16): "uint16", np.dtype(np.int16): "int16"}[v.dtype]

    def el(x):
        if dt == "bool":
            return "true" if x else "false"
        return repr(float(x)) if dt.startswith("fp") else str(int(x))

    def nest(x):
        return "[" + ", ".join(nest(y) for y in x) + "]" if isinstance(x, np.ndarray) and x.ndim else el(x)
    if v.ndim == 0:
        return "%s(%s)" % (dt, el(v.item()))
    return "tensor<%s, [%s]>(%s)" % (dt, ", ".join(map(str, v.shape)), nest(v))


def ty(dt, dims):
    return "tensor<%s, [%s]>" % (dt, ", ".join("?" if d < 0 else str(d) for d in dims)) if dims else dt


def milc_func(name, opset, op, a, outs):
    ins = []
    argv = []
    pre = []
    for k, v in sorted(a.items()):
        if isinstance(v, ListArg):
            pre += v.milc_lines("ls")
            argv.append("ls = ls")
        elif isinstance(v, (CondCase, LoopCase)):
            pass  # written below, with its blocks
        elif isinstance(v, Tup):
            pre += v.milc_lines(k + "_")
            argv.append("%s = (%s)" % (k, ", ".join("%s_%d" % (k, i) for i in range(len(v.vals)))))
        elif isinstance(v, In):
            ins.append("%s %s" % (("state<%s>" if isinstance(v, StateIn) else "%s") % ty(v.dt, v.shape), k))
            argv.append("%s = %s" % (k, k))
        elif isinstance(v, list):
            names = []
            for i, t in enumerate(v):
                ins.append("%s %s%d" % (ty(t.dt, t.shape), k, i))
                names.append("%s%d" % (k, i))
            argv.append("%s = (%s)" % (k, ", ".join(names)))
        else:
            argv.append("%s = %s" % (k, lit(v)))
    res = ", ".join("%s r%d" % (ty(dt, dims), i) for i, (dt, dims) in enumerate(outs))
    if op == "make_list":
        body = "".join(pre)
    elif op in NESTED:
        body = "".join(a["nest"].milc_lines(res))
    elif op in LIST_RESULT:
        body = "".join(pre) + "        %s l0 = %s(%s)[name = string(\"l0\")];\n" % (a["ls"].milc_type(), op, ", ".join(argv))
    else:
        body = "".join(pre) + "        %s = %s(%s)[name = string(\"r\")];\n" % (res, op, ", ".join(argv))
    if op in LIST_RESULT:
        body += "        %s = list_gather(indices = tensor<int32, [1]>([0]), ls = %s)[name = string(\"r\")];\n" % (
            res, "ls" if op == "make_list" else "l0")
    return "    func %s<%s>(%s) {\n%s    } -> (%s);\n" % (name, opset.lower(), ", ".join(ins), body,
                                                         ", ".join("r%d" % i for i in range(len(outs))))


def milc_verdicts(funcs, workdir, tag):
    """As milc_file_verdicts, 10 functions a file: milc records at most 100
    errors a run, and a refused case can give several."""
    out = []
    for i in range(0, len(funcs), 10):
        out += milc_file_verdicts(funcs[i:i + 10], workdir, "%s_%d" % (tag, i // 10))
    return out


def milc_file_verdicts(funcs, workdir, tag):
    """funcs: [(first line, last line)] of each function in the file; returns
    per function None (accepted) or its first diagnostic about the op."""
    path = os.path.join(workdir, tag + ".mil")
    text = "program(1.3)\n{\n" + "".join(f for f, _ in funcs) + "}\n"
    open(path, "w").write(text)
    r = subprocess.run([MILC, "check", "--json", path], capture_output=True, text=True)
    diags = json.loads(r.stdout or "{}").get("diagnostics", [])
    # A file that does not parse is never checked: no function of it may
    # count as accepted (their missing diagnostics would read as acceptance).
    parsed = r.returncode == 0 or not PARSER or subprocess.run([PARSER, "--parse", path], capture_output=True).returncode == 0
    out, line = [], 3
    for f, _ in funcs:
        n = f.count("\n")
        ds = [d for d in diags if line <= d["line"] < line + n and d["level"] == "error"]
        real = [d["message"] for d in ds if "is declared" not in d["message"]]
        if not parsed and not ds:
            ds = real = ["the file does not parse (%s)" % (diags[0]["message"] if diags else "?")]
        out.append((bool(ds), real[0] if real else (ds[0]["message"] if ds else None)))
        line += n
    if r.returncode not in (0, 1):
        raise SystemExit("milc check exit %d on %s:\n%s" % (r.returncode, path, r.stderr))
    return out


def main():
    if ONLY:
        for op in list(FAMILIES):
            if op not in ONLY:
                del FAMILIES[op]
    known = []  # (op, what coremltools does, a substring of milc's diagnostic)
    for l in open(KNOWN):
        l = l.split("#")[0].strip()
        if l:
            op, kind, pattern = l.split(None, 2)
            known.append((op, kind, pattern))
    work = tempfile.mkdtemp(prefix="milc-agree-")
    table, bad, known_hits = {}, [], 0
    for op in sorted(FAMILIES):
        for opset in OPSETS:
            funcs, expect = [], []
            global OPSET
            OPSET = opset
            for i in range(PER_OP):
                a = FAMILIES[op]()
                ok, res = oracle_case(op, opset, a)
                decl = res if ok else [("fp16", [1])]
                funcs.append((milc_func("c%d" % i, opset, op, a, decl), a))
                expect.append((ok, res))
            verdicts = milc_verdicts(funcs, work, "%s_%s" % (op, opset))
            agree = 0
            for (f, _), (ok, res), (refused, msg) in zip(funcs, expect, verdicts):
                # Refused only for the declared type = milc inferred a type: it accepts the call.
                milc_ok = not refused or (not ok and msg is not None and "is declared" in msg)
                if ok == (not refused) and (ok or "is declared" not in (msg or "")):
                    agree += 1
                    continue
                kind = "accepts" if ok else "refuses"
                if any(k[0] == op and k[1] == kind and k[2] in (msg or "") for k in known):
                    agree += 1
                    known_hits += 1
                    continue
                bad.append("%s %s: coremltools %s (%s), milc %s (%s)\n%s" % (
                    op, opset, "accepts" if ok else "refuses", res, "accepts" if milc_ok else "refuses", msg, f))
            table[(op, opset)] = (PER_OP, agree, PER_OP - agree, sum(ok for ok, _ in expect))
    print("%-40s %s" % ("op", "  ".join("%-20s" % o for o in OPSETS)))
    print("%-40s %s" % ("", "  ".join("%-20s" % "agree/cases (valid)" for o in OPSETS)))
    tot = [0, 0, 0]
    valid = 0
    for op in sorted(FAMILIES):
        cells = []
        for opset in OPSETS:
            n, ag, dis, acc = table[(op, opset)]
            tot = [tot[0] + n, tot[1] + ag, tot[2] + dis]
            valid += acc
            cells.append("%2d/%2d (%2d) %-8s" % (ag, n, acc, "" if not dis else "!%d" % dis))
        print("%-40s %s" % (op, "  ".join(cells)))
    print("total: %d cases (%d of them valid for coremltools), %d agree (%d of them listed known differences), "
          "%d disagree (%d ops x %d opsets)" % (tot[0], valid, tot[1], known_hits, tot[2], len(FAMILIES), len(OPSETS)))
    for b in bad:
        print("DISAGREE " + b)
    if bad:
        print("the checked files are kept in %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if bad else 0)


main()
