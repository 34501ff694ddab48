#!/usr/bin/env python3
"""Chain a prefill and decode steps in one process through libmilc's Python
binding, the way an app drives KV-cached chunks: prefill n tokens, put the
returned K/V into the cache inputs, then decode one token at a time (a mask
per step and, for Llama, the RoPE tables of the new position).  The result is
checked against one prefill of all n + steps tokens, which must agree
(attention is causal): it passes exactly when the decode path and the cache
contract of mil-templates/README.md hold.

    examples/chain_decode.py [--lib libmilc.so] [--model tiny] [--prompt 12] [--steps 4] [--ctx 48]

Every program is built (or found) in a cache in a temporary directory,
removed at the end.  Exit 0 when decode matches prefill within --tol
(relative L2).  Needs numpy."""
import argparse, os, sys, tempfile
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import milc  # noqa: E402

ap = argparse.ArgumentParser(description="chain prefill and decode through libmilc")
ap.add_argument("--lib", help="libmilc.so (default: $MILC_LIBRARY, the build tree, the system's)")
ap.add_argument("--model", default="tiny", help="a preset or template")
ap.add_argument("--prompt", type=int, default=12, help="tokens in the prefill")
ap.add_argument("--steps", type=int, default=4, help="decode steps after it")
ap.add_argument("--ctx", type=int, default=48, help="KV-cache positions")
ap.add_argument("--mode", type=int, default=2, help="compile mode of every program")
ap.add_argument("--tol", type=float, default=1e-2)
a = ap.parse_args()
milc.load_library(a.lib)
base = {"min_seq": 1}  # the CPU needs no padding to 16
decode_opts = {"phase": "decode", "seq": 1, "ctx": a.ctx}


def program(cache, **params):
    """The one program of these parameters, built or found, loaded."""
    (p,) = cache.build(a.model, mode=a.mode, **base, **params)
    return cache.load(p.key)


with tempfile.TemporaryDirectory(prefix="milc-chain-") as work, milc.Cache(work) as cache:
    decode = program(cache, **decode_opts)
    shapes = {t.name: t.shape for t in decode.inputs}
    dim = shapes["x"][1]
    layers = sorted(int(k[len("k_cache_"):]) for k in shapes if k.startswith("k_cache_"))

    n, total = a.prompt, a.prompt + a.steps
    x = np.random.RandomState(0).randn(1, dim, 1, total).astype(np.float32) * 0.5
    ref = program(cache, seq=total).run({"x": x})
    pre = program(cache, seq=n).run({"x": x[..., :n]})
    caches = {}
    for L in layers:
        for kv in "kv":
            c = np.zeros(shapes[f"{kv}_cache_{L}"], np.float32)
            c[..., :n] = pre[f"{kv}_{L}"]
            caches[f"{kv}_cache_{L}"] = c
    theta = float(cache.param("rope_theta", a.model, **base, **decode_opts)) if "rope_cos" in shapes else None
    ys = []
    for p in range(n, total):
        mask = np.full(shapes["mask"], -1e4, np.float32)
        mask[0, :p, 0, 0] = 0       # cache slots 0..p-1
        mask[0, a.ctx, 0, 0] = 0    # the new token itself
        inputs = {"x": x[..., p:p + 1], "mask": mask, **caches}
        if theta is not None:       # Llama: the new token's rotation
            hd = shapes["rope_cos"][1]
            j = np.arange(hd)
            ang = p * theta ** (-2.0 * (j % (hd // 2)) / hd)
            inputs["rope_cos"] = np.cos(ang).reshape(1, hd, 1, 1)
            inputs["rope_sin"] = np.sin(ang).reshape(1, hd, 1, 1)
        out = decode.run(inputs)
        ys.append(out["y"].astype(np.float32))
        for L in layers:
            caches[f"k_cache_{L}"][..., p] = out[f"k_{L}"][..., 0]
            caches[f"v_cache_{L}"][..., p] = out[f"v_{L}"][..., 0]
    got = np.concatenate(ys, axis=3)
    want = ref["y"].astype(np.float32)[..., n:total]
err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
print(f"{a.model}: prefill {n} + decode {a.steps} vs prefill {total}: relative L2 error {err:.2e} (tolerance {a.tol:g})")
sys.exit(0 if err <= a.tol else 1)
