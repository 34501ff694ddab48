#!/usr/bin/env python3
"""Round trips with Apple's coremltools (the oracle, ../shared/oracles/coreml):

1. every golden program (tests/gen/golden) and every generated chunk kind:
   milc emit -> milc convert to .mlpackage -> `oracle.py load` (coremltools
   rebuilds every op through its own op definitions and type inference) ->
   milc fmt of the package gives the same canonical text;
2. packages written BY coremltools (`oracle.py make`) for programs milc runs,
   spelled the way a PyTorch conversion spells them: milc checks them (and
   reports them against the ANE profile), compiles and runs them, and the
   outputs match numpy;
3. states: a program with a state input (a KV cache updated with
   slice_update) written by milc and loaded by coremltools, and the same made
   by coremltools, read and rewritten by milc, loaded by coremltools again;
4. nested blocks: cond and while_loop the same two ways.

usage: oracle_roundtrip.py MILC SRC ORACLE_DIR WORK
Exit 0 on success; 77 (ctest's skip code) without the oracle unless CI=true,
when a missing oracle fails the test."""
import json
import os
import re
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
    # the KV cache held as iOS18 states (read_state, slice_update at a run-time position, coreml_update_state)
    "gpt2_decode_kv_state": ["--model", "tiny", "--phase", "decode", "--seq", "1", "--kv", "state"],
    "llama_verify_kv_state": ["--model", "tiny-llama", "--phase", "decode", "--seq", "4", "--min-seq", "1", "--kv", "state"],
}


UPDATE_RE = re.compile(r'^(\s*)(tensor<[^>]*>) (\w+) = coreml_update_state\(state = (\w+), value = (\w+)\)\[name = string\("(\w+)"\)\];$',
                       re.M)


def package_form(text):
    """The program as a package holds it: coreml_update_state written as
    write_state + read_state, as coremltools writes it."""
    return UPDATE_RE.sub(lambda m: '%swrite_state(data = %s, input = %s)[name = string("%s_write_state")];\n'
                         '%s%s %s = read_state(input = %s)[name = string("%s")];'
                         % (m[1], m[5], m[4], m[6], m[1], m[2], m[3], m[4], m[6]), text)


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
    if back != package_form(text):
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


# ---- 3. states (a KV cache) both ways ----

STATE_TEXT = """program(1.3)
{
    func main<ios18>(state<tensor<fp16, [1, 2, 8, 4]>> cache, tensor<fp16, [1, 2, 1, 4]> kv) {
        tensor<fp16, [1, 2, 8, 4]> old = read_state(input = cache)[name = string("old")];
        tensor<fp16, [1, 2, 8, 4]> put = slice_update(begin = tensor<int32, [4]>([0, 0, 3, 0]), end = tensor<int32, [4]>([1, 2, 4, 4]), update = kv, x = old)[name = string("put")];
        write_state(data = put, input = cache)[name = string("w")];
        tensor<fp16, [1, 2, 8, 4]> now = coreml_update_state(state = cache, value = put)[name = string("now")];
        tensor<fp16, [1, 2, 4]> y = reduce_sum(axes = tensor<int32, [1]>([2]), x = now)[name = string("y")];
    } -> (y);
}
"""
# What the package holds: coreml_update_state spelled write_state + read_state.
STATE_BACK = STATE_TEXT.replace(
    """        tensor<fp16, [1, 2, 8, 4]> now = coreml_update_state(state = cache, value = put)[name = string("now")];""",
    """        write_state(data = put, input = cache)[name = string("now_write_state")];
        tensor<fp16, [1, 2, 8, 4]> now = read_state(input = cache)[name = string("now")];""")

STATE_SCRIPT = """
@mb.program(input_specs=[mb.StateTensorSpec(shape=(1, 2, 8, 4), dtype=types.fp16),
                         mb.TensorSpec(shape=(1, 2, 1, 4), dtype=types.fp16)], opset_version=ct.target.iOS18)
def prog(cache, kv):
    old = mb.read_state(input=cache, name="old")
    put = mb.slice_update(x=old, update=kv, begin=[0, 0, 3, 0], end=[1, 2, 4, 4], name="put")
    now = mb.coreml_update_state(state=cache, value=put, name="now")
    return mb.reduce_sum(x=now, axes=[2], name="y")
"""


def state_features(pkg):
    """(input names, state names) of the package's description, from coremltools' spec dump."""
    spec = oracle("spec", pkg).stdout
    desc = spec.split("mlProgram {")[0]
    ins, states, kind = [], [], None
    for line in desc.splitlines():
        t = line.strip()
        if t in ("input {", "output {", "state {"):
            kind = t.split()[0]
        elif t.startswith("name:") and kind in ("input", "state"):
            (ins if kind == "input" else states).append(t.split('"')[1])
            kind = None
    return ins, states, "stateType" in desc


