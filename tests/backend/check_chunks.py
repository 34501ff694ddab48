#!/usr/bin/python3
"""check_chunks.py — generated GPT-2 and Llama chunks, compiled by the milc
backend in every compile mode, against a PyTorch reference written from the
math (not from the MIL): LayerNorm/RMSNorm, projections, RoPE, causal and
grouped-query attention with a KV cache, GELU-tanh / SwiGLU MLPs, residuals.

  check_chunks.py GEN_TOOL BACKEND_RUN WORKDIR

Weights are read from weights/weight.bin by the names the generator gives
them (the const statements of model.mil name the BLOBFILE offsets).  Bound:
relative L2 error <= 2e-3 on every output, and modes agree to the same bound.
"""
import math
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

BOUND = 2e-3
GEN, RUN, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def read_weights(d):
    """name -> np.float64 array, from model.mil consts and the MILBlob v2 file."""
    text = open(os.path.join(d, "model.mil")).read()
    blob = open(os.path.join(d, "weights", "weight.bin"), "rb").read()
    out = {}
    pat = re.compile(r"tensor<(fp16|fp32), \[([0-9, ]*)\]> (\w+) = const\(\)\[name = string\(\"\w+\"\), "
                     r"val = tensor<\w+, \[[0-9, ]*\]>\(BLOBFILE\(path = string\(\"[^\"]+\"\), offset = uint64\((\d+)\)\)\)\]")
    for dt, dims, name, off in pat.findall(text):
        off = int(off)
        sentinel, code, size, data_off = struct.unpack_from("<IIQQ", blob, off)
        assert sentinel == 0xDEADBEEF and data_off == off + 64
        arr = np.frombuffer(blob, dtype=np.float16 if code == 1 else np.float32, count=size // (2 if code == 1 else 4),
                            offset=data_off)
        shape = [int(x) for x in dims.split(",")] if dims.strip() else []
        out[name] = arr.astype(np.float64).reshape(shape)
    return out


def gen(name, outdir, **params):
    if os.path.exists(outdir):
        shutil.rmtree(outdir)
    args = [GEN, name, outdir]
    params.setdefault("io", "split")  # a tensor per output, as the reference computes them
    for k, v in params.items():
        args += ["--" + k, str(v)]
    subprocess.run(args, check=True)


def t(a):
    return torch.tensor(np.asarray(a, dtype=np.float64))


def f16(a):
    """What the model sees: inputs are fp16."""
    return np.asarray(a, dtype=np.float32).astype(np.float16).astype(np.float32)


