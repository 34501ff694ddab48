"""Whether the coremltools oracle is there: the oracle tests skip without it
(exit 77, ctest's skip code), except under CI=true, where it must be."""
import os
import subprocess


def oracle_gate(oracle):
    """None when the oracle runs; else the exit code the test should end with."""
    script = os.path.join(oracle, "oracle.py")
    if os.path.exists(script) and subprocess.run(["/usr/bin/python3", script, "ops"],
                                                 capture_output=True).returncode == 0:
        return None
    if os.environ.get("CI") == "true":
        print("FAIL: the coremltools oracle is required in CI (%s)" % oracle)
        return 1
    print("SKIP: no coremltools oracle in %s (run its setup.sh and export its PYTHONPATH)" % oracle)
    return 77
