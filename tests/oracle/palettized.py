#!/usr/bin/env python3
"""Palettized and 8-bit integer weights made by coremltools, run by milc (issues 17, 16).

coremltools (the oracle, ../shared/oracles/coreml) writes packages whose
weights are constexpr_lut_to_dense ops: sub-byte indices (uint4, uint2) into
a look-up table, per tensor, per block of output channels, and with vector
entries (vector_axis).  milc reads each package, checks it, compiles and runs
it, and the outputs match numpy computed from the same indices and tables.

usage: palettized.py MILC ORACLE_DIR WORK
Exit 0 on success; 77 (ctest's skip code) without the oracle unless CI=true,
when a missing oracle fails the test."""
import os
import subprocess
import sys
import zlib

import numpy as np

from oracle_gate import oracle_gate

MILC, ORACLE, WORK = sys.argv[1:4]


def sh(*args):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s exited %d: %s%s" % (" ".join(args), r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r


def lut_dense(idx, lut, vector_axis=None):
    """The dense weight: indices [*d] pick entries of lut [*blocks, palette, vector];
    each block of lut serves d/blocks indices along every dim."""
    blocks = lut.shape[:idx.ndim]
    out_shape = list(idx.shape)
    vec = lut.shape[-1]
    if vec > 1:
        out_shape[vector_axis] *= vec
    w = np.zeros(out_shape, np.float32)
    for pos in np.ndindex(*idx.shape):
        b = tuple(p // (d // nb) for p, d, nb in zip(pos, idx.shape, blocks))
        entry = lut[b + (idx[pos],)].astype(np.float32)
        if vec == 1:
            w[pos] = entry[0]
        else:
            for j in range(vec):
                q = list(pos)
                q[vector_axis] = pos[vector_axis] * vec + j
                w[tuple(q)] = entry[j]
    return w


def run_against(name, pkg, x, want):
    """milc runs pkg on x; its y must match want (relative L2 <= 2e-3).
    Returns the relative L2."""
    xf = os.path.join(WORK, name + "_x.npy")
    np.save(xf, x)
    out = os.path.join(WORK, name + "_out")
    sh(MILC, "-q", "--cache-dir", os.path.join(WORK, "cache"), "run", pkg, "--input", "x=" + xf, "-o", out)
    got = np.load(os.path.join(out, "y.npy")).astype(np.float64)
    if got.shape != want.shape:
        raise RuntimeError("y has shape %s, numpy %s" % (got.shape, want.shape))
    err = np.linalg.norm(got - want) / max(1e-6, np.linalg.norm(want))
    if not err <= 2e-3:
        raise RuntimeError("y is off numpy by relative L2 %.3g (> 2e-3)" % err)
    return err


# name -> (nbits, indices shape, lut shape, vector_axis, the op using the weight, x shape)
CASES = {
    "linear_uint4": (4, (48, 32), (1, 1, 16, 1), None, "linear", (1, 8, 32)),
    "linear_uint4_grouped": (4, (64, 32), (4, 1, 16, 1), None, "linear", (2, 5, 32)),
    "matmul_uint2": (2, (32, 24), (1, 3, 4, 1), None, "matmul", (1, 6, 32)),
    "conv_uint4_per_channel": (4, (16, 16, 1, 1), (16, 1, 1, 1, 16, 1), None, "conv", (1, 16, 1, 16)),
    # Vector palettes (each index picks 2 values along vector_axis): milc
    # checks them; its CPU backend does not lower them yet, so this case is
    # read and checked only.
    "conv_uint4_vector": (4, (8, 16, 1, 1), (1, 1, 1, 1, 16, 2), 0, "conv", (1, 16, 1, 16)),
}
CHECK_ONLY = {"conv_uint4_vector"}


def case(name, nbits, ishape, lshape, vaxis, use, xshape):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    idx = rng.integers(0, 1 << nbits, ishape).astype(np.uint8)
    lut = (rng.standard_normal(lshape) * 0.2).astype(np.float16)
    x = rng.standard_normal(xshape).astype(np.float16)
    wfile = os.path.join(WORK, name + "_w.npz")
    np.savez(wfile, idx=idx, lut=lut)
    call = {"linear": "mb.linear(x=x, weight=w, name='y')",
            "matmul": "mb.matmul(x=x, y=w, name='y')",
            "conv": "mb.conv(x=x, weight=w, name='y')"}[use]
    script = """
import numpy as np
W = dict(np.load(%r))
idx = W["idx"].astype(types.np_uint%d_dtype)
@mb.program(input_specs=[mb.TensorSpec(shape=%r, dtype=types.fp16)], opset_version=ct.target.iOS18)
def prog(x):
    w = mb.constexpr_lut_to_dense(indices=idx, lut=W["lut"]%s, name="w")
    return %s
""" % (wfile, nbits, xshape, "" if vaxis is None else ", vector_axis=np.int32(%d)" % vaxis, call)
    sfile, pkg = os.path.join(WORK, name + ".py"), os.path.join(WORK, name + ".mlpackage")
    open(sfile, "w").write(script)
    sh("/usr/bin/python3", os.path.join(ORACLE, "oracle.py"), "make", sfile, pkg)
    text = sh(MILC, "fmt", pkg).stdout
    if "constexpr_lut_to_dense" not in text or "uint%d" % nbits not in text:
        raise RuntimeError("the package does not hold a uint%d constexpr_lut_to_dense:\n%s" % (nbits, text))
    sh(MILC, "check", pkg)
    if name in CHECK_ONLY:
        print("ok  %-22s uint%d vector palettes made by coremltools, checked by milc" % (name, nbits))
        return
    w = lut_dense(idx, lut, vaxis)
    x32 = x.astype(np.float32)
    if use == "linear":
        want = x32 @ w.T
    elif use == "matmul":
        want = x32 @ w
    else:
        want = np.einsum("oc,bchw->bohw", w[:, :, 0, 0], x32)
    err = run_against(name, pkg, x, want)
    print("ok  %-22s uint%d palettized %s made by coremltools, run by milc: relative L2 %.2g" % (name, nbits, use, err))


# 8- and 4-bit integer weights made by coremltools, which milc's linear reads
# as the integers they are (RT_OP_QGEMM): name -> (data dtype, weight [N, K],
# scale blocks [bn, bk] (None: constexpr_affine_dequantize per output
# channel), x shape)
Q_CASES = {
    "linear_int8_per_channel": ("int8", (48, 64), None, (1, 3, 64)),
    "linear_uint8_blockwise": ("uint8", (32, 64), (8, 4), (2, 5, 64)),
    "linear_int4_blockwise": ("int4", (32, 128), (32, 4), (1, 1, 128)),
    "linear_uint4_blockwise": ("uint4", (24, 64), (6, 2), (2, 3, 64)),
}
# numpy's carrier of each sub-byte dtype, and coremltools' name for it
SUB_BYTE = {"int4": ("int8", "types.np_int4_dtype"), "uint4": ("uint8", "types.np_uint4_dtype")}


def qcase(name, qdt, wshape, blocks, xshape):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    n, k = wshape
    lo, hi = {"int8": (-128, 128), "uint8": (0, 256), "int4": (-8, 8), "uint4": (0, 16)}[qdt]
    carrier, ct_dtype = SUB_BYTE.get(qdt, (qdt, None))
    q = rng.integers(lo, hi, wshape).astype(carrier)
    bshape = (n,) if blocks is None else blocks
    scale = (np.abs(rng.standard_normal(bshape)) * 0.01 + 0.002).astype(np.float16)
    zero = rng.integers(lo // 8, hi // 8, bshape).astype(carrier)
    x = rng.standard_normal(xshape).astype(np.float16)
    wfile = os.path.join(WORK, name + "_w.npz")
    np.savez(wfile, q=q, scale=scale, zero=zero)
    if blocks is None:
        op, call = "constexpr_affine_dequantize", (
            'mb.constexpr_affine_dequantize(quantized_data=W["q"], zero_point=W["zero"], scale=W["scale"], '
            'axis=np.int32(0), name="w")')
    else:
        # a sub-byte array is its carrier's with coremltools' dtype tag
        tag = ".astype(%s)" % ct_dtype if ct_dtype else ""
        op, call = "constexpr_blockwise_shift_scale", (
            'mb.constexpr_blockwise_shift_scale(data=W["q"]%s, scale=W["scale"], offset=W["zero"]%s, name="w")' % (
                tag, tag))
    script = """
import numpy as np
W = dict(np.load(%r))
@mb.program(input_specs=[mb.TensorSpec(shape=%r, dtype=types.fp16)], opset_version=ct.target.iOS18)
def prog(x):
    w = %s
    return mb.linear(x=x, weight=w, name="y")
""" % (wfile, xshape, call)
    sfile, pkg = os.path.join(WORK, name + ".py"), os.path.join(WORK, name + ".mlpackage")
    open(sfile, "w").write(script)
    sh("/usr/bin/python3", os.path.join(ORACLE, "oracle.py"), "make", sfile, pkg)
    text = sh(MILC, "fmt", pkg).stdout
    if op not in text or qdt not in text:
        raise RuntimeError("the package does not hold a %s %s:\n%s" % (qdt, op, text))
    rep = (1, 1) if blocks is None else (n // blocks[0], k // blocks[1])
    expand = (lambda a: a[:, None]) if blocks is None else (lambda a: np.repeat(np.repeat(a, rep[0], 0), rep[1], 1))
    w = (q.astype(np.float64) - expand(zero.astype(np.float64))) * expand(scale.astype(np.float64))
    err = run_against(name, pkg, x, x.astype(np.float64) @ w.T)
    # Written back by milc, the program is the one coremltools wrote: an iOS16
    # constexpr op's arguments go out as attributes again, as Core ML has them.
    back = os.path.join(WORK, name + "_back.mlpackage")
    sh(MILC, "-q", "convert", pkg, "-o", back)
    spec = [sh("/usr/bin/python3", os.path.join(ORACLE, "oracle.py"), "spec", p).stdout for p in (pkg, back)]
    prog = [t[t.index("mlProgram {"):] for t in spec]
    if prog[0] != prog[1]:
        raise RuntimeError("milc convert changed the program:\n%s\n---\n%s" % (prog[0][:3000], prog[1][:3000]))
    print("ok  %-22s %s %s made by coremltools, run by milc: relative L2 %.2g; written back as it was" % (
        name, qdt, op, err))


# Sparse weights made by coremltools (iOS18 constexpr_sparse_to_dense, a
# uint1 mask), which milc's linear reads as the mask and values they are
# (RT_OP_SPGEMM): name -> (weight [N, K], density, x shape)
S_CASES = {
    "linear_sparse_fp16": ((40, 72), 0.3, (1, 2, 72)),
}


def scase(name, wshape, density, xshape):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    mask = rng.random(wshape) < density
    vals = (rng.standard_normal(int(mask.sum())) * 0.1).astype(np.float16)
    x = rng.standard_normal(xshape).astype(np.float16)
    wfile = os.path.join(WORK, name + "_w.npz")
    np.savez(wfile, mask=mask.astype(np.uint8), vals=vals)
    script = """
import numpy as np
W = dict(np.load(%r))
@mb.program(input_specs=[mb.TensorSpec(shape=%r, dtype=types.fp16)], opset_version=ct.target.iOS18)
def prog(x):
    w = mb.constexpr_sparse_to_dense(nonzero_data=W["vals"], mask=W["mask"].astype(types.np_uint1_dtype), name="w")
    return mb.linear(x=x, weight=w, name="y")
""" % (wfile, xshape)
    sfile, pkg = os.path.join(WORK, name + ".py"), os.path.join(WORK, name + ".mlpackage")
    open(sfile, "w").write(script)
    sh("/usr/bin/python3", os.path.join(ORACLE, "oracle.py"), "make", sfile, pkg)
    text = sh(MILC, "fmt", pkg).stdout
    if "constexpr_sparse_to_dense" not in text:
        raise RuntimeError("the package does not hold a constexpr_sparse_to_dense:\n%s" % text)
    w = np.zeros(wshape)
    w[mask] = vals.astype(np.float64)
    err = run_against(name, pkg, x, x.astype(np.float64) @ w.T)
    print("ok  %-22s sparse (%.0f%% set) made by coremltools, run by milc: relative L2 %.2g" % (
        name, 100 * mask.mean(), err))


# Sparse weights whose nonzero values are themselves compressed (iOS18's
# constexpr_lut_to_sparse and constexpr_sparse_blockwise_shift_scale, each
# followed by constexpr_sparse_to_dense), made by coremltools.  The dense
# weight milc must reproduce is coremltools' own decompress of the program's
# constants, checked here against numpy first.
# name -> (weight [N, K], density, x shape)
S2_CASES = {
    "linear_sparse_lut_uint4": ((24, 40), 0.4, (1, 3, 40)),
    "linear_sparse_int8_per_channel": ((32, 48), 0.5, (2, 48)),
}


def s2case(name, wshape, density, xshape):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    mask = rng.random(wshape) < density
    nnz = int(mask.sum())
    x = rng.standard_normal(xshape).astype(np.float16)
    wfile, ref = os.path.join(WORK, name + "_w.npz"), os.path.join(WORK, name + "_ref.npy")
    w = np.zeros(wshape)
    if "lut" in name:
        idx = rng.integers(0, 16, nnz).astype(np.uint8)
        lut = (rng.standard_normal((1, 1, 16, 1)) * 0.1).astype(np.float16)
        np.savez(wfile, mask=mask.astype(np.uint8), idx=idx, lut=lut)
        w[mask] = lut[0, 0, idx, 0].astype(np.float64)
        make = """wm, wv = mb.constexpr_lut_to_sparse(indices_mask=W["mask"].astype(types.np_uint1_dtype),
        indices_nonzero_data=W["idx"].astype(types.np_uint4_dtype), lut=W["lut"])
    from coremltools.converters.mil.mil.ops.defs.iOS18.compression import constexpr_lut_to_sparse as op
    m, v = op.decompress(W["mask"], W["idx"], W["lut"], None)"""
    else:
        q = rng.integers(-128, 128, nnz).astype(np.int8)
        scale = (np.abs(rng.standard_normal((wshape[0], 1))) * 0.01 + 0.001).astype(np.float16)
        np.savez(wfile, mask=mask.astype(np.uint8), q=q, scale=scale)
        dq = np.zeros(wshape)
        dq[mask] = q
        w = np.where(mask, dq * scale.astype(np.float64), 0)
        make = """wm, wv = mb.constexpr_sparse_blockwise_shift_scale(data_mask=W["mask"].astype(types.np_uint1_dtype),
        nonzero_data=W["q"], scale=W["scale"])
    from coremltools.converters.mil.mil.ops.defs.iOS18.compression import constexpr_sparse_blockwise_shift_scale as op
    m, v = op.decompress(W["mask"], W["q"], W["scale"], None)"""
    script = """
import numpy as np
from coremltools.converters.mil.mil.ops.defs.iOS18.compression import constexpr_sparse_to_dense
W = dict(np.load(%r))
@mb.program(input_specs=[mb.TensorSpec(shape=%r, dtype=types.fp16)], opset_version=ct.target.iOS18)
def prog(x):
    %s
    np.save(%r, constexpr_sparse_to_dense.decompress(v, m).astype(np.float64))
    w = mb.constexpr_sparse_to_dense(nonzero_data=wv, mask=wm, name="w")
    return mb.linear(x=x, weight=w, name="y")
""" % (wfile, xshape, make, ref)
    sfile, pkg = os.path.join(WORK, name + ".py"), os.path.join(WORK, name + ".mlpackage")
    open(sfile, "w").write(script)
    sh("/usr/bin/python3", os.path.join(ORACLE, "oracle.py"), "make", sfile, pkg)
    text = sh(MILC, "fmt", pkg).stdout
    kind = "constexpr_lut_to_sparse" if "lut" in name else "constexpr_sparse_blockwise_shift_scale"
    if kind not in text:
        raise RuntimeError("the package does not hold a %s:\n%s" % (kind, text))
    apple = np.load(ref)
    if np.abs(apple - w).max() > 1e-3 * np.abs(w).max():
        raise RuntimeError("numpy's dense weight differs from coremltools' decompress")
    err = run_against(name, pkg, x, x.astype(np.float64) @ apple.T)
    print("ok  %-22s %s (%.0f%% set) made by coremltools, run by milc: relative L2 %.2g" % (
        name, kind, 100 * mask.mean(), err))


def main():
    gate = oracle_gate(ORACLE)
    if gate is not None:
        return gate
    os.makedirs(WORK, exist_ok=True)
    failures = []
    for name, c in CASES.items():
        try:
            case(name, *c)
        except RuntimeError as e:
            failures.append("%s: %s" % (name, e))
    for cases, fn in ((Q_CASES, qcase), (S_CASES, scase), (S2_CASES, s2case)):
        for name, c in cases.items():
            try:
                fn(name, *c)
            except RuntimeError as e:
                failures.append("%s: %s" % (name, e))
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
