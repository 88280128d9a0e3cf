"""Records PyTorch's results for subtle reduction and scan cases into
tests/data/reductions.txt (read by tests/test_ops_reduce.c).

Run with PyTorch installed:  python3 tests/golden/gen_reductions.py
Each line:  op;args;in_dtype;in_shape;in_values;expected
  args      space-separated key=value: dims=0,-1  dim=1  keepdim=1  dtype=float64  p=2  correction=1
            (dtype is the op's dtype= argument; the input dtype is the third field)
  expected  OK|dtype|shape|values[|dtype|shape|values]  or  ERR|message
"""
import math
import os

import torch

INF, NAN = float("inf"), float("nan")
NAMES = {torch.bool: "bool", torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16",
         torch.int32: "int32", torch.int64: "int64", torch.float16: "float16",
         torch.bfloat16: "bfloat16", torch.float32: "float32", torch.float64: "float64"}
DT = {v: k for k, v in NAMES.items()}


def fmt_vals(t):
    vals = t.detach().reshape(-1).double().tolist() if t.numel() else []
    return ",".join(repr(float(v)) if not math.isnan(v) else "nan" for v in vals)


def fmt_tensor(t):
    return "%s|%s|%s" % (NAMES[t.dtype], ",".join(str(s) for s in t.shape), fmt_vals(t))


def call(op, x, a):
    dims = a.get("dims")
    dims = () if dims is None else tuple(dims)
    kd = bool(a.get("keepdim", 0))
    dtype = DT[a["odtype"]] if "odtype" in a else None
    kw = {"dtype": dtype} if dtype is not None else {}
    if op in ("sum", "nansum", "mean", "nanmean"):
        return getattr(torch, op)(x, dims, keepdim=kd, **kw)
    if op == "prod":
        if len(dims) == 0:
            return torch.prod(x, **kw)
        return torch.prod(x, dims[0], keepdim=kd, **kw)
    if op in ("amax", "amin", "logsumexp"):
        return getattr(torch, op)(x, dims, keepdim=kd)
    if op in ("all", "any"):
        if len(dims) == 0:
            return getattr(torch, op)(x)
        return getattr(torch, op)(x, dims[0], keepdim=kd)
    if op == "count_nonzero":
        return torch.count_nonzero(x, dims)
    if op in ("max", "min", "argmax", "argmin"):
        return getattr(torch, op)(x)
    if op in ("max_dim", "min_dim"):
        r = getattr(torch, op[:3])(x, a["dim"], keepdim=kd)
        return (r.values, r.indices)
    if op in ("argmax_dim", "argmin_dim"):
        return getattr(torch, op[:6])(x, a["dim"], keepdim=kd)
    if op in ("var", "std", "var_mean", "std_mean"):
        r = getattr(torch, op)(x, dim=dims if dims else None, correction=a.get("correction", 1), keepdim=kd)
        return r
    if op == "norm":
        return torch.norm(x, a["p"], dim=dims if dims else None, keepdim=kd, **kw)
    if op == "linalg_vector_norm":
        return torch.linalg.vector_norm(x, a["p"], dim=dims if dims else None, keepdim=kd, **kw)
    if op in ("cumsum", "cumprod", "softmax", "log_softmax"):
        return getattr(torch, op)(x, a["dim"], **kw)
    if op in ("cummax", "cummin"):
        r = getattr(torch, op)(x, a["dim"])
        return (r.values, r.indices)
    raise ValueError(op)


def fmt_args(a):
    out = []
    for k, v in a.items():
        if k == "odtype":
            out.append("dtype=" + v)
        elif k == "dims":
            out.append("dims=" + ",".join(str(d) for d in v))
        else:
            out.append("%s=%s" % (k, repr(float(v)) if isinstance(v, float) else v))
    return " ".join(out)


LINES = []


