#!/usr/bin/env python3
"""Round trips with Apple's coremltools (the oracle, ../shared/oracles/coreml):

1. every golden program (tests/gen/golden) and every generated chunk kind:
   milc emit -> milc convert to .mlpackage -> `oracle.py load` (coremltools
   rebuilds every op through its own op definitions and type inference) ->
   milc fmt of the package gives the same canonical text;
2. packages written BY coremltools (`oracle.py make`) for programs milc runs,
   spelled the way a PyTorch conversion spells them: milc checks them (and
   reports them against the ANE profile), compiles and runs them, and the
   outputs match numpy.

usage: oracle_roundtrip.py MILC SRC ORACLE_DIR WORK
Exit 0 on success; 77 (ctest's skip code) without the oracle unless CI=true,
when a missing oracle fails the test."""
import json
import os
import subprocess
import sys

import numpy as np

MILC, SRC, ORACLE, WORK = sys.argv[1:5]
failures = []


def sh(*args, ok=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if ok and r.returncode != 0:
        raise RuntimeError("%s exited %d: %s%s" % (" ".join(args), r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r


def oracle(*args, ok=True):
    return sh("/usr/bin/python3", os.path.join(ORACLE, "oracle.py"), *args, ok=ok)


def have_oracle():
    if not os.path.exists(os.path.join(ORACLE, "oracle.py")):
        return "no oracle.py in %s" % ORACLE
    r = oracle("ops", ok=False)
    return None if r.returncode == 0 else "the oracle does not run: %s" % (r.stderr.strip()[-500:])


# ---- 1. milc's programs through coremltools and back ----

GOLDEN = {  # golden file -> the emit options that make it (tests/gen/test_gen.c)
    "gpt2_prefill": ["--model", "tiny"],
    "gpt2_decode": ["--model", "tiny", "--phase", "decode", "--seq", "1"],
    "llama_prefill": ["--model", "tiny-llama"],
    "llama_decode": ["--model", "tiny-llama", "--phase", "decode", "--seq", "1"],
    "llama_prefill_linear": ["--model", "tiny-llama", "--proj", "linear", "--layers", "1"],
}
KINDS = {  # further generated chunk kinds, no golden file
    "gpt2_verify": ["--model", "tiny", "--phase", "decode", "--seq", "4"],
    "gpt2_prefill_mode0": ["--model", "tiny", "--mode", "0"],
}


def roundtrip(name, opts, golden):
    d = os.path.join(WORK, name)
    sh(MILC, "-q", "emit", *opts, "-o", d)
    text = open(os.path.join(d, "model.mil")).read()
    if golden is not None and text != open(golden).read():
        failures.append("%s: emit no longer gives the golden program" % name)
        return
    pkg = d + ".mlpackage"
    sh(MILC, "-q", "convert", d, "-o", pkg)
    r = oracle("load", pkg, ok=False)
    if r.returncode != 0:
        failures.append("%s: coremltools does not load milc's package: %s" % (name, (r.stdout + r.stderr)[-1500:]))
        return
    back = sh(MILC, "fmt", pkg).stdout
    if back != text:
        failures.append("%s: package read back differs from the program" % name)
    print("ok  %-22s milc -> package -> coremltools loads it -> milc reads the same text" % name)


# ---- 2. coremltools' packages run by milc ----

rng = np.random.RandomState(7)


def f16(*shape, scale=0.2):
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def attention_case():
    """Self-attention as torch.nn.MultiheadAttention-style code converts:
    linear q/k/v, reshape to heads, transpose, matmul, scale, softmax, matmul,
    transpose back, reshape, linear out."""
    T, D, H = 16, 32, 4
    hd = D // H
    w = {k: f16(D, D) for k in ("wq", "wk", "wv", "wo")}
    b = {k: f16(D, scale=0.05) for k in ("bq", "bk", "bv", "bo")}
    script = """
import numpy as np
W = dict(np.load(%r))
@mb.program(input_specs=[mb.TensorSpec(shape=(1, %d, %d), dtype=types.fp16)], opset_version=ct.target.iOS18)
def prog(x):
    def heads(t, n):
        t = mb.reshape(x=t, shape=[1, %d, %d, %d], name=n + "_r")
        return mb.transpose(x=t, perm=[0, 2, 1, 3], name=n + "_t")
    q = heads(mb.linear(x=x, weight=W["wq"], bias=W["bq"], name="q"), "q")
    k = heads(mb.linear(x=x, weight=W["wk"], bias=W["bk"], name="k"), "k")
    v = heads(mb.linear(x=x, weight=W["wv"], bias=W["bv"], name="v"), "v")
    s = mb.matmul(x=q, y=k, transpose_y=True, name="scores")
    s = mb.mul(x=s, y=np.float16(%r), name="scaled")
    p = mb.softmax(x=s, axis=-1, name="probs")
    o = mb.matmul(x=p, y=v, name="ctx")
    o = mb.transpose(x=o, perm=[0, 2, 1, 3], name="ctx_t")
    o = mb.reshape(x=o, shape=[1, %d, %d], name="ctx_r")
    return mb.linear(x=o, weight=W["wo"], bias=W["bo"], name="y")
"""
    wfile = os.path.join(WORK, "attn_w.npz")
    np.savez(wfile, **w, **b)
    scale = 1.0 / np.sqrt(hd)
    script = script % (wfile, T, D, T, H, hd, float(np.float16(scale)), T, D)

    def ref(x):
        x = x.astype(np.float32)
        lin = lambda t, wn, bn: t @ w[wn].astype(np.float32).T + b[bn].astype(np.float32)
        hs = lambda t: t.reshape(1, T, H, hd).transpose(0, 2, 1, 3)
        q, k, v = hs(lin(x, "wq", "bq")), hs(lin(x, "wk", "bk")), hs(lin(x, "wv", "bv"))
        s = q @ k.transpose(0, 1, 3, 2) * np.float32(np.float16(scale))
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        o = (p @ v).transpose(0, 2, 1, 3).reshape(1, T, D)
        return {"y": lin(o, "wo", "bo")}
    return script, {"x": f16(1, T, D, scale=1.0)}, ref


def mlp_case():
    """A transformer MLP block as converted: layer_norm, linear, gelu, linear, add."""
    T, D, F = 8, 32, 64
    g, bt = (1 + f16(D, scale=0.1)), f16(D, scale=0.1)
    w1, b1, w2, b2 = f16(F, D), f16(F, scale=0.05), f16(D, F), f16(D, scale=0.05)
    wfile = os.path.join(WORK, "mlp_w.npz")
    np.savez(wfile, g=g, bt=bt, w1=w1, b1=b1, w2=w2, b2=b2)
    script = """
import numpy as np
W = dict(np.load(%r))
@mb.program(input_specs=[mb.TensorSpec(shape=(1, %d, %d), dtype=types.fp16)], opset_version=ct.target.iOS18)
def prog(x):
    h = mb.layer_norm(x=x, axes=[-1], gamma=W["g"], beta=W["bt"], epsilon=np.float16(1e-5), name="ln")
    h = mb.linear(x=h, weight=W["w1"], bias=W["b1"], name="fc1")
    h = mb.gelu(x=h, mode="TANH_APPROXIMATION", name="act")
    h = mb.linear(x=h, weight=W["w2"], bias=W["b2"], name="fc2")
    return mb.add(x=x, y=h, name="y")
""" % (wfile, T, D)

    def ref(x):
        x32 = x.astype(np.float32)
        mu = x32.mean(-1, keepdims=True)
        var = ((x32 - mu) ** 2).mean(-1, keepdims=True)
        h = (x32 - mu) / np.sqrt(var + 1e-5) * g.astype(np.float32) + bt.astype(np.float32)
        h = h @ w1.astype(np.float32).T + b1.astype(np.float32)
        h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
        h = h @ w2.astype(np.float32).T + b2.astype(np.float32)
        return {"y": x32 + h}
    return script, {"x": f16(1, T, D, scale=1.0)}, ref


def conv_case():
    """A 1x1 convolution (the ANE's linear layer) with bias."""
    C, O, S = 32, 48, 16
    w, bias = f16(O, C, 1, 1), f16(O, scale=0.05)
    wfile = os.path.join(WORK, "conv_w.npz")
    np.savez(wfile, w=w, b=bias)
    script = """
import numpy as np
W = dict(np.load(%r))
@mb.program(input_specs=[mb.TensorSpec(shape=(1, %d, 1, %d), dtype=types.fp16)], opset_version=ct.target.iOS18)
def prog(x):
    return mb.conv(x=x, weight=W["w"], bias=W["b"], name="y")
""" % (wfile, C, S)

    def ref(x):
        y = np.einsum("oc,bcis->bois", w[:, :, 0, 0].astype(np.float32), x.astype(np.float32))
        return {"y": y + bias.astype(np.float32)[None, :, None, None]}
    return script, {"x": f16(1, C, 1, S, scale=1.0)}, ref


def made_by_coremltools(name, case):
    script, inputs, ref = case()
    sfile = os.path.join(WORK, name + ".py")
    open(sfile, "w").write(script)
    pkg = os.path.join(WORK, name + ".mlpackage")
    oracle("make", sfile, pkg)
    sh(MILC, "check", pkg)
    ane = json.loads(sh(MILC, "--json", "check", "--target", "ane", "--report", pkg, ok=False).stdout)
    if not ane.get("ops"):
        failures.append("%s: no per-op ANE report" % name)
    args = []
    for k, v in inputs.items():
        np.save(os.path.join(WORK, "%s_%s.npy" % (name, k)), v)
        args += ["--input", "%s=%s" % (k, os.path.join(WORK, "%s_%s.npy" % (name, k)))]
    out = os.path.join(WORK, name + "_out")
    sh(MILC, "-q", "--cache-dir", os.path.join(WORK, "cache"), "run", pkg, *args, "-o", out)
    want = ref(*inputs.values())
    for k, v in want.items():
        got = np.load(os.path.join(out, k + ".npy")).astype(np.float32)
        err = np.abs(got - v).max() / max(1e-3, np.abs(v).max())
        if got.shape != v.shape or not err < 1e-2:
            failures.append("%s: output %s off numpy by %.3g (relative to its max)" % (name, k, err))
            return
    print("ok  %-22s made by coremltools, run by milc, matches numpy" % name)


def main():
    why = have_oracle()
    if why:
        if os.environ.get("CI") == "true":
            print("FAIL: the coremltools oracle is required in CI: " + why)
            return 1
        print("SKIP: " + why + " (run ../shared/oracles/coreml/setup.sh and export its PYTHONPATH)")
        return 77
    os.makedirs(WORK, exist_ok=True)
    for name, opts in GOLDEN.items():
        roundtrip(name, opts, os.path.join(SRC, "tests/gen/golden", name + ".mil"))
    for name, opts in KINDS.items():
        roundtrip(name, opts, None)
    for name, case in (("attention", attention_case), ("mlp", mlp_case), ("conv1x1", conv_case)):
        try:
            made_by_coremltools(name, case)
        except RuntimeError as e:
            failures.append("%s: %s" % (name, e))
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
