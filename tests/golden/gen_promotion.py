"""Writes tests/data/promotion.txt: PyTorch's type promotion, for ctorch's tests.

Run with a Python that has PyTorch (2.x for every dtype; Debian's 1.13 for the rest):
    /usr/bin/python3 tests/golden/gen_promotion.py > tests/data/promotion.txt

Lines:
  promote A B R          torch.promote_types(A, B)
  result KIND_A A KIND_B B R
                         torch.result_type of two operands, KIND being t (tensor with
                         dims), z (0-d tensor) or s (Python scalar of that kind)
  cancast A B 0|1        torch.can_cast(A, B)
The result is ERR where PyTorch raises (PyTorch 2.x refuses to promote uint16/32/64
with any integer or bool type but their own). With PyTorch 1.13, which lacks those
three dtypes, their rows are left out.
"""
import torch

names = ["bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "float16", "bfloat16",
         "float32", "float64"]
names = [n for n in names if hasattr(torch, n)]
dt = {n: getattr(torch, n) for n in names}


def ask(fn, *args):
    try:
        return short(fn(*args))
    except RuntimeError:
        return "ERR"


def short(d):
    return str(d).replace("torch.", "")

for a in names:
    for b in names:
        print("promote", a, b, ask(torch.promote_types, dt[a], dt[b]))

scalars = {"bool": True, "int64": 3, "float64": 2.5}
for a in names:
    for b in names:
        ta = torch.zeros(2, dtype=dt[a])
        for kind in ("z", "s"):
            if kind == "z":
                tb = torch.zeros((), dtype=dt[b])
                print("result t", a, "z", b, ask(torch.result_type, ta, tb))
            elif b in scalars:
                print("result t", a, "s", b, ask(torch.result_type, ta, scalars[b]))
    # 0-d with a scalar
    for b in scalars:
        za = torch.zeros((), dtype=dt[a])
        print("result z", a, "s", b, ask(torch.result_type, za, scalars[b]))

for a in names:
    for b in names:
        print("cancast", a, b, ask(lambda x, y: int(torch.can_cast(x, y)), dt[a], dt[b]))
