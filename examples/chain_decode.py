#!/usr/bin/env python3
"""Chain a prefill and decode steps in one process through libmilc's Python
binding, the way an app drives KV-cached chunks: prefill n tokens, put the
returned K/V into the cache inputs, then decode one token at a time (a mask
per step and, for Llama, the RoPE tables of the new position).  The result is
checked against one prefill of all n + steps tokens, which must agree
(attention is causal): it passes exactly when the decode path and the cache
contract of mil-templates/README.md hold.

    examples/chain_decode.py [--lib libmilc.so] [--model tiny] [--prompt 12] [--steps 4] [--ctx 48] [--io split|packed]
                             [--kv io|state]

--io split gives every tensor its own name (unpadded: the CPU layout);
--io packed (the templates' default, what the ANE takes) packs each program's
inputs into one tensor and its outputs into another, padded to a multiple of
16 tokens.  --kv state builds the decode chunk with its caches held as
states: the prefill's K/V are written into them once (Model.write_state),
then each step passes only the new token, its mask and its position, and the
chunk writes its keys and values into the states in place: nothing of the
cache crosses the API per token.  Every program is built (or found) in a cache in a temporary
directory, removed at the end.  Exit 0 when decode matches prefill within
--tol (relative L2).  Needs numpy."""
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
ap.add_argument("--io", default="split", choices=["split", "packed"], help="the chunks' I/O layout")
ap.add_argument("--kv", default="io", choices=["io", "state"], help="decode: the cache as inputs/outputs or as states")
ap.add_argument("--tol", type=float, default=1e-2)
a = ap.parse_args()
st = a.kv == "state"
if st and a.io == "packed":
    sys.exit("--kv state chunks use the split layout: leave out --io packed")
milc.load_library(a.lib)
packed = a.io == "packed"
# The CPU needs no padding to 16; packed chunks are run as the ANE takes them.
base = {"min_seq": 16 if packed else 1, "io": a.io}
decode_opts = {"phase": "decode", "seq": 1, "ctx": a.ctx}
S = 16  # a packed decode's tokens


def program(cache, **params):
    """The one program of these parameters, built or found, loaded."""
    (p,) = cache.build(a.model, mode=a.mode, **base, **params)
    return cache.load(p.key)


def pad(t, s):  # [1, C, 1, n] -> [1, C, 1, s], zeros after the real tokens
    return np.concatenate([t, np.zeros(t.shape[:3] + (s - t.shape[3],), t.dtype)], axis=3)


with tempfile.TemporaryDirectory(prefix="milc-chain-") as work, milc.Cache(work) as cache:
    def param(name):
        return float(cache.param(name, a.model, **base, **decode_opts))
    decode = program(cache, **decode_opts, **({"kv": "state"} if st else {}))
    shapes = {t.name: t.shape for t in decode.inputs}
    dim, heads = int(param("dim")), int(param("heads"))
    hd = dim // heads
    try:
        theta = param("rope_theta")
    except milc.MilcError:
        theta = None
    kvd = (int(param("kv_heads")) if theta is not None else heads) * hd
    if packed:  # README.md, "Packed I/O"
        first, count = int(param("first_layer")), int(param("layers"))
        layers = list(range(first, first + count))
        slots = -(-(a.ctx + S) // 32) * 32 - S
        shapes.update({f"{kv}_cache_{L}": (1, kvd, 1, slots) for L in layers for kv in "kv"})
        shapes["mask"] = (1, slots + S, 1, S)
    else:
        names = [t.name for t in decode.states] if st else list(shapes)
        shapes.update({t.name: t.shape for t in decode.states})
        layers = sorted(int(k[len("k_cache_"):]) for k in names if k.startswith("k_cache_"))
        slots = a.ctx

    def unpack(y, s):  # the packed output's rows: hidden states, then k, v of each layer
        out = {"y": y[:, :dim, :, :s]}
        for i, L in enumerate(layers):
            r = dim + 2 * i * kvd
            out[f"k_{L}"], out[f"v_{L}"] = y[:, r:r + kvd, :, :s], y[:, r + kvd:r + 2 * kvd, :, :s]
        return out

    def pack(inputs):  # decode fields as column blocks of [1, kvd, 1, W]
        g = dim // kvd
        blocks = [pad(inputs["x"], S)[0, :, 0, :].reshape(g, kvd, S).transpose(1, 0, 2).reshape(kvd, g * S)]
        for t in ("rope_cos", "rope_sin") if theta is not None else ():
            b = np.zeros((kvd, S), np.float32)
            b[:hd] = pad(inputs[t], S)[0, :, 0, :]
            blocks.append(b)
        b = np.zeros((kvd, slots + S), np.float32)
        b[:S] = inputs["mask"][0, :, 0, :].T  # row i: query i's mask over the keys
        blocks.append(b)
        for L in layers:
            blocks += [inputs[f"k_cache_{L}"][0, :, 0, :], inputs[f"v_cache_{L}"][0, :, 0, :]]
        return {"x": np.concatenate(blocks, axis=1)[None, :, None, :]}

    def prefill(x):
        s = x.shape[3]
        if not packed:
            return program(cache, seq=s).run({"x": x})
        out = program(cache, seq=s).run({"x": pad(x, -(-s // 16) * 16)})  # the caller pads
        return unpack(out["y"].astype(np.float32), s)

    n, total = a.prompt, a.prompt + a.steps
    x = np.random.RandomState(0).randn(1, dim, 1, total).astype(np.float32) * 0.5
    ref = prefill(x)
    pre = prefill(x[..., :n])
    caches = {}
    for L in layers:
        for kv in "kv":
            c = np.zeros(shapes[f"{kv}_cache_{L}"], np.float32)
            c[..., :n] = pre[f"{kv}_{L}"]
            caches[f"{kv}_cache_{L}"] = c
            if st:  # once: the model keeps the cache from here on
                decode.write_state(f"{kv}_cache_{L}", c)
    ys = []
    for p in range(n, total):
        mask = np.full(shapes["mask"], -1e4, np.float32)
        if st:  # the new token is written to slot p before the attention reads the cache
            mask[0, :p + 1, 0, 0] = 0
            inputs = {"x": x[..., p:p + 1], "mask": mask, "pos": np.array([p], np.int32)}
        else:
            mask[0, :p, 0, 0] = 0       # cache slots 0..p-1
            mask[0, slots, 0, 0] = 0    # the new token itself
            inputs = {"x": x[..., p:p + 1], "mask": mask, **caches}
        if theta is not None:       # Llama: the new token's rotation
            j = np.arange(hd)
            ang = p * theta ** (-2.0 * (j % (hd // 2)) / hd)
            inputs["rope_cos"] = np.cos(ang).reshape(1, hd, 1, 1)
            inputs["rope_sin"] = np.sin(ang).reshape(1, hd, 1, 1)
        out = decode.run(pack(inputs) if packed else inputs)
        if packed:
            out = unpack(out["y"].astype(np.float32), 1)
        ys.append(out["y"].astype(np.float32))
        for L in layers if not st else ():
            caches[f"k_cache_{L}"][..., p] = out[f"k_{L}"][..., 0]
            caches[f"v_cache_{L}"][..., p] = out[f"v_{L}"][..., 0]
    got = np.concatenate(ys, axis=3)
    want = ref["y"].astype(np.float32)[..., n:total]
err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
print(f"{a.model} ({a.io}, kv {a.kv}): prefill {n} + decode {a.steps} vs prefill {total}: relative L2 error {err:.2e} "
      f"(tolerance {a.tol:g})")
sys.exit(0 if err <= a.tol else 1)
