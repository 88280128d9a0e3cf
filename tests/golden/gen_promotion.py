"""Writes tests/data/promotion.txt: PyTorch's type promotion, for ctorch's tests.

Run with a Python that has PyTorch (Debian's python3-torch 1.13 works):
    /usr/bin/python3 tests/golden/gen_promotion.py > tests/data/promotion.txt

Lines:
  promote A B R          torch.promote_types(A, B)
  result KIND_A A KIND_B B R
                         torch.result_type of two operands, KIND being t (tensor with
                         dims), z (0-d tensor) or s (Python scalar of that kind)
  cancast A B 0|1        torch.can_cast(A, B)
uint16/32/64 are not full dtypes in PyTorch 1.13; their rows are not generated here
(ctorch follows PyTorch 2.x's rule for them, tested by hand in test_promotion.c).
"""
import torch

names = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
dt = {n: getattr(torch, n) for n in names}

def short(d):
    return str(d).replace("torch.", "")

for a in names:
    for b in names:
        print("promote", a, b, short(torch.promote_types(dt[a], dt[b])))

scalars = {"bool": True, "int64": 3, "float64": 2.5}
for a in names:
    for b in names:
        ta = torch.zeros(2, dtype=dt[a])
        for kind in ("z", "s"):
            if kind == "z":
                tb = torch.zeros((), dtype=dt[b])
                print("result t", a, "z", b, short(torch.result_type(ta, tb)))
            elif b in scalars:
                print("result t", a, "s", b, short(torch.result_type(ta, scalars[b])))
    # 0-d with a scalar
    for b in scalars:
        za = torch.zeros((), dtype=dt[a])
        print("result z", a, "s", b, short(torch.result_type(za, scalars[b])))

for a in names:
    for b in names:
        print("cancast", a, b, int(torch.can_cast(dt[a], dt[b])))