def attention(q, k, v, H, Hk, mask):
    """q [T, H*hd], k/v [Sk, Hk*hd]; mask [T, Sk] additive. Returns [T, H*hd]."""
    T, Sk = q.shape[0], k.shape[0]
    hd = q.shape[1] // H
    qh = q.view(T, H, hd).transpose(0, 1)
    kh = k.view(Sk, Hk, hd).transpose(0, 1).repeat_interleave(H // Hk, dim=0)
    vh = v.view(Sk, Hk, hd).transpose(0, 1).repeat_interleave(H // Hk, dim=0)
    s = qh @ kh.transpose(1, 2) / math.sqrt(hd) + mask
    return (torch.softmax(s, dim=-1) @ vh).transpose(0, 1).reshape(T, H * hd)


def lin(w, x, b=None):
    w = t(w).reshape(w.shape[0], -1)
    y = x @ w.T
    return y if b is None else y + t(b).reshape(-1)


def rope(x, n, cos, sin):
    """HF rotate-half RoPE on x [T, n*hd] with cos/sin [T, hd]."""
    T = x.shape[0]
    xh = x.view(T, n, -1)
    h2 = xh.shape[-1] // 2
    rot = torch.cat([-xh[..., h2:], xh[..., :h2]], dim=-1)
    return (xh * cos[:, None, :] + rot * sin[:, None, :]).reshape(T, -1)


def reference(kind, W, P, inp):
    """Outputs (name -> [1, C, 1, S] array) of a chunk, token-major inside."""
    C, H, S = P["dim"], P["heads"], P["S"]
    Hk = P.get("kv_heads", H)
    hd = C // H
    eps = P["eps"]
    decode = P["phase"] == "decode"
    ctx = P["ctx"] if decode else 0
    h = t(inp["x"])[0, :, 0, :].T
    if decode:
        mask = t(inp["mask"])[0, :, 0, :].T  # [S, ctx + S]
    else:
        mask = torch.zeros(S, S, dtype=torch.float64)
        mask[torch.triu(torch.ones(S, S, dtype=torch.bool), 1)] = -float("inf")
    if kind == "llama":
        pos = torch.arange(ctx, ctx + S, dtype=torch.float64)
        inv = P["rope_theta"] ** (-torch.arange(0, hd // 2, dtype=torch.float64) * 2 / hd)
        ang = pos[:, None] * torch.cat([inv, inv])[None, :]
        cos, sin = torch.cos(ang), torch.sin(ang)
    out = {}
    for L in range(P["first_layer"], P["first_layer"] + P["layers"]):
        p = "l%d" % L
        if kind == "gpt2":
            n1 = F.layer_norm(h, (C,), t(W[p + "_ln1_g"]).reshape(-1), t(W[p + "_ln1_b"]).reshape(-1), eps)
            q = lin(W[p + "_q_w"], n1, W[p + "_q_b"])
            k = lin(W[p + "_k_w"], n1, W[p + "_k_b"])
            v = lin(W[p + "_v_w"], n1, W[p + "_v_b"])
        else:
            n1 = h * torch.rsqrt((h * h).mean(-1, keepdim=True) + eps) * t(W[p + "_n1_g"]).reshape(-1)
            q = rope(lin(W[p + "_q_w"], n1), H, cos, sin)
            k = rope(lin(W[p + "_k_w"], n1), Hk, cos, sin)
            v = lin(W[p + "_v_w"], n1)
        out["k_%d" % L], out["v_%d" % L] = k, v
        kk, vv = k, v
        if decode:
            kk = torch.cat([t(inp["k_cache_%d" % L])[0, :, 0, :].T, k])
            vv = torch.cat([t(inp["v_cache_%d" % L])[0, :, 0, :].T, v])
        a = attention(q, kk, vv, H, Hk, mask)
        if kind == "gpt2":
            r1 = h + lin(W[p + "_o_w"], a, W[p + "_o_b"])
            n2 = F.layer_norm(r1, (C,), t(W[p + "_ln2_g"]).reshape(-1), t(W[p + "_ln2_b"]).reshape(-1), eps)
            u = F.gelu(lin(W[p + "_fc_w"], n2, W[p + "_fc_b"]), approximate="tanh")
            h = r1 + lin(W[p + "_mp_w"], u, W[p + "_mp_b"])
        else:
            r1 = h + lin(W[p + "_o_w"], a)
            n2 = r1 * torch.rsqrt((r1 * r1).mean(-1, keepdim=True) + eps) * t(W[p + "_n2_g"]).reshape(-1)
            u = F.silu(lin(W[p + "_gt_w"], n2)) * lin(W[p + "_up_w"], n2)
            h = r1 + lin(W[p + "_dn_w"], u)
    out["y"] = h
    return {k: v.T.numpy()[None, :, None, :] for k, v in out.items()}


def make_inputs(kind, P, d, seed):
    rng = np.random.default_rng(seed)
    C, S, H = P["dim"], P["S"], P["heads"]
    hd = C // H
    kvd = P.get("kv_heads", H) * hd
    inp = {"x": f16(rng.standard_normal((1, C, 1, S)))}
    if P["phase"] == "decode":
        ctx = P["ctx"]
        m = np.zeros((1, ctx + S, 1, S), np.float32)
        for i in range(S):
            m[0, ctx + i + 1:, 0, i] = -1e4
        inp["mask"] = m
        for L in range(P["first_layer"], P["first_layer"] + P["layers"]):
            inp["k_cache_%d" % L] = f16(rng.standard_normal((1, kvd, 1, ctx)))
            inp["v_cache_%d" % L] = f16(rng.standard_normal((1, kvd, 1, ctx)))
        if kind == "llama":
            pos = np.arange(ctx, ctx + S, dtype=np.float64)
            inv = P["rope_theta"] ** (-np.arange(0, hd // 2) * 2 / hd)
            ang = pos[None, :] * np.concatenate([inv, inv])[:, None]  # [hd, S]
            inp["rope_cos"] = f16(np.cos(ang)[None, :, None, :])
            inp["rope_sin"] = f16(np.sin(ang)[None, :, None, :])
    for k, v in inp.items():
        np.save(os.path.join(d, "in_%s.npy" % k), v)
    return {k: v.astype(np.float64) for k, v in inp.items()}


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def run(d, mode, extra=()):
    r = subprocess.run([RUN, d, str(mode), d, "--threads", "2"] + list(extra), capture_output=True, text=True)
    if r.returncode:
        failures.append("%s mode %d %s: exit %d\n%s" % (d, mode, " ".join(extra), r.returncode, r.stderr))
        return None, ""
    outs = {}
    for f in os.listdir(d):
        if f.startswith("out_"):
            outs[f[4:-4]] = np.load(os.path.join(d, f)).astype(np.float64)
            os.remove(os.path.join(d, f))
    return outs, r.stdout.strip()


def case(label, kind, preset, **params):
    d = os.path.join(WORK, label)
    gen(preset, d, **params)
    import json
    man = json.load(open(os.path.join(d, "manifest.json")))
    P = dict(man["params"])
    P["S"] = max(P["seq"], P["min_seq"])
    W = read_weights(d)
    inp = make_inputs(kind, P, d, seed=len(label))
    ref = reference(kind, W, P, inp)
    variants = [(2, ()), (1, ()), (0, ()), (0, ("--nonbonded",)), (2, ("--no-fuse",))]
    results = []
    for mode, extra in variants:
        outs, stats = run(d, mode, extra)
        if outs is None:
            continue
        worst = 0.0
        for name, want in ref.items():
            if name not in outs:
                failures.append("%s mode %d: output %s missing" % (label, mode, name))
                continue
            e = rel_l2(outs[name], want)
            worst = max(worst, e)
            if not e <= BOUND:
                failures.append("%s mode %d %s: %s rel L2 %.3g > %g" % (label, mode, " ".join(extra), name, e, BOUND))
        results.append(outs)
        print("%-16s mode %d %-12s worst rel L2 %.2e   %s" % (label, mode, " ".join(extra), worst, stats))
    for o in results[1:]:
        for name in ref:
            if name in o and name in results[0]:
                e = rel_l2(o[name], results[0][name])
                if not e <= BOUND:
                    failures.append("%s: modes disagree on %s (%.3g)" % (label, name, e))
    return d, P, W, inp


def chunk_split():
    """4 layers as one chunk == 4 chunks of 1 layer each, fed one into the next."""
    whole, P, W, inp = case("split_whole", "gpt2", "tiny", layers=4, model_layers=4, seq=16)
    outs, _ = run(whole, 2)
    x = inp["x"]
    parts = {}
    for L in range(4):
        d = os.path.join(WORK, "split_%d" % L)
        gen("tiny", d, layers=1, first_layer=L, model_layers=4, seq=16)
        Wl = read_weights(d)
        for k, v in Wl.items():
            if k.startswith("l%d_" % L) and not np.array_equal(v, W[k]):
                failures.append("chunk split: weight %s differs between chunkings" % k)
        np.save(os.path.join(d, "in_x.npy"), x.astype(np.float32))
        o, _ = run(d, 2)
        if o is None:
            return
        parts.update({k: v for k, v in o.items() if k != "y"})
        x = o["y"]
    parts["y"] = x
    worst = 0.0
    for name, v in outs.items():
        e = rel_l2(parts[name], v)
        worst = max(worst, e)
        if not e <= BOUND:
            failures.append("chunk split: %s differs (%.3g)" % (name, e))
    print("%-16s 4x1 vs 1x4 worst rel L2 %.2e" % ("split", worst))


os.makedirs(WORK, exist_ok=True)
case("gpt2_prefill", "gpt2", "tiny")
case("gpt2_decode", "gpt2", "tiny", phase="decode", seq=1)
case("gpt2_linear", "gpt2", "tiny", proj="linear", seq=20)
case("llama_prefill", "llama", "tiny-llama")
case("llama_decode", "llama", "tiny-llama", phase="decode", seq=1)
case("llama_linear", "llama", "tiny-llama", proj="linear", phase="decode", seq=1)
chunk_split()
if failures:
    print("\n".join(failures))
    sys.exit(1)
print("all chunks match the PyTorch reference")
