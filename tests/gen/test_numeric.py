#!/usr/bin/python3
"""test_numeric.py — do the generated chunks compute GPT-2 and Llama layers?

Emits the tiny GPT-2 and Llama chunks (prefill and decode) from checkpoints in
Hugging Face layout, runs model.mil with a small numpy interpreter of the ops
the templates use, and compares with an independent numpy reference written
from the models' definitions ([T, D] row layout, HF weight layouts, repeat_kv,
rotate_half).  Decode runs against a cache filled from a prefill and must match
the reference's next position.  Both I/O layouts: split (a tensor per input
and output) and packed (one input, one output: README.md, "Packed I/O"), whose
fields this test packs and unpacks from the contract alone.  Usage: test_numeric.py GEN_TOOL"""
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pyutil import write_st  # noqa: E402

TOOL = sys.argv[1]
failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures += 1


# ---- a numpy interpreter of the MIL the templates generate ----

def parse_literal(s):
    s = s.strip()
    m = re.fullmatch(r"(\w+)\((.*)\)", s, re.S)
    if m and m.group(1) in ("int32", "fp16", "fp32", "bool", "string", "uint64"):
        t, v = m.group(1), m.group(2)
        if t == "string":
            return v.strip().strip('"')
        if t == "bool":
            return v.strip() == "true"
        if t == "int32":
            return int(v)
        return float.fromhex(v) if "0x" in v else float(v)
    m = re.fullmatch(r"tensor<(\w+), \[([0-9, ]*)\]>\((.*)\)", s, re.S)
    t, shape, v = m.group(1), [int(x) for x in m.group(2).split(",") if x.strip()], m.group(3)
    vals = [int(x) if t == "int32" else float(x) for x in re.findall(r"-?[0-9.a-fx+p-]+", v)]
    return np.array(vals).reshape(shape)


