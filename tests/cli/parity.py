#!/usr/bin/python3
"""parity.py — whole models through `milc run` against an independent PyTorch
implementation of the Hugging Face GPT-2 and Llama written here (HF tensor
names and layouts, Conv1D's [in, out], rotate_half RoPE, repeat_kv, the tied
LM head).

The chain is milc's own programs: the embedding (--part embed), the layer
chunks (--chunk layers each), the head (--part head), with the KV cache carried
between runs as the chunks' inputs and outputs (--io split, unpadded: the CPU
layout).  Checked: the prefill's logits at every position, then 16 greedy
decode steps — each step's logits (relative L2 <= 2e-3) and the greedy token.
With --kv state the decode chunks hold the cache as states (`--kv state`):
each `milc run` is seeded with the caches (`--state NAME=FILE.npy`) and
writes them back, updated in place by the chunk, for the next step.

    parity.py MILC PRESET WEIGHTS [--chunk N] [--prompt N] [--steps N] [--ctx N] [--kv io|state]

WEIGHTS is `random:SEED` (milc's own random weights, read back from the
emitted programs and renamed to HF's tensors for the reference) or `hf:SEED`
(a Hugging Face checkpoint this script writes as .safetensors, read by milc)."""
import argparse
import atexit
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pyutil import write_st  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("milc")
ap.add_argument("preset")
ap.add_argument("weights")
ap.add_argument("--chunk", type=int, default=1)
ap.add_argument("--prompt", type=int, default=12)
ap.add_argument("--steps", type=int, default=16)
ap.add_argument("--ctx", type=int, default=0, help="decode cache slots (default: prompt + steps)")
ap.add_argument("--tol", type=float, default=2e-3)
ap.add_argument("--kv", choices=["io", "state"], default="io", help="decode with the cache as inputs and outputs, or as states")
ap.add_argument("--extra", default="", help="more milc options, space-separated (e.g. --tied 0)")
a = ap.parse_args()
work = tempfile.mkdtemp(prefix="milc-parity-")
atexit.register(shutil.rmtree, work, True)
failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    failures += not cond


