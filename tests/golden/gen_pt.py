#!/usr/bin/python3
"""Writes the .pt golden files under tests/data/io/ with real torch.save (PyTorch 1.13).

Values follow simple formulas that tests/test_pt.c recomputes, so the C tests check
exact values without a second copy of the data. Run: /usr/bin/python3 tests/golden/gen_pt.py
"""
import collections
import io
import os
import sys
import zipfile

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "io")


def dtype_tensors():
    a = torch.arange(6)
    sd = collections.OrderedDict()
    sd["bool"] = (a % 2 == 0).reshape(2, 3)
    sd["uint8"] = (a * 40).to(torch.uint8).reshape(2, 3)
    sd["int8"] = (a - 3).to(torch.int8).reshape(2, 3)
    sd["int16"] = ((a - 3) * 1000).to(torch.int16).reshape(2, 3)
    sd["int32"] = ((a - 3) * 100000).to(torch.int32).reshape(2, 3)
    sd["int64"] = ((a - 3) * 10**12).to(torch.int64).reshape(2, 3)
    for name, dt in [("float16", torch.float16), ("bfloat16", torch.bfloat16),
                     ("float32", torch.float32), ("float64", torch.float64)]:
        sd[name] = ((a.to(torch.float64) - 2.5) * 0.5).to(dt).reshape(2, 3)
    return sd


def save(obj, name):
    path = os.path.join(OUT, name)
    torch.save(obj, path)
    return path


def rezip(src, dst, compression, byteorder=None, swap=None):
    """Copies an archive with Python's zipfile (no data descriptors, no alignment),
    optionally deflating it or turning it big-endian (byteorder record + swapped data)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compression) as zout:
        root = zin.namelist()[0].split("/")[0]
        for info in zin.infolist():
            data = zin.read(info.filename)
            if swap and info.filename.startswith(root + "/data/"):
                size = swap[info.filename.split("/")[-1]]
                data = b"".join(data[i:i + size][::-1] for i in range(0, len(data), size))
            zout.writestr(info.filename, data)
        if byteorder:
            zout.writestr(root + "/byteorder", byteorder)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)

    sd = dtype_tensors()
    p = save(sd, "dtypes.pt")
    # The same state_dict, big-endian: storages are numbered in insertion order.
    sizes = {str(i): t.element_size() for i, t in enumerate(sd.values())}
    rezip(p, os.path.join(OUT, "dtypes_big.pt"), zipfile.ZIP_STORED, "big", sizes)

    base = torch.arange(24, dtype=torch.float32)
    shared = collections.OrderedDict()
    shared["base"] = base
    shared["view"] = base[4:16].view(3, 4)       # offset 4
    shared["t"] = base[4:16].view(3, 4).t()      # non-contiguous
    shared["strided"] = base[1::3]               # offset 1, stride 3
    shared["other"] = torch.arange(4, dtype=torch.int64)
    p = save(shared, "shared.pt")
    rezip(p, os.path.join(OUT, "shared_deflate.pt"), zipfile.ZIP_DEFLATED)

    model = collections.OrderedDict()
    model["fc.weight"] = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4
    model["fc.bias"] = torch.tensor([0.5, -0.5])
    model._metadata = collections.OrderedDict([("", {"version": 1}), ("fc", {"version": 1})])
    ckpt = {
        "model": model,
        "optimizer": {
            "state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.full((2, 3), 0.25)},
                      1: {"step": torch.tensor(3.0), "exp_avg": torch.full((2,), -0.125)}},
            "param_groups": [{"lr": 0.001, "betas": (0.9, 0.999), "eps": 1e-08, "weight_decay": 0.0,
                              "amsgrad": False, "params": [0, 1]}],
        },
        "epoch": 7,
        "big": 2**40,
        "neg": -100000,
        "name": "run-1",
        "none": None,
        "blob": b"\x00\xffab",
        "list": [1, 2.5, "x", (3, 4), [], ()],
    }
    save(ckpt, "checkpoint.pt")

    params = collections.OrderedDict()
    params["w"] = torch.nn.Parameter(torch.tensor([1.5, -2.0]))
    params["frozen"] = torch.nn.Parameter(torch.tensor([3.0]), requires_grad=False)
    params["leaf"] = torch.tensor([1.0, 2.0]).requires_grad_()
    save(params, "params.pt")

    save({"scalar": torch.tensor(3.25), "empty": torch.empty(0, 3), "empty_long": torch.zeros(0, dtype=torch.int64),
          "scalar_int": torch.tensor(-7)}, "scalar_empty.pt")

    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT) if f.endswith(".pt"))
    print(f"wrote {OUT} ({total} bytes of .pt files) with torch {torch.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
