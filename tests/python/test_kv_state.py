"""`--kv state` decode chunks (GPT-2 and Llama) against `--kv io`: the same
tiny model emitted both ways by the real milc, checked (`milc check`),
compiled (bonded and non-bonded), run step after step in one loaded model
each: the state chunk keeps its caches as states written in place at the
run-time position, the io chunk gets them as inputs and returns the new
keys and values, which this test writes into its caches.  Outputs and the
caches agree step by step (rel L2 <= 2e-3 for y; the caches to an fp16 ulp).

    test_kv_state.py SRC LIBMILC MILC"""
import os, subprocess, sys, tempfile
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import milc, milc_exe, check, finish  # noqa: E402


def sh(*args):
    return subprocess.run([milc_exe, *args], check=True, capture_output=True, text=True)


CTX = 48


def emit(work, model, seq, kv, mode):
    d = os.path.join(work, f"{model}_{seq}_{kv}")
    if not os.path.exists(d):
        sh("-q", "emit", "--model", model, "--phase", "decode", "--seq", str(seq), "--min-seq", "1", "--ctx", str(CTX),
           "--io", "split", "--kv", kv, "-o", d)
        sh("check", os.path.join(d, "model.mil"))
    art = f"{d}_{mode}.milc"
    sh("compile", os.path.join(d, "model.mil"), "--mode", str(mode), "-o", art)
    return milc.Model.load_file(art, threads=2)


def rope(hd, pos, theta=500000.0):  # the template's tables: [1, hd, 1, S]
    j = np.arange(hd) % (hd // 2)
    ang = np.outer(theta ** (-2.0 * j / hd), pos)
    return np.cos(ang)[None, :, None, :].astype(np.float16), np.sin(ang)[None, :, None, :].astype(np.float16)


rng = np.random.RandomState(7)
with tempfile.TemporaryDirectory() as work:
    for model, seq, mode in (("tiny", 1, 2), ("tiny", 4, 1), ("tiny-llama", 1, 2), ("tiny-llama", 4, 2)):
        io, st = emit(work, model, seq, "io", mode), emit(work, model, seq, "state", mode)
        names = sorted(t.name for t in st.states)
        layers = len(names) // 2
        check(names == sorted(f"{k}_cache_{L}" for k in "kv" for L in range(layers)) and layers >= 1,
              f"{model} seq {seq}: states {names}")
        check(not any(t.name.startswith(("k_", "v_")) for t in st.inputs + st.outputs),
              f"{model} seq {seq}: no cache among the state chunk's inputs and outputs")
        ins = {t.name: t for t in io.inputs}
        dim, kvd = ins["x"].shape[1], ins["k_cache_0"].shape[1]
        caches = {n: np.zeros(ins[n].shape, np.float16) for n in names}
        p0 = 9  # as if a prefill had filled slots 0..8
        for n in names:
            caches[n][..., :p0] = rng.randn(1, kvd, 1, p0) * 0.5
            st.write_state(n, caches[n])
        worst = 0.0
        for step in range(5):
            p = p0 + step * seq
            x = (rng.randn(1, dim, 1, seq) * 0.5).astype(np.float16)
            m_io = np.full((1, CTX + seq, 1, seq), -1e4, np.float16)
            m_st = np.full((1, CTX, 1, seq), -1e4, np.float16)
            for i in range(seq):
                m_io[0, :p, 0, i] = 0
                m_io[0, CTX:CTX + i + 1, 0, i] = 0
                m_st[0, :p + i + 1, 0, i] = 0
            extra = {}
            if "rope_cos" in ins:
                extra["rope_cos"], extra["rope_sin"] = rope(ins["rope_cos"].shape[1], np.arange(p, p + seq))
            o = io.run(dict(x=x, mask=m_io, **caches, **extra))
            s = st.run(dict(x=x, mask=m_st, pos=np.array([p], np.int32), **extra))
            y0 = o["y"].astype(np.float64)
            err = np.linalg.norm(y0 - s["y"]) / np.linalg.norm(y0)
            worst = max(worst, err)
            for L in range(layers):
                caches[f"k_cache_{L}"][..., p:p + seq] = o[f"k_{L}"]
                caches[f"v_cache_{L}"][..., p:p + seq] = o[f"v_{L}"]
            for n in names:
                a, b = st.read_state(n).astype(np.float32), caches[n].astype(np.float32)
                if not np.allclose(a, b, rtol=2e-3, atol=1e-3):
                    check(False, f"{model} seq {seq} step {step}: state {n} differs from the io chain's cache")
        check(worst <= 2e-3, f"{model} seq {seq} mode {mode}: 5 steps, y rel L2 <= 2e-3 (worst {worst:.2e})")
        io.close(), st.close()

finish()
