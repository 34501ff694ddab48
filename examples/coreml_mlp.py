#!/usr/bin/env python3
"""Save a small Core ML package with coremltools, as a model's author would, for
milc to check, compile and run (README, "Core ML packages").

usage: coreml_mlp.py OUT.mlpackage [X.npy]
Needs coremltools on PYTHONPATH (on Linux it can save packages, not run them).
The program is a transformer MLP block as a PyTorch conversion spells it:
layer_norm, linear, gelu, linear, residual add, on fp16 [1, 8, 64].  With X.npy,
also writes a matching random input there."""
import sys

import coremltools as ct
import numpy as np
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types

S, C, H = 8, 64, 256
rng = np.random.default_rng(0)
w = {
    "g": (1 + 0.1 * rng.standard_normal(C)).astype(np.float16),
    "b": (0.1 * rng.standard_normal(C)).astype(np.float16),
    "w1": (rng.standard_normal((H, C)) / np.sqrt(C)).astype(np.float16),
    "b1": (0.1 * rng.standard_normal(H)).astype(np.float16),
    "w2": (rng.standard_normal((C, H)) / np.sqrt(H)).astype(np.float16),
    "b2": (0.1 * rng.standard_normal(C)).astype(np.float16),
}


@mb.program(input_specs=[mb.TensorSpec(shape=(1, S, C), dtype=types.fp16)], opset_version=ct.target.iOS18)
def prog(x):
    h = mb.layer_norm(x=x, axes=[-1], gamma=w["g"], beta=w["b"], epsilon=np.float16(1e-5))
    h = mb.linear(x=h, weight=w["w1"], bias=w["b1"])
    h = mb.gelu(x=h, mode="TANH_APPROXIMATION")
    h = mb.linear(x=h, weight=w["w2"], bias=w["b2"])
    return mb.add(x=x, y=h, name="y")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    model = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18,
                       pass_pipeline=ct.PassPipeline.EMPTY, skip_model_load=True)
    model.save(sys.argv[1])
    if len(sys.argv) == 3:
        np.save(sys.argv[2], rng.standard_normal((1, S, C)).astype(np.float16))


if __name__ == "__main__":
    main()