def states_roundtrip():
    # milc's text -> package -> coremltools loads it -> milc reads it back.
    src = os.path.join(WORK, "kv_state.mil")
    open(src, "w").write(STATE_TEXT)
    sh(MILC, "check", src)
    pkg = os.path.join(WORK, "kv_state.mlpackage")
    sh(MILC, "-q", "convert", src, "-o", pkg)
    r = oracle("load", pkg, ok=False)
    if r.returncode != 0:
        failures.append("kv_state: coremltools does not load milc's package with a state: %s" % (r.stdout + r.stderr)[-1500:])
        return
    if "(State)" not in r.stdout or "specification version 9" not in r.stdout:
        failures.append("kv_state: coremltools does not see 'cache' as a state of a version-9 spec:\n" + r.stdout[-1500:])
    ins, states, typed = state_features(pkg)
    if ins != ["kv"] or states != ["cache"] or not typed:
        failures.append("kv_state: description inputs %s, states %s (want ['kv'], ['cache'] as a stateType)" % (ins, states))
    back = sh(MILC, "fmt", pkg).stdout
    if back != STATE_BACK:
        failures.append("kv_state: package read back differs:\n" + back)
    else:
        print("ok  %-22s milc -> package with a state -> coremltools loads it -> milc reads it back" % "kv_state")
    # coremltools' package -> milc checks and reads it -> milc writes it -> coremltools loads that.
    sfile = os.path.join(WORK, "ct_state.py")
    open(sfile, "w").write(STATE_SCRIPT)
    ct_pkg = os.path.join(WORK, "ct_state.mlpackage")
    oracle("make", sfile, ct_pkg)
    sh(MILC, "check", ct_pkg)
    text = sh(MILC, "fmt", ct_pkg).stdout
    for want in ("state<tensor<fp16, [1, 2, 8, 4]>> cache", "= slice_update(", "write_state(data = put, input = cache)",
                 "now = read_state(input = cache)"):
        if want not in text:
            failures.append("ct_state: milc's reading of coremltools' package lacks %r:\n%s" % (want, text))
            return
    again = os.path.join(WORK, "ct_state_milc.mlpackage")
    sh(MILC, "-q", "convert", ct_pkg, "-o", again)
    r = oracle("load", again, ok=False)
    if r.returncode != 0 or "(State)" not in r.stdout:
        failures.append("ct_state: coremltools does not load milc's rewrite of its package: %s" % (r.stdout + r.stderr)[-1500:])
        return
    if sh(MILC, "fmt", again).stdout != text:
        failures.append("ct_state: coremltools -> milc -> package -> milc changed the program")
        return
    print("ok  %-22s coremltools' package with a state -> milc -> package -> coremltools loads it" % "ct_state")
    # ... and milc runs it: the state seeded from a file, its final value written beside y.
    rng = np.random.RandomState(4)
    seed, kv = rng.randn(1, 2, 8, 4).astype(np.float16), rng.randn(1, 2, 1, 4).astype(np.float16)
    np.save(os.path.join(WORK, "ct_seed.npy"), seed)
    np.save(os.path.join(WORK, "ct_kv.npy"), kv)
    out = os.path.join(WORK, "ct_state_run")
    sh(MILC, "-q", "run", ct_pkg, "--input", "kv=" + os.path.join(WORK, "ct_kv.npy"),
       "--state", "cache=" + os.path.join(WORK, "ct_seed.npy"), "-o", out)
    want = seed.copy()
    want[:, :, 3:4, :] = kv
    y, cache = np.load(os.path.join(out, "y.npy")), np.load(os.path.join(out, "cache.npy"))
    wy = want.astype(np.float32).sum(axis=2)
    if not np.array_equal(cache, want) or np.abs(y.astype(np.float32) - wy).max() > 2e-3 * np.abs(wy).max():
        failures.append("ct_state: milc run of coremltools' package with a seeded state differs from numpy")
        return
    print("ok  %-22s coremltools' package with a state run by milc (--state seed), matches numpy" % "ct_state")
    bad_states(ct_pkg)


