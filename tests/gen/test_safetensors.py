#!/usr/bin/python3
"""test_safetensors.py — emit the tiny GPT-2 and Llama chunks from checkpoints
this script writes by hand (8-byte header length + JSON + data), in the
Hugging Face tensor names and layouts, and check every weight in
weights/weight.bin against numpy's own transposes and splits; then check the
exact errors for a missing tensor, a wrong shape, a wrong dtype and a
malformed file.  Usage: test_safetensors.py GEN_TOOL"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

TOOL = sys.argv[1]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def write_st(path, tensors):
    """tensors: name -> (dtype string, numpy array of the stored bytes' type)."""
    header, blobs, off = {}, [], 0
    for name, (dt, arr) in tensors.items():
        b = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def emit(tmp, name, out, weights, *opts):
    r = subprocess.run([TOOL, name, out, "--weights", weights, *opts], capture_output=True, text=True)
    return r.returncode, r.stderr.replace(tmp, "$D")


def read_weights(out):
    """name -> float32 array, from model.mil's BLOBFILE offsets and weight.bin."""
    mil = open(os.path.join(out, "model.mil")).read()
    blob = open(os.path.join(out, "weights", "weight.bin"), "rb").read()
    res = {}
    for m in re.finditer(r"tensor<(\w+), \[([0-9, ]*)\]> (\w+) = const\(\)\[name = string\(\"\w+\"\), val = "
                         r"tensor<\w+, \[[0-9, ]*\]>\(BLOBFILE\(path = string\(\"[^\"]*\"\), offset = uint64\((\d+)\)",
                         mil):
        dt, shape, name, off = m.group(1), [int(s) for s in m.group(2).split(",")], m.group(3), int(m.group(4))
        sentinel, code, size, data = struct.unpack_from("<IIQQ", blob, off)
        assert sentinel == 0xDEADBEEF and code == 1 and dt == "fp16"
        res[name] = np.frombuffer(blob, np.float16, size // 2, data).astype(np.float32).reshape(shape)
    return res


def same(got, want, what):
    want16 = np.asarray(want, np.float32).astype(np.float16).astype(np.float32)
    ok = got.size == want16.size and np.array_equal(got.reshape(-1), want16.reshape(-1))
    check(ok, what)


def gpt2_checkpoint(rng, L=2, D=128, F=256, prefix="transformer."):
    t = {}
    for i in range(L):
        p = f"{prefix}h.{i}."
        def r(*s):
            return rng.standard_normal(s).astype(np.float32) * 0.1
        t[p + "ln_1.weight"] = r(D) + 1
        t[p + "ln_1.bias"] = r(D)
        t[p + "attn.c_attn.weight"] = r(D, 3 * D)
        t[p + "attn.c_attn.bias"] = r(3 * D)
        t[p + "attn.c_proj.weight"] = r(D, D)
        t[p + "attn.c_proj.bias"] = r(D)
        t[p + "attn.bias"] = np.tril(np.ones((1, 1, 8, 8), np.float32))  # a buffer GPT-2 files carry; ignored
        t[p + "ln_2.weight"] = r(D) + 1
        t[p + "ln_2.bias"] = r(D)
        t[p + "mlp.c_fc.weight"] = r(D, F)
        t[p + "mlp.c_fc.bias"] = r(F)
        t[p + "mlp.c_proj.weight"] = r(F, D)
        t[p + "mlp.c_proj.bias"] = r(D)
    return t


def test_gpt2(tmp, rng):
    ck = gpt2_checkpoint(rng)
    path = os.path.join(tmp, "gpt2.safetensors")
    write_st(path, {k: ("F32", v) for k, v in ck.items()})
    for proj in ("conv", "linear"):
        out = os.path.join(tmp, "gpt2-" + proj)
        rc, err = emit(tmp, "tiny", out, path, "--proj", proj)
        check(rc == 0 and err == "", f"gpt2 {proj} emit: {err}")
        if rc:
            continue
        w = read_weights(out)
        D = 128
        for i in range(2):
            p, s = f"l{i}", f"transformer.h.{i}."
            ca, cb = ck[s + "attn.c_attn.weight"], ck[s + "attn.c_attn.bias"]
            for j, n in enumerate("qkv"):
                same(w[f"{p}_{n}_w"], ca[:, j * D:(j + 1) * D].T, f"{p} {n} weight ({proj})")
                same(w[f"{p}_{n}_b"], cb[j * D:(j + 1) * D], f"{p} {n} bias")
            same(w[f"{p}_o_w"], ck[s + "attn.c_proj.weight"].T, f"{p} attn proj")
            same(w[f"{p}_o_b"], ck[s + "attn.c_proj.bias"], f"{p} attn proj bias")
            same(w[f"{p}_fc_w"], ck[s + "mlp.c_fc.weight"].T, f"{p} fc")
            same(w[f"{p}_mp_w"], ck[s + "mlp.c_proj.weight"].T, f"{p} mlp proj")
            same(w[f"{p}_mp_b"], ck[s + "mlp.c_proj.bias"], f"{p} mlp proj bias")
            for ln in ("ln1", "ln2"):
                src = s + ("ln_1." if ln == "ln1" else "ln_2.")
                same(w[f"{p}_{ln}_g"], ck[src + "weight"], f"{p} {ln} gamma")
                same(w[f"{p}_{ln}_b"], ck[src + "bias"], f"{p} {ln} beta")
            check(w[f"{p}_q_w"].shape == ((D, D, 1, 1) if proj == "conv" else (D, D)), f"{p} q shape {proj}")
        S = 32
        mask = np.where(np.arange(S)[None, :] <= np.arange(S)[:, None], 0, -1e4)
        same(w["mask_t"], mask, "causal mask")

    # A chunk of the model's second layer takes h.1.* for its layer 1.
    out = os.path.join(tmp, "gpt2-l1")
    rc, err = emit(tmp, "tiny", out, path, "--first_layer", "1", "--layers", "1")
    check(rc == 0, "gpt2 first_layer=1: " + err)
    if rc == 0:
        w = read_weights(out)
        same(w["l1_fc_w"], ck["transformer.h.1.mlp.c_fc.weight"].T, "layer 1 chunk")
        check("l0_fc_w" not in w, "layer 0 absent from a layer-1 chunk")
    return path, ck


def to_bf16(a):
    return (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def from_bf16(u):
    return (u.astype(np.uint32) << 16).view(np.float32)


def test_llama(tmp, rng):
    L, D, H, KV, F = 2, 128, 4, 2, 256
    hd = D // H
    t, ref = {}, {}
    for i in range(L):
        p = f"model.layers.{i}."
        shapes = {"self_attn.q_proj.weight": (H * hd, D), "self_attn.k_proj.weight": (KV * hd, D),
                  "self_attn.v_proj.weight": (KV * hd, D), "self_attn.o_proj.weight": (D, H * hd),
                  "mlp.gate_proj.weight": (F, D), "mlp.up_proj.weight": (F, D), "mlp.down_proj.weight": (D, F),
                  "input_layernorm.weight": (D,), "post_attention_layernorm.weight": (D,)}
        for k, s in shapes.items():
            a = rng.standard_normal(s).astype(np.float32) * 0.05 + (1 if "norm" in k else 0)
            if "mlp" in k:  # BF16 for some, F16 for others: both convert
                u = to_bf16(a)
                t[p + k] = ("BF16", u)
                ref[p + k] = from_bf16(u)
            else:
                h = a.astype(np.float16)
                t[p + k] = ("F16", h)
                ref[p + k] = h.astype(np.float32)
    path = os.path.join(tmp, "llama.safetensors")
    write_st(path, t)
    out = os.path.join(tmp, "llama")
    rc, err = emit(tmp, "tiny-llama", out, path)
    check(rc == 0 and err == "", "llama emit: " + err)
    if rc:
        return
    w = read_weights(out)
    names = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
             "gt": "mlp.gate_proj", "up": "mlp.up_proj", "dn": "mlp.down_proj"}
    for i in range(L):
        s = f"model.layers.{i}."
        for short, hf in names.items():
            same(w[f"l{i}_{short}_w"], ref[s + hf + ".weight"], f"llama l{i} {short}")
        same(w[f"l{i}_n1_g"], ref[s + "input_layernorm.weight"], f"llama l{i} norm1")
        same(w[f"l{i}_n2_g"], ref[s + "post_attention_layernorm.weight"], f"llama l{i} norm2")
    # RoPE tables: rotate-half, positions 0..S-1, sin carrying rotate_half's sign
    S, theta = 32, 10000.0
    j = np.arange(hd) % (hd // 2)
    ang = np.arange(S)[None, :] * theta ** (-2.0 * j / hd)[:, None]
    same(w["rope_cos_t"], np.cos(ang), "rope cos")
    same(w["rope_sin_t"], np.where(np.arange(hd)[:, None] < hd // 2, -np.sin(ang), np.sin(ang)), "rope sin")


def test_errors(tmp, path, ck):
    def variant(name, change):
        t = {k: ("F32", v) for k, v in ck.items()}
        change(t)
        p = os.path.join(tmp, name + ".safetensors")
        write_st(p, t)
        return p

    def first_error(p):
        rc, err = emit(tmp, "tiny", os.path.join(tmp, "err-out"), p)
        check(rc == 1, "error exit code for " + p)
        return err.splitlines()[0] if err else ""

    blk = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tdir = os.path.join(os.path.dirname(blk), "mil-templates")

    p = variant("missing", lambda t: t.pop("transformer.h.1.ln_2.bias"))
    e = first_error(p).replace(tdir, "$T")
    check(re.fullmatch(r"\$T/blocks/layernorm\.xml:\d+: error: weight 'l1_ln2_b': tensor 'h\.1\.ln_2\.bias' "
                       r"not found in \$D/missing\.safetensors", e), "missing tensor: " + e)

    p = variant("shape", lambda t: t.__setitem__("transformer.h.0.mlp.c_fc.weight", ("F32", np.zeros((128, 128), np.float32))))
    e = first_error(p).replace(tdir, "$T")
    check(re.fullmatch(r"\$T/blocks/proj\.xml:\d+: error: weight 'l0_fc_w': tensor 'transformer\.h\.0\.mlp\.c_fc\.weight' "
                       r"has shape \[128, 128\] \(\[128, 128\] after 't'\), the template needs \[256, 128, 1, 1\]", e),
          "wrong shape: " + e)

    p = variant("split", lambda t: t.__setitem__("transformer.h.0.attn.c_attn.weight", ("F32", np.zeros((128, 100), np.float32))))
    e = first_error(p).replace(tdir, "$T")
    check(re.fullmatch(r"\$T/blocks/proj\.xml:\d+: error: weight 'l0_q_w': cannot split\(1, 3, 0\) tensor "
                       r"'transformer\.h\.0\.attn\.c_attn\.weight' of shape \[128, 100\]", e), "bad split: " + e)

    p = variant("dtype", lambda t: t.__setitem__("transformer.h.0.ln_1.weight", ("I32", np.zeros(128, np.int32))))
    e = first_error(p).replace(tdir, "$T")
    check(re.fullmatch(r"\$T/blocks/layernorm\.xml:\d+: error: weight 'l0_ln1_g': tensor 'transformer\.h\.0\.ln_1\.weight' "
                       r"has dtype I32; F32, F16 or BF16 expected", e), "wrong dtype: " + e)

    bad = os.path.join(tmp, "malformed.safetensors")
    with open(bad, "wb") as f:
        f.write(struct.pack("<Q", 1 << 40) + b"{}")
    e = first_error(bad)
    check(e.startswith("$D/malformed.safetensors") and "error:" in e, "malformed file: " + e)
    check(not os.path.exists(os.path.join(tmp, "err-out", "model.mil")), "no model.mil after an error")

    rc, err = emit(tmp, "tiny", os.path.join(tmp, "x"), os.path.join(tmp, "nonexistent.safetensors"))
    check(rc == 1 and err.startswith("$D/nonexistent.safetensors") and "error:" in err, "missing file: " + err)


def main():
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory(prefix="milc-st-") as tmp:
        path, ck = test_gpt2(tmp, rng)
        test_llama(tmp, rng)
        test_errors(tmp, path, ck)
    print("safetensors:", "FAILED %d" % failures if failures else "ok")
    sys.exit(1 if failures else 0)


main()
