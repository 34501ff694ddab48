#!/usr/bin/env python3
"""A package with a flexible input (a RangeDim, as coremltools writes for a
sequence length), made by coremltools, compiled by milc for sizes given with
--shape and run for sizes taken from the input's file, against numpy (#16).

usage: flexible.py MILC ORACLE_DIR WORK
Exit 0 on success; 77 (ctest's skip code) without the oracle unless CI=true,
when a missing oracle fails the test."""
import os
import subprocess
import sys

import numpy as np

from oracle_gate import oracle_gate

MILC, ORACLE, WORK = sys.argv[1:4]
SCRIPT = """
from coremltools.converters.mil.mil import get_new_symbol
s = get_new_symbol()
w = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
@mb.program(input_specs=[mb.TensorSpec(shape=(1, s, 4))], opset_version=ct.target.iOS17)
def prog(x):
    h = mb.linear(x=x, weight=w, name="h")
    a = mb.softmax(x=h, axis=1, name="a")
    return mb.reduce_sum(x=a, axes=[1], keep_dims=False, name="y")
"""


def sh(*args, ok=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if ok and r.returncode != 0:
        raise RuntimeError("%s exited %d: %s%s" % (" ".join(args), r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r


def want(x):
    h = x.astype(np.float64) @ np.linspace(-1, 1, 32).reshape(8, 4).T
    a = np.exp(h - h.max(axis=1, keepdims=True))
    return (a / a.sum(axis=1, keepdims=True)).sum(axis=1)


def main():
    gate = oracle_gate(ORACLE)
    if gate is not None:
        return gate
    os.makedirs(WORK, exist_ok=True)
    sfile, pkg = os.path.join(WORK, "flex.py"), os.path.join(WORK, "flex.mlpackage")
    open(sfile, "w").write(SCRIPT)
    sh("/usr/bin/python3", os.path.join(ORACLE, "oracle.py"), "make", sfile, pkg)
    r = sh(MILC, "compile", pkg, "-o", os.path.join(WORK, "none.milc"), ok=False)
    if r.returncode != 1 or "input 'x' has a flexible shape" not in r.stderr:
        raise RuntimeError("a flexible input compiled without a size: exit %d, %s" % (r.returncode, r.stderr))
    rng = np.random.default_rng(5)
    for n in (1, 5, 37):
        x = rng.standard_normal((1, n, 4)).astype(np.float32)
        xf, art = os.path.join(WORK, "x%d.npy" % n), os.path.join(WORK, "flex%d.milc" % n)
        np.save(xf, x)
        sh(MILC, "compile", pkg, "--shape", "x=1,%d,4" % n, "-o", art)
        for src, tag in ((art, "compiled"), (pkg, "run")):
            out = os.path.join(WORK, "out_%s_%d" % (tag, n))
            sh(MILC, "-q", "--cache-dir", os.path.join(WORK, "cache"), "run", src, "--input", "x=" + xf, "-o", out)
            got = np.load(os.path.join(out, "y.npy")).astype(np.float64)
            err = np.abs(got - want(x)).max() / np.abs(want(x)).max()
            if got.shape != (1, 8) or not err < 1e-5:
                raise RuntimeError("seq %d (%s): shape %s, max rel error %.3g" % (n, tag, got.shape, err))
        print("ok  seq %-3d a RangeDim input compiled with --shape and run from its file" % n)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print("FAIL: %s" % e)
        sys.exit(1)