def bad_states(good):
    """Damaged state specs: exit 1, the field named, nothing written."""
    import shutil
    sys.path.insert(0, ORACLE)
    import oracle as orc
    orc.coremltools()
    from coremltools.proto import MIL_pb2, Model_pb2
    spec_rel = os.path.join("Data", "com.apple.CoreML", "model.mlmodel")

    def first(fn, op_type):
        return next(o for o in fn.block_specializations["CoreML8"].operations if o.type == op_type)

    def wrap_list(m):  # the state input wraps a list, not a tensor
        w = m.mlProgram.functions["main"].inputs[0].type.stateType.wrappedType
        inner = MIL_pb2.ValueType()
        inner.CopyFrom(w)
        w.listType.type.CopyFrom(inner)  # the oneof now holds the list

    def state_result(m):  # an op's result declared a state
        o = first(m.mlProgram.functions["main"], "read_state")
        inner = MIL_pb2.ValueType()
        inner.CopyFrom(o.outputs[0].type)
        o.outputs[0].type.stateType.wrappedType.CopyFrom(inner)

    def update_op(m):  # coreml_update_state on the wire
        first(m.mlProgram.functions["main"], "write_state").type = "coreml_update_state"

    cases = [("wrap_list", wrap_list, 'inputs[0]: a state type must wrap a tensor type'),
             ("state_result", state_result, "outputs[0]: a state type: only a function's inputs can be states"),
             ("update_op", update_op, "coreml_update_state is not an op of the Core ML format")]
    for name, patch, needle in cases:
        pkg = os.path.join(WORK, "bad_%s.mlpackage" % name)
        shutil.rmtree(pkg, ignore_errors=True)
        shutil.copytree(good, pkg)
        m = Model_pb2.Model()
        m.ParseFromString(open(os.path.join(pkg, spec_rel), "rb").read())
        patch(m)
        open(os.path.join(pkg, spec_rel), "wb").write(m.SerializeToString())
        out = os.path.join(WORK, "bad_%s_out.mlpackage" % name)
        for args in (["check", pkg], ["convert", pkg, "-o", out]):
            r = sh(MILC, *args, ok=False)
            if r.returncode != 1 or needle not in r.stderr or os.path.exists(out):
                failures.append("bad state %s: milc %s exit %d, wanted 1 with %r and nothing written: %s" % (
                    name, args[0], r.returncode, needle, r.stderr[-800:]))
    print("ok  %-22s damaged state specs refused with the field named" % "bad_states")


# ---- 4. nested blocks (cond, while_loop) both ways ----

FLOW_SCRIPT = """
@mb.program(input_specs=[mb.TensorSpec(shape=(2,), dtype=types.fp32), mb.TensorSpec(shape=(1,), dtype=types.int32)],
            opset_version=ct.target.iOS18)
def prog(x, n):
    p = mb.squeeze(x=mb.greater(x=n, y=np.int32(0)))
    y = mb.cond(pred=p, _true_fn=lambda: mb.add(x=x, y=x), _false_fn=lambda: mb.mul(x=x, y=x))
    def c(i, s):
        return mb.less(x=i, y=np.int32(3))
    def b(i, s):
        return mb.add(x=i, y=np.int32(1)), mb.add(x=s, y=x)
    i, acc = mb.while_loop(_cond=c, _body=b, loop_vars=(np.int32(0), y))
    return acc
"""


def control_flow_roundtrip():
    # milc's text (tests/mil/golden/control_flow.mil) -> package -> coremltools -> milc.
    src = os.path.join(SRC, "tests/mil/golden/control_flow.mil")
    text = sh(MILC, "fmt", src).stdout
    pkg = os.path.join(WORK, "control_flow.mlpackage")
    sh(MILC, "-q", "convert", src, "-o", pkg)
    r = oracle("load", pkg, ok=False)
    if r.returncode != 0 or "while_loop(" not in r.stdout or "cond(" not in r.stdout:
        failures.append("control_flow: coremltools does not load milc's package with nested blocks: %s" % (r.stdout + r.stderr)[-1500:])
        return
    if sh(MILC, "fmt", pkg).stdout != text:
        failures.append("control_flow: package read back differs from the program")
        return
    print("ok  %-22s milc -> package with cond/while_loop -> coremltools loads it -> milc reads it back" % "control_flow")
    # coremltools' cond / while_loop (sibling blocks reuse input names) -> milc -> package -> coremltools.
    sfile = os.path.join(WORK, "ct_flow.py")
    open(sfile, "w").write(FLOW_SCRIPT)
    ct_pkg = os.path.join(WORK, "ct_flow.mlpackage")
    oracle("make", sfile, ct_pkg)
    sh(MILC, "check", ct_pkg)
    text = sh(MILC, "fmt", ct_pkg).stdout
    # four blocks and the function end in "} -> ("
    if text.count("} -> (") != 5 or " = cond(" not in text or " = while_loop(" not in text:
        failures.append("ct_flow: milc's reading of coremltools' cond/while_loop lacks its blocks:\n" + text)
        return
    again = os.path.join(WORK, "ct_flow_milc.mlpackage")
    sh(MILC, "-q", "convert", ct_pkg, "-o", again)
    r = oracle("load", again, ok=False)
    if r.returncode != 0:
        failures.append("ct_flow: coremltools does not load milc's rewrite of its package: %s" % (r.stdout + r.stderr)[-1500:])
        return
    if sh(MILC, "fmt", again).stdout != text:
        failures.append("ct_flow: coremltools -> milc -> package -> milc changed the program")
        return
    print("ok  %-22s coremltools' cond/while_loop -> milc -> package -> coremltools loads it" % "ct_flow")


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
    try:
        states_roundtrip()
    except RuntimeError as e:
        failures.append("states: %s" % e)
    try:
        control_flow_roundtrip()
    except RuntimeError as e:
        failures.append("control flow: %s" % e)
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
