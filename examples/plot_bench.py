#!/usr/bin/python3
"""plot_bench.py — draw the sweeps of a `milc bench --json FILE` result.

One PNG with two panels: time per forward against layers per chunk (the depth
sweep) and against tokens per dispatch (the token sweep), one colour per
compile mode; points are medians with min..max bars; crosses mark the time
just to stream each point's weights once (bytes / measured bandwidth).  Lines
are the fits milc computed: time = a + b*work, where a is time independent of
the work (not a dispatch cost: that is measured directly, in the title); a fit
milc flagged (negative intercept, poor fit) is drawn dotted with its flags in
the legend, and a sweep that bends is drawn as its hinge (two slopes).

    milc bench --json bench.json
    /usr/bin/python3 examples/plot_bench.py bench.json -o bench.png

Needs only matplotlib (Debian: python3-matplotlib).  The JSON
layout is documented in cli/BENCH.md.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt

MODE_NAMES = {0: "mode 0 (both)", 1: "mode 1 (non-bonded)", 2: "mode 2 (bonded)"}


def draw(ax, modes, key, xlabel, title):
    drawn = False
    for m in modes:
        sweeps = m.get("sweeps")
        if not sweeps or key not in sweeps:
            continue
        s = sweeps[key]
        pts = s["points"]
        if not pts:
            continue
        x = [p["work"] for p in pts]
        y = [p["ms"] for p in pts]
        err = [[p["ms"] - p["min"] for p in pts], [p["max"] - p["ms"] for p in pts]]
        label = MODE_NAMES.get(m["mode"], "mode %d" % m["mode"])
        line = ax.errorbar(x, y, yerr=err, fmt="o", capsize=3, label=label)
        color = line[0].get_color()
        stream = [(p["work"], p["stream_ms"]) for p in pts if p.get("stream_ms") is not None]
        if stream:
            ax.plot([w for w, _ in stream], [t for _, t in stream], "x", color=color, label="  streaming its weights once")
        if s.get("a_ms") is not None and s.get("b_ms") is not None:
            lo, hi = min(x), max(x)
            xs = [lo + (hi - lo) * i / 50 for i in range(51)]
            flags = s.get("flags") or []
            hinge = s.get("hinge")
            if hinge:
                k, a, b, b2 = hinge["knot"], hinge["a_ms"], hinge["b_ms"], hinge["b_after_ms"]
                ax.plot(xs, [a + b * v + (b2 - b) * max(0.0, v - k) for v in xs], "-", color=color,
                        label="  bends at %g: %.4g then %.4g ms/%s, R\u00b2 %.3f" % (k, b, b2, s["work"], hinge["r2"]))
            style = ":" if flags else ("--" if hinge else "-")
            what = "flagged (%s)" % ", ".join(flags) if flags else "line"
            ax.plot(xs, [s["a_ms"] + s["b_ms"] * v for v in xs], style, color=color,
                    label="  %s: %.4g ms + %.4g ms x %s, R\u00b2 %.3f" % (what, s["a_ms"], s["b_ms"], s["work"], s["r2"]))
        drawn = True
    ax.set_xlabel(xlabel)
    ax.set_ylabel("ms per forward")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(fontsize=7)
    return drawn


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", help="output of milc bench --json FILE")
    ap.add_argument("-o", "--output", default="bench.png", help="PNG to write (default bench.png)")
    args = ap.parse_args()
    with open(args.json) as f:
        j = json.load(f)
    modes = j["modes"]
    first = next((m["sweeps"] for m in modes if m.get("sweeps")), None)
    if first is None:
        sys.exit("plot_bench: %s has no sweeps (was it run with --no-sweeps?)" % args.json)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
    draw(a1, modes, "depth", "layers per chunk",
         "depth sweep, %d token(s) per dispatch" % first["depth"]["seq"])
    draw(a2, modes, "tokens", "tokens per dispatch",
         "token sweep, %d-layer chunk" % first["tokens"]["layers"])
    d = j.get("dispatch")
    per = "; per-dispatch overhead %.3g \u00b5s (measured directly)" % d["us"] if d and d.get("us") is not None else ""
    fig.suptitle("milc bench: %s, %d thread%s, medians of %d runs%s"
                 % (j["config"], j["threads"], "" if j["threads"] == 1 else "s", j["repeat"], per))
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print("wrote %s" % args.output)


if __name__ == "__main__":
    main()
