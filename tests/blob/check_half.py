"""Compare milc/half.h (through half_dump) with numpy's float16, bit for bit.

fp16 -> fp32 over all 65536 halves; fp32 -> fp16 over every half's neighbours
and midpoints (where rounding decides), specials and 2M random floats.  NaNs
must stay NaN with their sign; milc makes them quiet, numpy need not.
Usage: check_half.py HALF_DUMP [HALF_DUMP ...]"""
import subprocess
import sys

import numpy as np


def run(exe, mode, data=b""):
    r = subprocess.run([exe, mode], input=data, capture_output=True, check=True)
    return r.stdout


def check(exe):
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    got = np.frombuffer(run(exe, "h2f"), dtype=np.uint32)
    want = halves.view(np.float16).astype(np.float32)
    nan = np.isnan(want)
    gotf = got.view(np.float32)
    bad = ~nan & (got != want.view(np.uint32))
    bad |= nan & ~(np.isnan(gotf) & (np.signbit(gotf) == np.signbit(want)))
    if bad.any():
        i = int(np.nonzero(bad)[0][0])
        sys.exit(f"{exe}: h2f {i:04x}: got {got[i]:08x} want {want.view(np.uint32)[i]:08x}")

    rng = np.random.default_rng(1234)
    fin = want[~nan].astype(np.float32).view(np.uint32).astype(np.int64)
    near = np.concatenate([fin + d for d in (-2, -1, 0, 1, 2)])
    # midpoints between consecutive halves, and one float ulp either side
    pos = np.sort(np.unique(want[~nan & (want >= 0)].astype(np.float64)))
    mids = ((pos[:-1] + pos[1:]) / 2).astype(np.float32).view(np.uint32).astype(np.int64)
    mids = np.concatenate([mids + d for d in (-1, 0, 1)])
    mids = np.concatenate([mids, mids | (1 << 31)])
    special = np.array([0, 1 << 31, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF,
                        0x477FF000, 0x477FEFFF, 0x477FE000, 0x33000000, 0x33000001, 0x32FFFFFF,
                        0x00000001, 0x007FFFFF, 0x7F7FFFFF], dtype=np.int64)
    rnd = rng.integers(0, 1 << 32, size=2_000_000, dtype=np.int64)
    f = np.concatenate([near, mids, special, rnd]) & 0xFFFFFFFF
    f = f.astype(np.uint32)
    got = np.frombuffer(run(exe, "f2h", f.tobytes()), dtype=np.uint16)
    ff = f.view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        want = ff.astype(np.float16).view(np.uint16)
    nan = np.isnan(ff)
    goth = got.view(np.float16)
    bad = ~nan & (got != want)
    bad |= nan & ~(np.isnan(goth) & (np.signbit(goth) == np.signbit(ff)))
    if bad.any():
        i = int(np.nonzero(bad)[0][0])
        sys.exit(f"{exe}: f2h {f[i]:08x}: got {got[i]:04x} want {want[i]:04x}")
    print(f"{exe}: 65536 h2f + {len(f)} f2h match numpy")


outs = []
for exe in sys.argv[1:]:
    check(exe)
    outs.append((run(exe, "h2f"), ))
# Every build (F16C and portable) must agree exactly, NaN payloads included.
if len(set(outs)) > 1:
    sys.exit("h2f differs between builds")