def milc(*args):
    r = subprocess.run([a.milc, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"milc {' '.join(args)}: exit {r.returncode}: {r.stderr}")
    return r.stdout


# ---- the model's parameters, from milc's own manifest ----
def emit(name, *opts):
    d = os.path.join(work, name)
    milc("emit", "--model", a.preset, "--weights", weights_opt, *extra, *opts, "-o", d, "-q")
    return d, json.load(open(os.path.join(d, "manifest.json")))


def read_weights(d):
    """milc name -> float32 array, from model.mil's BLOBFILE records and weight.bin."""
    mil = open(os.path.join(d, "model.mil")).read()
    blob = open(os.path.join(d, "weights", "weight.bin"), "rb").read()
    res = {}
    pat = (r"tensor<fp16, \[([0-9, ]*)\]> (\w+) = const\(\)\[name = string\(\"\w+\"\), val = "
           r"tensor<fp16, \[[0-9, ]*\]>\(BLOBFILE\(path = string\(\"[^\"]*\"\), offset = uint64\((\d+)\)")
    for m in re.finditer(pat, mil):
        shape, name, off = [int(s) for s in m.group(1).split(",")], m.group(2), int(m.group(3))
        _, _, size, data = struct.unpack_from("<IIQQ", blob, off)
        res[name] = np.frombuffer(blob, np.float16, size // 2, data).astype(np.float32).reshape(shape)
    return res


extra = a.extra.split()
kind, seed = a.weights.split(":")
weights_opt = "random:" + seed
_, man = emit("probe", "--layers", "1")
P = man["params"]
gpt2 = man["template"] == "gpt2"
D, H, NL, V = P["dim"], P["heads"], P["model_layers"], P["vocab"]
KV = H if gpt2 else P["kv_heads"]
hd = D // H
tied = gpt2 or P["tied"] == 1

if kind == "hf":  # a checkpoint in HF names, F32, drawn here
    rng = np.random.default_rng(int(seed))
    F = P["ffn"]

    def r(*s, scale=0.05):
        return rng.standard_normal(s) * scale
    ck = {}
    if gpt2:
        ck["transformer.wte.weight"], ck["transformer.wpe.weight"] = r(V, D), r(P["positions"], D, scale=0.02)
        ck["transformer.ln_f.weight"], ck["transformer.ln_f.bias"] = 1 + r(D), r(D)
        for i in range(NL):
            p = f"transformer.h.{i}."
            ck.update({p + "ln_1.weight": 1 + r(D), p + "ln_1.bias": r(D), p + "attn.c_attn.weight": r(D, 3 * D),
                       p + "attn.c_attn.bias": r(3 * D), p + "attn.c_proj.weight": r(D, D), p + "attn.c_proj.bias": r(D),
                       p + "ln_2.weight": 1 + r(D), p + "ln_2.bias": r(D), p + "mlp.c_fc.weight": r(D, F),
                       p + "mlp.c_fc.bias": r(F), p + "mlp.c_proj.weight": r(F, D), p + "mlp.c_proj.bias": r(D)})
    else:
        ck["model.embed_tokens.weight"], ck["model.norm.weight"] = r(V, D, scale=0.5), 1 + r(D)
        if not tied:
            ck["lm_head.weight"] = r(V, D)
        for i in range(NL):
            p = f"model.layers.{i}."
            for k, s in {"self_attn.q_proj.weight": (H * hd, D), "self_attn.k_proj.weight": (KV * hd, D),
                         "self_attn.v_proj.weight": (KV * hd, D), "self_attn.o_proj.weight": (D, H * hd),
                         "mlp.gate_proj.weight": (F, D), "mlp.up_proj.weight": (F, D),
                         "mlp.down_proj.weight": (D, F)}.items():
                ck[p + k] = r(*s, scale=1 / math.sqrt(s[1]))
            ck[p + "input_layernorm.weight"] = 1 + r(D)
            ck[p + "post_attention_layernorm.weight"] = 1 + r(D)
    weights_opt = os.path.join(work, "model.safetensors")
    write_st(weights_opt, ck)
    # the reference sees the weights as milc keeps them: rounded to fp16
    ref = {k.split("transformer.")[-1]: v.astype(np.float16).astype(np.float32) for k, v in ck.items()}
else:  # milc's random weights, read back and renamed
    W = {}
    for name, opts in (("embed", ["--part", "embed"]), ("head", ["--part", "head"]),
                       ("layers", ["--layers", str(NL), "--io", "split"])):
        W.update(read_weights(emit(name, *opts)[0]))
    ref = {}
    if gpt2:
        ref.update({"wte.weight": W["tok_w"].reshape(V, D), "wpe.weight": W["pos_w"], "ln_f.weight": W["lnf_g"], "ln_f.bias": W["lnf_b"]})
        for i in range(NL):
            w = {k[len(f"l{i}_"):]: v for k, v in W.items() if k.startswith(f"l{i}_")}
            m = {k: v.reshape(v.shape[0], -1) for k, v in w.items()}
            p = f"h.{i}."
            ref.update({p + "ln_1.weight": m["ln1_g"][:, 0], p + "ln_1.bias": m["ln1_b"][:, 0],
                        p + "attn.c_attn.weight": np.concatenate([m["q_w"].T, m["k_w"].T, m["v_w"].T], 1),
                        p + "attn.c_attn.bias": np.concatenate([w["q_b"].ravel(), w["k_b"].ravel(), w["v_b"].ravel()]),
                        p + "attn.c_proj.weight": m["o_w"].T, p + "attn.c_proj.bias": w["o_b"].ravel(),
                        p + "ln_2.weight": m["ln2_g"][:, 0], p + "ln_2.bias": m["ln2_b"][:, 0],
                        p + "mlp.c_fc.weight": m["fc_w"].T, p + "mlp.c_fc.bias": w["fc_b"].ravel(),
                        p + "mlp.c_proj.weight": m["mp_w"].T, p + "mlp.c_proj.bias": w["mp_b"].ravel()})
    else:
        ref.update({"model.embed_tokens.weight": W["tok_w"].reshape(V, D), "model.norm.weight": W["normf_g"].ravel()})
        if not tied:
            ref["lm_head.weight"] = W["lm_head_w"].reshape(V, D)
        names = {"q_w": "self_attn.q_proj", "k_w": "self_attn.k_proj", "v_w": "self_attn.v_proj",
                 "o_w": "self_attn.o_proj", "gt_w": "mlp.gate_proj", "up_w": "mlp.up_proj", "dn_w": "mlp.down_proj"}
        for i in range(NL):
            p = f"model.layers.{i}."
            for k, n in names.items():
                v = W[f"l{i}_{k}"]
                ref[p + n + ".weight"] = v.reshape(v.shape[0], -1)
            ref[p + "input_layernorm.weight"] = W[f"l{i}_n1_g"].ravel()
            ref[p + "post_attention_layernorm.weight"] = W[f"l{i}_n2_g"].ravel()


# ---- the reference: Hugging Face's forward, written from the models' definitions (fp32, as HF runs) ----
def T(name):
    return torch.from_numpy(ref[name])


def gpt2_forward(ids):
    n = len(ids)
    h = T("wte.weight")[ids] + T("wpe.weight")[torch.arange(n)]

    def ln(x, p):
        return torch.nn.functional.layer_norm(x, (D,), T(p + ".weight"), T(p + ".bias"), P["eps"])
    causal = torch.full((n, n), -math.inf, dtype=torch.float32).triu(1)
    for i in range(NL):
        p = f"h.{i}."
        q, k, v = (ln(h, p + "ln_1") @ T(p + "attn.c_attn.weight") + T(p + "attn.c_attn.bias")).split(D, -1)
        q, k, v = (t.reshape(n, H, hd).transpose(0, 1) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hd) + causal, -1) @ v
        h = h + att.transpose(0, 1).reshape(n, D) @ T(p + "attn.c_proj.weight") + T(p + "attn.c_proj.bias")
        f = ln(h, p + "ln_2") @ T(p + "mlp.c_fc.weight") + T(p + "mlp.c_fc.bias")
        f = 0.5 * f * (1 + torch.tanh(math.sqrt(2 / math.pi) * (f + 0.044715 * f ** 3)))  # gelu_new
        h = h + f @ T(p + "mlp.c_proj.weight") + T(p + "mlp.c_proj.bias")
    return ln(h, "ln_f") @ T("wte.weight").T


def llama_forward(ids):
    n = len(ids)
    h = T("model.embed_tokens.weight")[ids]

    def rms(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + P["eps"]) * w
    inv = 1.0 / (P["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang, ang], -1).cos().float(), torch.cat([ang, ang], -1).sin().float()

    def rope(t):
        return t * cos + torch.cat([-t[..., hd // 2:], t[..., :hd // 2]], -1) * sin
    causal = torch.full((n, n), -math.inf, dtype=torch.float32).triu(1)
    for i in range(NL):
        p = f"model.layers.{i}."
        x = rms(h, T(p + "input_layernorm.weight"))
        q = rope((x @ T(p + "self_attn.q_proj.weight").T).reshape(n, H, hd).transpose(0, 1))
        k = rope((x @ T(p + "self_attn.k_proj.weight").T).reshape(n, KV, hd).transpose(0, 1))
        v = (x @ T(p + "self_attn.v_proj.weight").T).reshape(n, KV, hd).transpose(0, 1)
        k, v = k.repeat_interleave(H // KV, 0), v.repeat_interleave(H // KV, 0)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hd) + causal, -1) @ v
        h = h + att.transpose(0, 1).reshape(n, H * hd) @ T(p + "self_attn.o_proj.weight").T
        x = rms(h, T(p + "post_attention_layernorm.weight"))
        g = x @ T(p + "mlp.gate_proj.weight").T
        h = h + (torch.nn.functional.silu(g) * (x @ T(p + "mlp.up_proj.weight").T)) @ T(p + "mlp.down_proj.weight").T
    head = T("model.embed_tokens.weight") if tied else T("lm_head.weight")
    return rms(h, T("model.norm.weight")) @ head.T


forward = gpt2_forward if gpt2 else llama_forward


# ---- milc: embedding, chunks, head, one `milc run` each ----
n, steps = a.prompt, a.steps
ctx = a.ctx or n + steps
common = ["--model", a.preset, "--weights", weights_opt, "--min_seq", "1", "--io", "split", "--mode", "2", *extra]
chunks = [(f, min(a.chunk, NL - f)) for f in range(0, NL, a.chunk)]
calls = 0


def run(opts, inputs, states=None):
    global calls
    calls += 1
    out = os.path.join(work, f"run{calls}")
    cmd = ["run", *common, *opts, "-o", out, "-q"]
    for flag, group in (("--input", inputs), ("--state", states or {})):
        for k, arr in group.items():
            path = os.path.join(work, f"in{calls}-{k}.npy")
            np.save(path, arr)
            cmd += [flag, f"{k}={path}"]
    milc(*cmd)
    return {f[:-4]: np.load(os.path.join(out, f)).astype(np.float32) for f in os.listdir(out)}


def embed(ids, pos0, s, phase):
    inp = {"input_ids": np.array([ids], np.int32)}
    if gpt2:
        inp["position_ids"] = np.arange(pos0, pos0 + s, dtype=np.int32)[None]
    return run(["--part", "embed", "--seq", str(s), *phase], inp)["y"].astype(np.float16)


def rel(got, want):
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


rng = np.random.default_rng(7)
ids = [int(t) for t in rng.integers(0, V, n)]
x = embed(ids, 0, n, [])
caches = {}
for f, c in chunks:
    o = run(["--layers", str(c), "--first-layer", str(f), "--seq", str(n)], {"x": x})
    x = o["y"].astype(np.float16)
    for L in range(f, f + c):
        for kv in "kv":
            cache = np.zeros((1, KV * hd, 1, ctx), np.float16)
            cache[..., :n] = o[f"{kv}_{L}"]
            caches[f"{kv}_cache_{L}"] = cache
logits = run(["--part", "head", "--seq", str(n)], {"x": x})["logits"][0, :, 0, :].T  # [n, vocab]
with torch.no_grad():
    want = forward(torch.tensor(ids)).numpy()
e = rel(logits, want)
check(e <= a.tol, f"{a.preset} {a.weights}: prefill logits of {n} tokens, relative L2 {e:.2e}")

dec = ["--phase", "decode", "--seq", "1", "--ctx", str(ctx)]
st = a.kv == "state"
worst, same = 0.0, 0
for p in range(n, n + steps):
    tok = int(np.argmax(logits[-1]))
    with torch.no_grad():
        want_all = forward(torch.tensor(ids)).numpy()
    ref_tok = int(np.argmax(want_all[-1]))
    same += tok == ref_tok
    if tok != ref_tok:
        print(f"     step {p}: milc chose {tok}, the reference {ref_tok}")
    ids.append(tok)
    x = embed([tok], p, 1, dec)
    for f, c in chunks:
        inp = {"x": x}
        if st:  # the new token goes to slot p: the mask covers the cache after the write
            mask = np.full((1, ctx, 1, 1), -1e4, np.float16)
            mask[0, :p + 1, 0, 0] = 0
            inp["pos"] = np.array([p], np.int32)
        else:
            mask = np.full((1, ctx + 1, 1, 1), -1e4, np.float16)
            mask[0, :p, 0, 0] = 0  # cache slots 0..p-1
            mask[0, ctx, 0, 0] = 0  # the new token
        inp["mask"] = mask
        if not gpt2:
            j = np.arange(hd)
            ang = p * P["rope_theta"] ** (-2.0 * (j % (hd // 2)) / hd)
            inp["rope_cos"] = np.cos(ang).reshape(1, hd, 1, 1).astype(np.float16)
            inp["rope_sin"] = np.sin(ang).reshape(1, hd, 1, 1).astype(np.float16)
        mine = {f"{kv}_cache_{L}": caches[f"{kv}_cache_{L}"] for L in range(f, f + c) for kv in "kv"}
        if st:
            o = run(["--layers", str(c), "--first-layer", str(f), *dec, "--kv", "state"], inp, mine)
            for name in mine:  # the states as the chunk left them: the next step's seeds
                caches[name] = o[name].astype(np.float16)
        else:
            o = run(["--layers", str(c), "--first-layer", str(f), *dec], {**inp, **mine})
            for L in range(f, f + c):
                caches[f"k_cache_{L}"][..., p] = o[f"k_{L}"][..., 0]
                caches[f"v_cache_{L}"][..., p] = o[f"v_{L}"][..., 0]
        x = o["y"].astype(np.float16)
    logits = run(["--part", "head", *dec], {"x": x})["logits"][0, :, 0, :].T
    with torch.no_grad():
        want = forward(torch.tensor(ids)).numpy()[-1:]
    worst = max(worst, rel(logits, want))
check(worst <= a.tol, f"{a.preset} {a.weights} kv {a.kv}: {steps} decode steps, worst relative L2 of the logits {worst:.2e}")
check(same == steps, f"{a.preset} {a.weights} kv {a.kv}: the same greedy token at {same} of {steps} steps")
print(f"parity: {'FAILED %d' % failures if failures else 'ok'} ({calls} milc runs)")
sys.exit(1 if failures else 0)