def split_args(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([<":
            depth += 1
        if ch in ")]>":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return {a.split("=", 1)[0].strip(): a.split("=", 1)[1].strip() for a in out}


def run_mil(dirpath, inputs):
    text = open(os.path.join(dirpath, "model.mil")).read()
    blob = open(os.path.join(dirpath, "weights", "weight.bin"), "rb").read()
    env = dict(inputs)
    body = text[text.index(") {\n") + 4:]
    outs = re.search(r"\} -> \(([^)]*)\);", body).group(1).split(", ")
    for line in body.splitlines():
        line = line.strip()
        if not line.endswith("];"):
            continue
        lhs, rhs = line.split(" = ", 1)
        names = re.findall(r"> (\w+)", lhs) if ">" in lhs else [lhs.split()[-1]]
        op, rest = rhs.split("(", 1)
        depth, i = 1, 0
        while depth:
            depth += {"(": 1, ")": -1}.get(rest[i], 0)
            i += 1
        args, attrs = split_args(rest[:i - 1]), split_args(rest[i + 1:rest.rindex("]")])
        if op == "const":
            v = attrs["val"]
            m = re.search(r"offset = uint64\((\d+)\)", v)
            if m:
                shape = [int(x) for x in re.match(r"tensor<\w+, \[([0-9, ]*)\]>", v).group(1).split(",")]
                _, code, size, data = struct.unpack_from("<IIQQ", blob, int(m.group(1)))
                env[names[0]] = np.frombuffer(blob, np.float16, size // 2, data).astype(np.float32).reshape(shape)
            else:
                env[names[0]] = parse_literal(v)
            continue

        def a(k, default=None):
            if k not in args:
                return default
            v = args[k]
            if v.startswith("("):
                return [env[n.strip()] for n in v[1:-1].split(",")]
            return env[v]
        x = a("x")
        if op == "conv":
            r = np.einsum("oi,nihs->nohs", a("weight")[:, :, 0, 0], x)
        elif op == "linear":
            r = x @ a("weight").T
        elif op in ("add", "mul"):
            r = x + a("y") if op == "add" else x * a("y")
        elif op == "layer_norm":
            ax = tuple(int(i) for i in a("axes"))
            mu = x.mean(axis=ax, keepdims=True)
            var = ((x - mu) ** 2).mean(axis=ax, keepdims=True)
            shp = [1] * x.ndim
            for i in ax:
                shp[i] = x.shape[i]
            r = (x - mu) / np.sqrt(var + a("epsilon")) * a("gamma").reshape(shp) + a("beta").reshape(shp)
        elif op == "reshape":
            r = x.reshape([int(i) for i in a("shape")])
        elif op == "transpose":
            r = x.transpose([int(i) for i in a("perm")])
        elif op == "matmul":
            y = a("y")
            if a("transpose_x"):
                x = np.swapaxes(x, -1, -2)
            if a("transpose_y"):
                y = np.swapaxes(y, -1, -2)
            r = x @ y
        elif op == "softmax":
            e = np.exp(x - x.max(axis=a("axis"), keepdims=True))
            r = e / e.sum(axis=a("axis"), keepdims=True)
        elif op == "slice_by_index":
            r = x[tuple(slice(b, e) for b, e in zip(a("begin"), a("end")))]
        elif op == "concat":
            r = np.concatenate(a("values"), axis=a("axis"))
        elif op == "split":
            for n, part in zip(names, np.split(x, a("num_splits"), axis=a("axis"))):
                env[n] = part
            continue
        elif op == "gelu":
            assert a("mode") == "TANH_APPROXIMATION"
            r = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
        elif op == "silu":
            r = x / (1 + np.exp(-x))
        elif op == "reduce_mean":
            r = x.mean(axis=tuple(int(i) for i in a("axes")), keepdims=a("keep_dims"))
        elif op == "rsqrt":
            r = 1 / np.sqrt(x + a("epsilon"))
        else:
            raise RuntimeError("op not in the test interpreter: " + op)
        env[names[0]] = r.astype(np.float32)
    return {n: env[n] for n in outs}


# ---- independent references, [T, D] rows, HF layouts ----

def f16(a):
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float32)


def gpt2_layer(ck, i, x, H):
    p = f"h.{i}."
    w = {k[len(p):]: f16(v) for k, v in ck.items() if k.startswith(p)}
    T, D = x.shape
    hd = D // H

    def ln(v, g, b):
        mu = v.mean(-1, keepdims=True)
        return (v - mu) / np.sqrt(((v - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b
    h = ln(x, w["ln_1.weight"], w["ln_1.bias"])
    qkv = h @ w["attn.c_attn.weight"] + w["attn.c_attn.bias"]
    q, k, v = (qkv[:, j * D:(j + 1) * D].reshape(T, H, hd).transpose(1, 0, 2) for j in range(3))
    att = q @ k.transpose(0, 2, 1) / math.sqrt(hd) + np.triu(np.full((T, T), -np.inf), 1)
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    o = (att @ v).transpose(1, 0, 2).reshape(T, D)
    x = x + o @ w["attn.c_proj.weight"] + w["attn.c_proj.bias"]
    h = ln(x, w["ln_2.weight"], w["ln_2.bias"])
    f = h @ w["mlp.c_fc.weight"] + w["mlp.c_fc.bias"]
    f = 0.5 * f * (1 + np.tanh(math.sqrt(2 / math.pi) * (f + 0.044715 * f ** 3)))
    x = x + f @ w["mlp.c_proj.weight"] + w["mlp.c_proj.bias"]
    return x, k.transpose(1, 0, 2).reshape(T, D), v.transpose(1, 0, 2).reshape(T, D)


def llama_layer(ck, i, x, H, KV, theta):
    p = f"model.layers.{i}."
    w = {k[len(p):]: f16(v) for k, v in ck.items() if k.startswith(p)}
    T, D = x.shape
    hd = D // H

    def rms(v, g):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-5) * g
    inv = theta ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(T)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rope(t):  # t [n, T, hd]
        rot = np.concatenate([-t[..., hd // 2:], t[..., :hd // 2]], -1)
        return t * cos + rot * sin
    h = rms(x, w["input_layernorm.weight"])
    q = rope((h @ w["self_attn.q_proj.weight"].T).reshape(T, H, hd).transpose(1, 0, 2))
    k = rope((h @ w["self_attn.k_proj.weight"].T).reshape(T, KV, hd).transpose(1, 0, 2))
    v = (h @ w["self_attn.v_proj.weight"].T).reshape(T, KV, hd).transpose(1, 0, 2)
    kr, vr = np.repeat(k, H // KV, 0), np.repeat(v, H // KV, 0)
    att = q @ kr.transpose(0, 2, 1) / math.sqrt(hd) + np.triu(np.full((T, T), -np.inf), 1)
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    x = x + (att @ vr).transpose(1, 0, 2).reshape(T, D) @ w["self_attn.o_proj.weight"].T
    h = rms(x, w["post_attention_layernorm.weight"])
    g = h @ w["mlp.gate_proj.weight"].T
    x = x + ((g / (1 + np.exp(-g))) * (h @ w["mlp.up_proj.weight"].T)) @ w["mlp.down_proj.weight"].T
    return x, k.transpose(1, 0, 2).reshape(T, KV * hd), v.transpose(1, 0, 2).reshape(T, KV * hd)


def close(got, want, what, tol=5e-3):
    err = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-6))
    check(err < tol, f"{what}: max error {err:.2e} of the range")


def to_ane(rows, S):  # [T, C] -> [1, C, 1, S], zero padded
    out = np.zeros((1, rows.shape[1], 1, S), np.float32)
    out[0, :, 0, :rows.shape[0]] = rows.T
    return out


def from_ane(t, T):
    return t[0, :, 0, :T].T


def run_model(tmp, kind, ck, ref_layer, hd, theta=None):
    D, L, S = 128, 2, 32
    rng = np.random.default_rng(5)
    path = os.path.join(tmp, kind + ".safetensors")
    write_st(path, ck)
    preset = "tiny" if kind == "gpt2" else "tiny-llama"
    xs = rng.standard_normal((S, D)).astype(np.float32)
    # reference over all S tokens, layer by layer
    ref_h, ref_kv = [xs], []
    for i in range(L):
        h, k, v = ref_layer(ck, i, ref_h[-1])
        ref_h.append(h)
        ref_kv.append((k, v))

    out = os.path.join(tmp, kind + "-prefill")
    r = subprocess.run([TOOL, preset, out, "--weights", path, "--io", "split"], capture_output=True, text=True)
    check(r.returncode == 0, f"{kind} prefill emit {r.stderr}")
    res = run_mil(out, {"x": f16(to_ane(xs, S))})
    close(from_ane(res["y"], S), ref_h[-1], f"{kind} prefill y")
    for i in range(L):
        close(from_ane(res[f"k_{i}"], S), ref_kv[i][0], f"{kind} prefill k_{i}")
        close(from_ane(res[f"v_{i}"], S), ref_kv[i][1], f"{kind} prefill v_{i}")

    # decode: token n (position n) against a cache of positions 0..n-1, padded to S=16
    n, ctx, Sd = 20, 48, 16
    out = os.path.join(tmp, kind + "-decode")
    r = subprocess.run([TOOL, preset, out, "--weights", path, "--phase", "decode", "--seq", "1", "--io", "split"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"{kind} decode emit {r.stderr}")
    inp = {"x": f16(to_ane(xs[n:n + 1], Sd))}
    mask = np.full((ctx + Sd, Sd), -1e4, np.float32)
    mask[:n, :] = 0  # every query row may see the cached positions 0..n-1
    for i in range(Sd):
        mask[ctx:ctx + i + 1, i] = 0  # and the new tokens up to itself
    inp["mask"] = mask.reshape(1, ctx + Sd, 1, Sd)
    for i in range(L):
        inp[f"k_cache_{i}"] = f16(to_ane(ref_kv[i][0][:n], ctx))
        inp[f"v_cache_{i}"] = f16(to_ane(ref_kv[i][1][:n], ctx))
    if theta:
        j = np.arange(hd) % (hd // 2)
        ang = (n + np.arange(Sd))[None, :] * theta ** (-2.0 * j / hd)[:, None]
        inp["rope_cos"] = f16(np.cos(ang)).reshape(1, hd, 1, Sd)
        inp["rope_sin"] = f16(np.sin(ang)).reshape(1, hd, 1, Sd)
    res = run_mil(out, inp)
    close(res["y"][0, :, 0, 0], ref_h[-1][n], f"{kind} decode y at position {n}")
    close(res["k_1"][0, :, 0, 0], ref_kv[1][0][n], f"{kind} decode k_1 at position {n}")
    close(res["v_0"][0, :, 0, 0], ref_kv[0][1][n], f"{kind} decode v_0 at position {n}")

    # the same two programs with packed I/O
    kvd = ref_kv[0][0].shape[1]
    out = os.path.join(tmp, kind + "-prefill-packed")
    r = subprocess.run([TOOL, preset, out, "--weights", path], capture_output=True, text=True)
    check(r.returncode == 0, f"{kind} packed prefill emit {r.stderr}")
    y = run_mil(out, {"x": f16(to_ane(xs, S))})["y"]
    check(y.shape == (1, D + 2 * L * kvd, 1, S), f"{kind} packed prefill y is {y.shape}")
    close(from_ane(y[:, :D], S), ref_h[-1], f"{kind} packed prefill hidden rows")
    for i in range(L):
        r0 = D + 2 * i * kvd
        close(from_ane(y[:, r0:r0 + kvd], S), ref_kv[i][0], f"{kind} packed prefill k_{i} rows")
        close(from_ane(y[:, r0 + kvd:r0 + 2 * kvd], S), ref_kv[i][1], f"{kind} packed prefill v_{i} rows")
    out = os.path.join(tmp, kind + "-decode-packed")
    r = subprocess.run([TOOL, preset, out, "--weights", path, "--phase", "decode", "--seq", "1"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"{kind} packed decode emit {r.stderr}")
    ctxp = ctx  # align(ctx + 16, 32) - 16 = 48: no padding slots here
    g = D // kvd
    blocks = [inp["x"][0, :, 0, :].reshape(g, kvd, Sd).transpose(1, 0, 2).reshape(kvd, g * Sd)]
    if theta:
        for t in ("rope_cos", "rope_sin"):
            b = np.zeros((kvd, Sd), np.float32)
            b[:hd] = inp[t][0, :, 0, :]
            blocks.append(b)
    b = np.zeros((kvd, ctxp + Sd), np.float32)
    b[:Sd] = mask.T  # row i: query i's additive mask over the keys
    blocks.append(b)
    for i in range(L):
        blocks += [inp[f"k_cache_{i}"][0, :, 0, :], inp[f"v_cache_{i}"][0, :, 0, :]]
    packed = np.concatenate(blocks, axis=1)[None, :, None, :]
    y = run_mil(out, {"x": packed})["y"]
    check(y.shape == (1, D + 2 * L * kvd, 1, Sd), f"{kind} packed decode y is {y.shape}")
    close(y[0, :D, 0, 0], ref_h[-1][n], f"{kind} packed decode hidden at position {n}")
    close(y[0, D + 2 * kvd:D + 3 * kvd, 0, 0], ref_kv[1][0][n], f"{kind} packed decode k_1 at position {n}")
    close(y[0, D + kvd:D + 2 * kvd, 0, 0], ref_kv[0][1][n], f"{kind} packed decode v_0 at position {n}")


def main():
    rng = np.random.default_rng(3)
    D, F = 128, 256
    g = {}
    for i in range(2):
        p = f"h.{i}."
        def r(*s, scale=0.08):
            return (rng.standard_normal(s) * scale).astype(np.float32)
        g.update({p + "ln_1.weight": 1 + r(D), p + "ln_1.bias": r(D), p + "attn.c_attn.weight": r(D, 3 * D),
                  p + "attn.c_attn.bias": r(3 * D), p + "attn.c_proj.weight": r(D, D), p + "attn.c_proj.bias": r(D),
                  p + "ln_2.weight": 1 + r(D), p + "ln_2.bias": r(D), p + "mlp.c_fc.weight": r(D, F),
                  p + "mlp.c_fc.bias": r(F), p + "mlp.c_proj.weight": r(F, D), p + "mlp.c_proj.bias": r(D)})
    H, KV, hd = 4, 2, 32
    ll = {}
    for i in range(2):
        p = f"model.layers.{i}."
        for k, s in {"self_attn.q_proj.weight": (H * hd, D), "self_attn.k_proj.weight": (KV * hd, D),
                     "self_attn.v_proj.weight": (KV * hd, D), "self_attn.o_proj.weight": (D, H * hd),
                     "mlp.gate_proj.weight": (F, D), "mlp.up_proj.weight": (F, D), "mlp.down_proj.weight": (D, F)}.items():
            ll[p + k] = (rng.standard_normal(s) * 0.08).astype(np.float32)
        ll[p + "input_layernorm.weight"] = (1 + rng.standard_normal(D) * 0.1).astype(np.float32)
        ll[p + "post_attention_layernorm.weight"] = (1 + rng.standard_normal(D) * 0.1).astype(np.float32)
    with tempfile.TemporaryDirectory(prefix="milc-num-") as tmp:
        run_model(tmp, "gpt2", g, lambda ck, i, x: gpt2_layer(ck, i, x, 4), 32)
        run_model(tmp, "llama", ll, lambda ck, i, x: llama_layer(ck, i, x, H, KV, 10000.0), hd, theta=10000.0)
    print("numeric:", "FAILED %d" % failures if failures else "ok")
    sys.exit(1 if failures else 0)


main()
