"""The Python binding (python/milc) against the real libmilc and milc:
build a chunk chain, run it in this process, and compare with `milc run` of
the same chunks; hits on the second build; errors as MilcError with milc's
message and status; no states on a chunk (test_states.py runs them); prewarm; nothing left in
the cache directory but the cache.

    test_binding.py SRC LIBMILC MILC"""
import os, subprocess, sys, tempfile
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import milc, milc_exe, check, raises, failures  # noqa: E402


with tempfile.TemporaryDirectory() as work:
    cdir = os.path.join(work, "cache")
    x = (np.random.RandomState(1).randn(1, 128, 1, 32) * 0.5).astype(np.float16)
    with milc.Cache(cdir) as cache:
        progs = milc.build(cache, "tiny", chunk=1, io="split")  # split I/O: y feeds the next x as it is
        check(len(progs) == 2 and all(p.outcome == "built" for p in progs), f"tiny in chunks of 1: {progs}")
        again = cache.build("tiny", chunk=1, io="split")
        check([p.key for p in again] == [p.key for p in progs] and all(p.outcome != "built" for p in again),
              "the same request again: every chunk a hit, same keys")
        y = x
        y0 = None
        for p in progs:
            with cache.load(p.key) as m:
                check([t.name for t in m.inputs] == ["x"] and m.mode == 2, f"chunk {p.label}: x -> {[t.name for t in m.outputs]}")
                y = m.run({"x": y})["y"]
                y0 = y if y0 is None else y0
                check(m.last_stats["dispatches"] > 0, "run stats counted dispatches")
                check(m.states == [], "no states")
                m.reset_states()  # nothing to reset: not an error
                raises(milc.E_USAGE, lambda: m.read_state("k"), "reading a state the chunk does not have")
                raises(milc.E_USAGE, lambda: m.run({"x": np.zeros((1, 2))}), "an input of the wrong shape")
                raises(milc.E_USAGE, lambda: m.run({}), "a missing input")
        # The CLI, chunk by chunk, through files, in its own cache.
        np.save(os.path.join(work, "x.npy"), x)
        prev = os.path.join(work, "x.npy")
        for i in range(2):
            out = os.path.join(work, f"o{i}")
            subprocess.run([milc_exe, "--cache-dir", os.path.join(work, "cli-cache"), "run", "--model", "tiny",
                            "--io", "split", "--layers", "1", "--first_layer", str(i), "--input", f"x={prev}", "-o", out, "-q"], check=True)
            prev = os.path.join(out, "y.npy")
        want = np.load(prev)
        check(want.dtype == y.dtype and np.array_equal(want, y) and np.abs(y).max() > 0,
              "the binding's chain equals milc run's, bit for bit")

        # A program file compiled without the cache runs like the cached chunk.
        mdir = os.path.join(work, "m")
        subprocess.run([milc_exe, "emit", "--model", "tiny", "--io", "split", "--layers", "1", "-o", mdir, "-q"], check=True)
        art = os.path.join(work, "m.milc")
        milc.compile_file(os.path.join(mdir, "model.mil"), art)
        with milc.Model.load_file(art) as m:
            check(m.mode == 2 and np.array_equal(m.run({"x": x})["y"], y0), "compile_file: its artifact runs like the cached chunk")
        # int16 / uint8 inputs and outputs come and go as numpy arrays of those dtypes
        nar = os.path.join(work, "narrow.mil")
        with open(nar, "w") as f:
            f.write("program(1.3)\n{\n    func main<ios18>(tensor<int16, [3]> x, tensor<uint8, [2]> u) {\n"
                    "        tensor<int16, [3]> r = reverse(x = x, axes = tensor<int32, [1]>([0]));\n"
                    "        tensor<uint8, [2]> v = identity(x = u);\n    } -> (r, v);\n}\n")
        milc.compile_file(nar, os.path.join(work, "narrow.milc"))
        with milc.Model.load_file(os.path.join(work, "narrow.milc")) as m:
            xi = np.array([5, -300, 32767], np.int16)
            o = m.run({"x": xi, "u": np.array([255, 3], np.uint8)})
            check(o["r"].dtype == np.int16 and np.array_equal(o["r"], xi[::-1]) and o["v"].dtype == np.uint8 and
                  np.array_equal(o["v"], [255, 3]), f"int16 and uint8 inputs and outputs: {o}")
        # non_zero of run-time data: its output is bounded, and run returns the rows counted
        nzp = os.path.join(work, "nz.mil")
        with open(nzp, "w") as f:
            f.write("program(1.3)\n{\n    func main<ios18>(tensor<fp32, [2, 3]> x) {\n"
                    "        tensor<int32, [?, 2]> y = non_zero(x = x);\n    } -> (y);\n}\n")
        milc.compile_file(nzp, os.path.join(work, "nz.milc"))
        with milc.Model.load_file(os.path.join(work, "nz.milc")) as m:
            check(m.outputs[0].bounded and m.outputs[0].shape == (6, 2), f"non_zero's output: {m.outputs}")
            for xv in (np.array([[0, 2, 0], [-1, 0, 3]], np.float32), np.zeros((2, 3), np.float32)):
                o = m.run({"x": xv})["y"]
                check(o.dtype == np.int32 and np.array_equal(o, np.argwhere(xv)) and o.shape == np.argwhere(xv).shape,
                      f"non_zero of {xv.tolist()}: {o.tolist()}")
        # an input of flexible shape: compiled for the size shapes gives it; a size that does not fit is refused
        flp = os.path.join(work, "flex.mil")
        with open(flp, "w") as f:
            f.write("program(1.3)\n{\n    func main<ios18>(tensor<fp32, [1, ?]> x) {\n"
                    "        tensor<fp32, [1, ?]> y = mul(x = x, y = fp32(2));\n    } -> (y);\n}\n")
        raises(milc.E_INPUT, lambda: milc.compile_file(flp, os.path.join(work, "flex.milc")), "a flexible input without a size")
        e = raises(milc.E_INPUT, lambda: milc.compile_file(flp, os.path.join(work, "flex.milc"), shapes={"x": (2, 3)}),
                   "a size that does not fit")
        check("does not fit input 'x' of shape [1, ?]" in str(e), f"the message names the input and its shape: {e}")
        milc.compile_file(flp, os.path.join(work, "flex.milc"), shapes={"x": (1, 3)})
        with milc.Model.load_file(os.path.join(work, "flex.milc")) as m:
            check(m.inputs[0].shape == (1, 3) and np.array_equal(m.run({"x": np.array([[1, 2, 3]], np.float32)})["y"],
                                                                  [[2, 4, 6]]), "a flexible input compiled for [1, 3]")
        bad = os.path.join(work, "bad.mil")
        with open(bad, "w") as f:
            f.write("program(1.0)\n{\n  func main<ios16>(tensor<fp32, [2]> x) {\n    tensor<fp32, [3]> y = relu(x = x);\n  } -> (y);\n}\n")
        e = raises(milc.E_INPUT, lambda: milc.compile_file(bad, os.path.join(work, "bad.milc")), "compile_file of a program that fails its checks")
        check(e is not None and "bad.mil:" in e.message and not os.path.exists(os.path.join(work, "bad.milc")),
              "the message names the file, and no artifact is written")
        raises(milc.E_USAGE, lambda: milc.compile_file(bad, art, mode=7), "compile_file in mode 7")

        info = cache.artifact_info(progs[0].key)
        check(info["mode"] == 2 and info["bytes"] > 0, f"artifact_info: {info}")
        raises(milc.E_NOTFOUND, lambda: cache.load("0" * 32), "an unknown key")
        raises(milc.E_USAGE, lambda: cache.load("xyz"), "a malformed key")
        e = raises(milc.E_INPUT, lambda: cache.build("no-such-template"), "an unknown template")
        check(e is not None and "no-such-template" in e.message, "the message names the template")
        raises(milc.E_INPUT, lambda: cache.build("tiny", no_such_param=1), "an unknown parameter")
        raises(milc.E_USAGE, lambda: cache.build("tiny", mode=7), "mode 7")
        check(cache.param("rope_theta", "tiny-llama") == "10000" and cache.param("dim", "tiny") == "128",
              "template parameters resolved")
        raises(milc.E_NOTFOUND, lambda: cache.param("nope", "tiny"), "an unknown parameter name")

        man = os.path.join(work, "manifest.txt")
        with open(man, "w") as f:
            f.write("# two requests\n--model tiny --chunk 1 --io split\n--model tiny --layers 1 --mode 1\n")
        r = cache.prewarm(man)
        check(r == {"programs": 3, "built": 1, "hits": 2, "failed": 0}, f"prewarm: {r}")
        with open(man, "w") as f:
            f.write("--model tiny --bogus\n")
        e = raises(milc.E_INPUT, lambda: cache.prewarm(man), "a bad manifest line")
        check(e is not None and "manifest.txt:1:" in e.message, "the message names the line")
    check(sorted(os.listdir(cdir)) == sorted(n for n in os.listdir(cdir) if not n.startswith("tmp-build")),
          f"no scratch left in the cache directory: {os.listdir(cdir)}")
    raises(milc.E_SYSTEM, lambda: milc.Cache(os.path.join(work, "x.npy", "sub")), "a cache under a file")

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