def case(op, values, shape, dtype="float32", **a):
    x = torch.tensor(values, dtype=torch.float64).reshape(shape).to(DT[dtype])
    try:
        r = call(op, x, a)
        rs = r if isinstance(r, tuple) else (r,)
        exp = "OK|" + "|".join(fmt_tensor(t) for t in rs)
    except Exception as e:  # the message of PyTorch's error
        exp = "ERR|" + str(e).split("\n")[0]
    LINES.append("%s;%s;%s;%s;%s;%s" % (op, fmt_args(a), dtype, ",".join(str(s) for s in shape),
                                        ",".join("nan" if isinstance(v, float) and math.isnan(v) else repr(float(v))
                                                 for v in torch.tensor(values, dtype=torch.float64).reshape(-1).tolist()),
                                        exp))


def main():
    torch.manual_seed(0)
    m23 = [0.5, -1.25, 3.0, 2.0, 7.5, -4.0]
    m234 = [float(v) for v in torch.randn(24).mul(3).round(decimals=2).tolist()]
    ints = [3, -1, 4, 1, -5, 9]
    nanv = [1.0, NAN, 3.0, NAN, -2.0, 0.0]
    ties = [2.0, 5.0, 5.0, 1.0, 1.0, 0.0]
    infs = [-INF, -INF, -INF, INF, 1.0, 2.0]
    for op in ("sum", "nansum", "mean", "nanmean"):
        case(op, m234, [2, 3, 4], dims=[-1, 0])
        case(op, m234, [2, 3, 4], dims=[1], keepdim=1)
        case(op, m23, [2, 3])
        case(op, nanv, [2, 3], dims=[1])
        case(op, [], [0, 3], dims=[0])
        case(op, [], [0, 3])
        case(op, [2.5], [], dims=[0])
        case(op, ints, [2, 3], dtype="int32", dims=[0])
        case(op, [1, 0, 1], [3], dtype="bool")
        case(op, m23, [2, 3], dtype="float16", dims=[1])
        case(op, m23, [2, 3], dims=[0, -2])
        case(op, m23, [2, 3], dims=[2])
    case("sum", [200, 100, 250], [3], dtype="uint8")
    case("sum", m23, [2, 3], dims=[1], odtype="float64")
    case("sum", ints, [2, 3], dtype="int32", odtype="int16")
    case("sum", [1.5, 2.5, -1.5], [3], odtype="int32")
    case("mean", ints, [2, 3], dtype="int32", odtype="float64", dims=[1])
    case("mean", m23, [2, 3], odtype="int32")
    case("nanmean", ints, [2, 3], dtype="int32")
    case("prod", m23, [2, 3], dims=[1], odtype="int32")
    case("prod", ints, [2, 3], dtype="int8", odtype="float64")
    case("mean", ints, [2, 3], dtype="int64", dims=[1])
    case("nanmean", [NAN, NAN, 1.0, NAN], [2, 2], dims=[1])
    for op in ("prod",):
        case(op, m23, [2, 3], dims=[1])
        case(op, ints, [2, 3], dtype="int32", dims=[0])
        case(op, [1, 1, 0], [3], dtype="bool")
        case(op, [], [0, 2])
        case(op, [], [2, 0], dims=[1], keepdim=1)
        case(op, nanv, [2, 3], dims=[1])
    for op in ("amax", "amin"):
        case(op, m234, [2, 3, 4], dims=[0, 2])
        case(op, nanv, [2, 3], dims=[1])
        case(op, nanv, [2, 3], dims=[0], keepdim=1)
        case(op, ints, [2, 3], dtype="int16")
        case(op, [1, 0], [2], dtype="bool")
        case(op, [], [0, 3])
        case(op, [], [0, 3], dims=[1])
        case(op, [], [0, 3], dims=[0])
        case(op, [4.0], [])
        case(op, m23, [2, 3], dims=[1, 1])
    for op in ("max", "min"):
        case(op, nanv, [2, 3])
        case(op, ties, [2, 3])
        case(op, ints, [2, 3], dtype="int32")
        case(op, [], [0, 3])
    for op in ("max_dim", "min_dim"):
        case(op, ties, [2, 3], dim=1)
        case(op, ties, [3, 2], dim=0, keepdim=1)
        case(op, nanv, [2, 3], dim=1)
        case(op, nanv, [3, 2], dim=0)
        case(op, ints, [2, 3], dtype="int64", dim=-1)
        case(op, [1, 0, 1], [3], dtype="bool", dim=0)
        case(op, [], [0, 3], dim=0)
        case(op, [], [0, 3], dim=1)
        case(op, [3.0], [], dim=0)
        case(op, [3.0], [], dim=1)
    for op in ("argmax", "argmin"):
        case(op, ties, [2, 3])
        case(op, nanv, [2, 3])
        case(op, ints, [2, 3], dtype="int32")
        case(op, [], [0, 3])
    for op in ("argmax_dim", "argmin_dim"):
        case(op, ties, [2, 3], dim=1)
        case(op, ties, [3, 2], dim=0, keepdim=1)
        case(op, nanv, [3, 2], dim=0)
        case(op, [], [0, 3], dim=0)
        case(op, [], [0, 3], dim=1)
        case(op, [3.0], [], dim=0, keepdim=1)
    for op in ("var", "std", "var_mean", "std_mean"):
        case(op, m234, [2, 3, 4], dims=[0, 2])
        case(op, m234, [2, 3, 4], dims=[1], keepdim=1, correction=0)
        case(op, [1.0, 2.0, 4.0], [3], correction=2)
        case(op, [1.0, 2.0, 4.0], [3], correction=3)
        case(op, [1.0, 2.0, 4.0], [3], correction=5)
        case(op, [1.0, 1.0, 1.0], [3], correction=3)
        case(op, [1.0], [1])
        case(op, [], [0, 3], dims=[0])
        case(op, nanv, [2, 3], dims=[1])
        case(op, ints, [2, 3], dtype="int32", dims=[1])
        case(op, [1, 0], [2], dtype="bool")
        case(op, m23, [2, 3], dtype="float16", dims=[1])
        case(op, m23, [2, 3], dims=[0, 0])
        case(op, [5.0], [], dims=[0], correction=0)
    for vals, shape, a in ((infs, [2, 3], {"dims": [1]}), (m234, [2, 3, 4], {"dims": [0, 2]}),
                           (ints, [2, 3], {"dims": [1]}), ([], [0, 3], {"dims": [0]}), ([], [0, 3], {"dims": [1]}),
                           (nanv, [2, 3], {"dims": [1]}), ([1e4, 1e4 + 1.0], [2], {"dims": [0], "keepdim": 1})):
        dt = "int32" if vals is ints else "float32"
        case("logsumexp", vals, shape, dtype=dt, **a)
    for op in ("all", "any"):
        case(op, [1.0, 0.0, NAN, 2.0, 3.0, 4.0], [2, 3], dims=[1])
        case(op, [1, 0, 1, 1, 1, 1], [2, 3], dtype="uint8", dims=[1])
        case(op, [1, 0, 1, 1, 1, 1], [2, 3], dtype="uint8")
        case(op, ints, [2, 3], dtype="int32", dims=[0], keepdim=1)
        case(op, [1, 1, 0], [3], dtype="bool")
        case(op, [], [0, 3], dims=[0])
        case(op, [], [0, 3])
    case("count_nonzero", [1.0, 0.0, NAN, 0.0, -0.0, 4.0], [2, 3], dims=[1])
    case("count_nonzero", [1.0, 0.0, NAN, 0.0, -0.0, 4.0], [2, 3])
    case("count_nonzero", ints, [3, 2], dtype="int8", dims=[0, 1])
    case("count_nonzero", [], [0, 3], dims=[0])
    case("count_nonzero", m23, [2, 3], dims=[0, 0])
    for op in ("norm", "linalg_vector_norm"):
        for p in (2.0, 1.0, 3.0, 0.5, 0.0, INF, -INF, -1.0, -2.0):
            case(op, [3.0, 0.0, -4.0, 1.0, -1.5, 2.0], [2, 3], p=p, dims=[1])
        case(op, m234, [2, 3, 4], p=2.0, dims=[0, 2], keepdim=1)
        case(op, m23, [2, 3], p=2.0)
        case(op, m23, [2, 3], p=2.0, odtype="float64")
        case(op, m23, [2, 3], dtype="float16", p=2.0, odtype="float32")
        case(op, m23, [2, 3], dtype="float64", p=2.0, odtype="float32")
        case(op, m23, [2, 3], dtype="float16", p=2.0)
        case(op, m23, [2, 3], p=2.0, odtype="int32")
        case(op, ints, [2, 3], dtype="int32", p=2.0)
        for p in (2.0, 0.0, INF, -INF, -1.0):
            case(op, [], [0, 3], p=p)
            case(op, [], [0, 3], p=p, dims=[0])
        case(op, [NAN, 1.0, 2.0], [3], p=INF)
        case(op, [3.0], [], p=2.0, dims=[0])
    for op in ("cumsum", "cumprod"):
        case(op, m23, [2, 3], dim=1)
        case(op, m23, [2, 3], dim=0)
        case(op, ints, [2, 3], dtype="int32", dim=1)
        case(op, [1, 0, 1], [3], dtype="bool", dim=0)
        case(op, [200, 100, 3], [3], dtype="uint8", dim=0)
        case(op, m23, [2, 3], dim=1, odtype="float64")
        case(op, ints, [2, 3], dtype="int32", dim=1, odtype="float32")
        case(op, [3.0], [], dim=0)
        case(op, [3.0], [], dim=1)
        case(op, [], [0, 3], dim=0)
        case(op, nanv, [2, 3], dim=1)
        case(op, m23, [2, 3], dim=2)
    for op in ("cummax", "cummin"):
        case(op, [1.0, NAN, 3.0, NAN, 0.0, 5.0], [6], dim=0)
        case(op, [1.0, 3.0, 3.0, 2.0, 0.0, 0.0], [6], dim=0)
        case(op, [3.0, 1.0, 1.0, 2.0, 5.0, 1.0], [2, 3], dim=1)
        case(op, ties, [3, 2], dim=0)
        case(op, ints, [2, 3], dtype="int32", dim=1)
        case(op, [1, 0, 1], [3], dtype="bool", dim=0)
        case(op, [3.0], [], dim=0)
        case(op, [], [0, 3], dim=1)
        case(op, m23, [2, 3], dim=-3)
    for op in ("softmax", "log_softmax"):
        case(op, m234, [2, 3, 4], dim=1)
        case(op, m234, [2, 3, 4], dim=-1)
        case(op, infs, [2, 3], dim=1)
        case(op, [-INF, 0.0, 1000.0, 1001.0], [2, 2], dim=1)
        case(op, ints, [2, 3], dtype="int32", dim=1)
        case(op, m23, [2, 3], dim=1, odtype="float64")
        case(op, ints, [2, 3], dtype="int32", dim=1, odtype="float32")
        case(op, [3.0], [], dim=0)
        case(op, [], [0, 3], dim=1)
        case(op, m23, [2, 3], dim=2)
        case(op, nanv, [2, 3], dim=1)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "reductions.txt")
    with open(path, "w") as f:
        f.write("# generated by tests/golden/gen_reductions.py with torch %s\n" % torch.__version__)
        for line in LINES:
            f.write(line + "\n")
    print("wrote %d cases to %s" % (len(LINES), os.path.normpath(path)))


if __name__ == "__main__":
    main()
