#!/usr/bin/python3
"""bench_conv.py — general convolution on the CPU backend against PyTorch's
CPU conv2d (issue #16's goal: >= 1.0x), side by side in one run.

  bench_conv.py BACKEND_RUN WORKDIR [threads] [rounds] [BASELINE_BACKEND_RUN]

Each shape (3x3, stride 1 and 2, padding 1, bias, batch 1, an fp16 program:
fp16 weights, input and output) is compiled once by backend_run and timed as its best of 20
runs; PyTorch's conv2d (fp32, its own thread count set to the same) as its
best of 20; PyTorch gets the same values in fp32; the two alternate for `rounds` rounds and the ratio printed is
torch's best / milc's best over the rounds (> 1: milc faster).  The outputs
are compared too (relative L2), so a fast wrong kernel cannot pass.  With a
baseline backend_run (another build), it runs in the same rounds too, and
its ratio is printed beside (an A/B of two builds under the same load).
"""
import os
import subprocess
import sys
import time

import numpy as np
import torch

RUN, WORK = sys.argv[1], sys.argv[2]
THREADS = int(sys.argv[3]) if len(sys.argv) > 3 else 1
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 3
BASE = sys.argv[5] if len(sys.argv) > 5 else None
torch.set_num_threads(THREADS)
SHAPES = [(64, 56, 1), (64, 56, 2), (128, 28, 1), (256, 14, 1), (256, 14, 2)]


def lit(a):
    return "[" + ", ".join(lit(x) for x in a) + "]" if isinstance(a, np.ndarray) and a.ndim else repr(float(a))


def program(d, c, h, s, w, b):
    ho = (h + 2 - 3) // s + 1
    text = """program(1.3)
{
    func main<ios18>(tensor<fp16, [1, %d, %d, %d]> x) {
        tensor<fp16, [%d, %d, 3, 3]> w = const()[val = tensor<fp16, [%d, %d, 3, 3]>(%s)];
        tensor<fp16, [%d]> b = const()[val = tensor<fp16, [%d]>(%s)];
        tensor<int32, [2]> st = const()[val = tensor<int32, [2]>([%d, %d])];
        tensor<int32, [4]> pd = const()[val = tensor<int32, [4]>([1, 1, 1, 1])];
        string pt = const()[val = string("custom")];
        tensor<fp16, [1, %d, %d, %d]> y = conv(x = x, weight = w, bias = b, strides = st, pad_type = pt, pad = pd);
    } -> (y);
}
""" % (c, h, h, c, c, c, c, lit(w), c, c, lit(b), s, s, c, ho, ho)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "model.mil"), "w").write(text)


def milc_ms(d, run=RUN):
    r = subprocess.run([run, d, "2", d, "--threads", str(THREADS), "--reps", "20"], capture_output=True, text=True)
    if r.returncode:
        sys.exit("backend_run failed on %s:\n%s" % (d, r.stderr))
    return float(r.stdout.split("run_ms=")[1].split()[0])


def torch_ms(x, w, b, s):
    best = 1e30
    for _ in range(20):
        t = time.perf_counter()
        torch.nn.functional.conv2d(x, w, b, stride=s, padding=1)
        best = min(best, time.perf_counter() - t)
    return best * 1e3


rng = np.random.default_rng(1)
print("conv 3x3, batch 1, fp16 weights, %d thread(s), best of 20 per round, %d rounds" % (THREADS, ROUNDS))
print("%-22s %10s %10s %8s %9s %8s%s" % ("shape", "milc ms", "torch ms", "GFLOP/s", "ratio", "rel L2",
                                        "   base ms base ratio" if BASE else ""))
ratios, bratios = [], []
for c, h, s in SHAPES:
    w = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float16)
    b = rng.standard_normal(c).astype(np.float16)
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    d = os.path.join(WORK, "conv_%d_%d_s%d" % (c, h, s))
    program(d, c, h, s, w, b)
    np.save(os.path.join(d, "in_x.npy"), x)
    tx, tw, tb = torch.from_numpy(x.astype(np.float16).astype(np.float32)), torch.from_numpy(w.astype(np.float32)), torch.from_numpy(b.astype(np.float32))
    best_m = best_t = best_b = 1e30
    for _ in range(ROUNDS):
        best_m = min(best_m, milc_ms(d))
        if BASE:
            best_b = min(best_b, milc_ms(d, BASE))
        best_t = min(best_t, torch_ms(tx, tw, tb, s))
    if BASE:  # the baseline wrote out_y last: this build's output again for the check
        milc_ms(d)
    ref = torch.nn.functional.conv2d(tx, tw, tb, stride=s, padding=1).numpy()
    got = np.load(os.path.join(d, "out_y.npy"))
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    ho = (h + 2 - 3) // s + 1
    gf = 2 * c * c * 9 * ho * ho / best_m / 1e6
    ratios.append(best_t / best_m)
    extra = ""
    if BASE:
        bratios.append(best_t / best_b)
        extra = " %9.3f %9.2fx" % (best_b, best_t / best_b)
    print("%-22s %10.3f %10.3f %8.1f %8.2fx %8.1e%s" % ("C=%d %dx%d s%d" % (c, h, h, s), best_m, best_t, gf, best_t / best_m, err, extra))
    if not err < 5e-3:
        sys.exit("wrong result: relative L2 %.3g" % err)
print("geometric mean ratio (torch time / milc time): %.2fx" % float(np.exp(np.mean(np.log(ratios)))))
if BASE:
    print("baseline's geometric mean ratio: %.2fx" % float(np.exp(np.mean(np.log(bratios)))))
