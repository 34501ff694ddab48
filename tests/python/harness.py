"""harness.py — what the binding tests share: argv (SRC LIBMILC MILC), the
milc module loaded over the library just built, and ok/FAIL lines."""
import os
import sys

src, lib, milc_exe = sys.argv[1:4]
sys.path.insert(0, os.path.join(src, "python"))
import milc  # noqa: E402

milc.load_library(lib)
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def raises(status, fn, what):
    """fn() must raise MilcError with status and a message; returns it."""
    try:
        fn()
    except milc.MilcError as e:
        check(e.status == status and e.message, f"{what}: status {e.status} ({e.message.splitlines()[0]})")
        return e
    check(False, f"{what}: no error")


def finish():
    if failures:
        print(f"{len(failures)} failed")
        sys.exit(1)
    print("all passed")
