#!/usr/bin/python3
"""bench_kv_state.py — per-token decode with the KV cache held as states
(`--kv state`) against the cache as inputs and outputs (`--kv io`), the same
chunk side by side in one run (issue #18: state at most the io time).

  bench_kv_state.py LIBMILC [--model gpt2] [--layers N] [--ctx 1024] [--threads 2] [--rounds 5] [--tokens 20]

Both chunks (split I/O, no padding: the CPU layout) are built in a temporary
cache and loaded on one thread pool each.  A round decodes `tokens` tokens
with each chunk, alternating, from the same cache contents; a token's time
is the wall time of its run call, for io including the caller's write of
the returned keys and values into its caches (what a chain does per token).
Printed: the median per-token ms of each over all rounds, and state / io
(< 1: states faster).  The two chunks' outputs are compared at every token
(relative L2), so a fast wrong path cannot pass."""
import argparse, os, sys, tempfile, time
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import milc  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("lib")
ap.add_argument("--model", default="gpt2")
ap.add_argument("--layers", type=int, default=0, help="layers of the chunk (default: the preset's)")
ap.add_argument("--ctx", type=int, default=1024)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--tokens", type=int, default=20)
a = ap.parse_args()
milc.load_library(a.lib)
opts = dict(phase="decode", seq=1, min_seq=1, io="split", ctx=a.ctx, **({"layers": a.layers} if a.layers else {}))
p0 = a.ctx // 2  # tokens already in the cache: attention reads half of it

with tempfile.TemporaryDirectory(prefix="milc-bench-kv-") as work, milc.Cache(work, threads=a.threads) as cache:
    t0 = time.time()
    (pio,) = cache.build(a.model, **opts)
    (pst,) = cache.build(a.model, kv="state", **opts)
    io, st = cache.load(pio.key), cache.load(pst.key)
    ins = {t.name: t for t in io.inputs}
    names = sorted(t.name for t in st.states)
    print(f"{a.model}, {len(names) // 2} layers, ctx {a.ctx}, {a.threads} threads: built in {time.time() - t0:.1f} s")
    dim = ins["x"].shape[1]
    rng = np.random.RandomState(0)
    base = {n: (rng.randn(*ins[n].shape) * 0.5).astype(np.float16) for n in names}
    for n in names:
        base[n][..., p0:] = 0
    xs = (rng.randn(a.tokens, 1, dim, 1, 1) * 0.5).astype(np.float16)
    times = {"io": [], "state": []}
    worst = 0.0
    for r in range(a.rounds):
        caches = {n: c.copy() for n, c in base.items()}
        for n in names:
            st.write_state(n, base[n])
        for k in range(a.tokens):
            p = p0 + k
            m_io = np.full((1, a.ctx + 1, 1, 1), -1e4, np.float16)
            m_io[0, :p, 0, 0] = 0
            m_io[0, a.ctx, 0, 0] = 0
            m_st = np.full((1, a.ctx, 1, 1), -1e4, np.float16)
            m_st[0, :p + 1, 0, 0] = 0
            inp_io = {"x": xs[k], "mask": m_io, **caches}
            inp_st = {"x": xs[k], "mask": m_st, "pos": np.array([p], np.int32)}
            for kind in (("io", "state") if (r + k) % 2 == 0 else ("state", "io")):
                t = time.perf_counter()
                if kind == "io":
                    o = io.run(inp_io)
                    for n in names:  # the new token's keys and values into the caller's caches
                        caches[n][..., p] = o[n.replace("_cache", "")][..., 0]
                    yi = o["y"]
                else:
                    ys = st.run(inp_st)["y"]
                times[kind].append(time.perf_counter() - t)
            worst = max(worst, float(np.linalg.norm(yi.astype(np.float64) - ys) / np.linalg.norm(yi.astype(np.float64))))
    mi, ms = np.median(times["io"]) * 1e3, np.median(times["state"]) * 1e3
    print(f"decode per token: kv io {mi:.3f} ms, kv state {ms:.3f} ms, state / io = {ms / mi:.3f} "
          f"(medians of {len(times['io'])} tokens each, alternating; outputs agree to rel L2 {worst:.1e})")
    io.close(), st.close()
    sys.exit(0 if worst <= 2e-3 else 1)
