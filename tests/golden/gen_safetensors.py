#!/usr/bin/env python3
"""Golden safetensors files for tests/test_safetensors.c, made with real PyTorch.

Run with the system Python that has PyTorch 1.13:  /usr/bin/python3 tests/golden/gen_safetensors.py

The `safetensors` package is not installed next to that PyTorch, so this script writes the
file format itself, following the reference writer's conventions (huggingface/safetensors,
safetensors/src/tensor.rs): "__metadata__" first, tensors sorted by dtype alignment
(largest first) then by name, offsets packed from 0, compact JSON padded with spaces to a
multiple of 8 bytes. Tensor values and their bytes come from torch; uint16/32/64, which
torch 1.13 lacks, come from numpy.

Outputs (tests/data/io/):
  golden_dtypes.safetensors  one tensor per dtype plus edge cases, with metadata
  golden_dtypes.txt          the expected values: one line per tensor,
                             "name dtype ndim dims... : values...", floats as float.hex()
                             of the exact stored value, integers in decimal
"""
import json
import math
import os
import struct

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "io")

# The reference's dtype order (increasing alignment); the writer sorts by it, descending.
ORDER = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
         "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64",
         "F64", "I64", "U64"]

TORCH_ST = {torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16",
            torch.int32: "I32", torch.int64: "I64", torch.float16: "F16",
            torch.bfloat16: "BF16", torch.float32: "F32", torch.float64: "F64"}
NUMPY_ST = {np.dtype("<u2"): "U16", np.dtype("<u4"): "U32", np.dtype("<u8"): "U64"}
CT_NAME = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "I32": "int32",
           "I64": "int64", "U16": "uint16", "U32": "uint32", "U64": "uint64", "F16": "float16",
           "BF16": "bfloat16", "F32": "float32", "F64": "float64"}


def tensor_entry(t):
    """(st dtype, shape, raw little-endian bytes, python values) of a torch tensor."""
    st = TORCH_ST[t.dtype]
    c = t.contiguous()
    if t.dtype == torch.bfloat16:
        raw = c.view(torch.int16).numpy().astype("<i2").tobytes()
    else:
        raw = c.numpy().astype(c.numpy().dtype.newbyteorder("<")).tobytes()
    if t.dtype.is_floating_point:
        vals = [float(x) for x in c.double().flatten().tolist()]
    else:
        vals = [int(x) for x in c.flatten().tolist()]
    return st, list(t.shape), raw, vals


def numpy_entry(a):
    a = np.ascontiguousarray(a)
    return NUMPY_ST[a.dtype], list(a.shape), a.tobytes(), [int(x) for x in a.flatten().tolist()]


def write_safetensors(path, tensors, metadata):
    names = sorted(tensors, key=lambda n: (-ORDER.index(tensors[n][0]), n.encode()))
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off = 0
    for n in names:
        st, shape, raw, _ = tensors[n]
        header[n] = {"dtype": st, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for n in names:
            f.write(tensors[n][2])


def fmt_value(st, v):
    if st in ("F16", "BF16", "F32", "F64"):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return float.hex(v)
    return str(v)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    specials = [0.1, -2.5, 65504.0, 6e-8, -0.0, float("inf"), float("-inf"), float("nan")]
    t = {}
    t["bool"] = tensor_entry(torch.tensor([[True, False, True], [True, False, False]]))
    t["uint8"] = tensor_entry(torch.arange(0, 256, 37, dtype=torch.uint8))
    t["int8"] = tensor_entry(torch.tensor([-128, -1, 0, 1, 127], dtype=torch.int8))
    t["int16"] = tensor_entry(torch.tensor([-32768, -2, 0, 3, 32767], dtype=torch.int16))
    t["int32"] = tensor_entry(torch.tensor([-2**31, -7, 0, 9, 2**31 - 1], dtype=torch.int32))
    t["int64"] = tensor_entry(torch.tensor([-2**63, -5, 0, 11, 2**63 - 1], dtype=torch.int64))
    t["uint16"] = numpy_entry(np.array([0, 1, 65535, 40000], dtype="<u2"))
    t["uint32"] = numpy_entry(np.array([[0, 1], [2**32 - 1, 3000000000]], dtype="<u4"))
    t["uint64"] = numpy_entry(np.array([0, 1, 2**64 - 1, 2**63], dtype="<u8"))
    t["float16"] = tensor_entry(torch.tensor(specials).half())
    t["bfloat16"] = tensor_entry(torch.tensor(specials + [3e38, 1.0 / 3]).bfloat16())
    t["float32"] = tensor_entry(torch.randn(3, 4))
    t["float64"] = tensor_entry(torch.randn(2, 2, dtype=torch.float64))
    t["model.layer.0.weight"] = tensor_entry(torch.arange(6.0).reshape(2, 3).t())  # saved contiguous
    t["model.layer.0.bias"] = tensor_entry(torch.tensor([0.5, -0.25], dtype=torch.float32))
    t["scalar"] = tensor_entry(torch.tensor(3.25))
    t["empty"] = tensor_entry(torch.zeros(0, 3))
    meta = {"format": "pt", "note": "golden \u00fcn\u00efcode \"quoted\"\ttab"}
    write_safetensors(os.path.join(OUT, "golden_dtypes.safetensors"), t, meta)
    with open(os.path.join(OUT, "golden_dtypes.txt"), "w") as f:
        for name in sorted(t):
            st, shape, _, vals = t[name]
            parts = [name, CT_NAME[st], str(len(shape))] + [str(d) for d in shape] + [":"]
            parts += [fmt_value(st, v) for v in vals]
            f.write(" ".join(parts) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
