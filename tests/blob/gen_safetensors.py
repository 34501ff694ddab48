"""Write .safetensors files by hand (numpy only) for test_safetensors: one
valid model and one file per malformation.  Usage: gen_safetensors.py DIR"""
import json
import os
import struct
import sys

import numpy as np

d = sys.argv[1]


def write(name, header, data=b"", raw_len=None, pad=True):
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    if pad:  # the reference writer pads the header with spaces to 8 bytes
        h += b" " * (-len(h) % 8)
    n = len(h) if raw_len is None else raw_len
    with open(os.path.join(d, name), "wb") as f:
        f.write(struct.pack("<Q", n) + h + data)


# A valid file: data laid out in a different order from the names.
tensors = [
    ("ln.bias", "F32", np.array([0.5, -1.0, 2.0], "<f4")),
    ("wte", "F16", (np.arange(12) / 4).astype("<f2").reshape(4, 3)),
    ("ids", "I32", np.array([[1, -2], [3, 2**31 - 1]], "<i4")),
    ("scalar", "F64", np.array(3.25, "<f8")),
    ("empty", "BF16", np.zeros((0, 5), "<u2")),
    ("mask", "BOOL", np.array([True, False, True])),
    ("h.0.attn.c_attn.weight", "F32", np.arange(6, dtype="<f4").reshape(2, 3) - 1),
]
hdr, blob = {"__metadata__": {"format": "pt", "note": "milc test"}}, b""
for name, dt, a in tensors:
    b = a.tobytes()
    hdr[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [len(blob), len(blob) + len(b)]}
    blob += b
write("model.safetensors", hdr, blob)
write("empty.safetensors", {})


def t(dt, shape, b, e):
    return {"dtype": dt, "shape": shape, "data_offsets": [b, e]}


with open(os.path.join(d, "short.safetensors"), "wb") as f:
    f.write(b"\x08\0\0\0\0")
write("hdr_past_end.safetensors", b"{}", b"\0" * 10, raw_len=1000, pad=False)
write("hdr_huge.safetensors", b"{}", raw_len=1 << 40, pad=False)
write("bad_json.safetensors", b'{"w": [1, 2}', pad=False)
write("not_object.safetensors", b"[1]", pad=False)
write("dup_key.safetensors", b'{"w": {}, "w": {}}', pad=False)
write("bad_dtype.safetensors", {"w": t("F17", [2], 0, 8)}, b"\0" * 8)
write("neg_shape.safetensors", {"w": t("F32", [-2], 0, 8)}, b"\0" * 8)
write("float_shape.safetensors", {"w": t("F32", [2.0], 0, 8)}, b"\0" * 8)
write("out_of_range.safetensors", {"w": t("F32", [2, 3], 0, 100)}, b"\0" * 24)
write("reversed.safetensors", {"w": t("F32", [2], 8, 0)}, b"\0" * 8)
write("size_mismatch.safetensors", {"w": t("F32", [2, 3], 0, 20)}, b"\0" * 20)
write("overlap.safetensors", {"a": t("F32", [2], 0, 8), "b": t("F32", [2], 4, 12)}, b"\0" * 12)
write("gap.safetensors", {"a": t("F32", [2], 0, 8), "b": t("F32", [2], 12, 20)}, b"\0" * 20)
write("tail.safetensors", {"a": t("F32", [2], 0, 8)}, b"\0" * 12)
write("missing_field.safetensors", {"w": {"dtype": "F32", "shape": [2]}}, b"\0" * 8)
write("extra_field.safetensors", {"w": dict(t("F32", [2], 0, 8), foo=1)}, b"\0" * 8)
write("bad_meta.safetensors", {"__metadata__": {"a": 1}})
write("rank17.safetensors", {"w": t("F32", [1] * 17, 0, 4)}, b"\0" * 4)
write("not_entry.safetensors", {"w": 5})
write("overflow.safetensors", {"w": t("U8", [2**32, 2**32, 16], 0, 0)})
write("bad_offsets.safetensors", {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}}, b"\0" * 8)
