"""Write .npy files with numpy for test_npy: valid arrays of every supported
dtype and rank, other format versions, and well-formed files milc must refuse.
Usage: gen_npy.py DIR"""
import os
import sys

import numpy as np

d = sys.argv[1]


def save(name, a, version=None):
    with open(os.path.join(d, name), "wb") as f:
        np.lib.format.write_array(f, a, version=version, allow_pickle=False)


save("f32_2x3.npy", (np.arange(6, dtype="<f4") * 0.5).reshape(2, 3))
save("f16_5.npy", np.array([1, -2, 0.5, 65504, -0.0], dtype="<f2"))
save("i32_scalar.npy", np.array(-7, dtype="<i4"))
save("b1_4.npy", np.array([True, False, True, True]))
save("i64_0x3.npy", np.zeros((0, 3), dtype="<i8"))
save("u8_2x2x2.npy", np.arange(8, dtype="u1").reshape(2, 2, 2))
save("i8_3.npy", np.array([-128, 0, 127], dtype="i1"))
save("f32_rank5.npy", np.arange(6, dtype="<f4").reshape(1, 2, 1, 3, 1))
save("f64_big_dim.npy", np.arange(12345678901 % 1000, dtype="<f8"))
save("f64_v2.npy", np.arange(4, dtype="<f8"), version=(2, 0))
save("f32_v3.npy", np.arange(3, dtype="<f4"), version=(3, 0))
save("fortran.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
# np.save of a transposed array writes Fortran order; so does a 3-d one.
save("fortran_t.npy", np.arange(12, dtype="<f2").reshape(3, 4).T)
save("fortran_3d.npy", np.asfortranarray(np.arange(24, dtype="<i4").reshape(2, 3, 4)))
save("bigendian.npy", np.ones(3, dtype=">f4"))
save("complex.npy", np.ones(2, dtype="<c8"))
