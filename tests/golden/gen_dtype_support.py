#!/usr/bin/env python3
"""Which dtypes each op accepts on CPU in PyTorch, and the dtype of its result.

Writes tests/data/dtype_support.txt, read by tests/test_dtype_support.c. One line per
(op, input dtype):

    name;dtype;result            the call succeeded; result is the output's dtype
    name;dtype;!unimplemented    PyTorch has no kernel for that dtype ("not implemented
                                 for", "... on CPU"): ctorch may still accept it
    name;dtype;!refused          PyTorch refuses the dtype by definition (bool negation,
                                 bitwise ops on floats, ...): ctorch must refuse it too

Every tensor input of a call has the same dtype (mixed dtypes are the promotion
test's job); index, mask and condition inputs keep their own dtypes. The names are
ctorch's, and each maps to the same call in tests/test_dtype_support.c.

Run with a recent PyTorch (the file's header says which):
    python3 tests/golden/gen_dtype_support.py                 # CPU
    DEVICE=cuda python3 tests/golden/gen_dtype_support.py     # dtype_support_cuda.txt
"""
import os

import torch
import torch.nn.functional as F

DTYPES = [
    ("bool", torch.bool), ("uint8", torch.uint8), ("int8", torch.int8), ("int16", torch.int16),
    ("int32", torch.int32), ("int64", torch.int64), ("uint16", getattr(torch, "uint16", None)),
    ("uint32", getattr(torch, "uint32", None)), ("uint64", getattr(torch, "uint64", None)),
    ("float16", torch.float16), ("bfloat16", torch.bfloat16), ("float32", torch.float32),
    ("float64", torch.float64),
]
NAMES = {d: n for n, d in DTYPES if d is not None}


DEV = os.environ.get("DEVICE", "cpu")


def on(t):
    return t.to(DEV)


def vec(d):
    """[0, 1, 2] (bool: [False, True, True])."""
    return on(torch.tensor([0, 1, 2])).to(d)


def pos(d):
    """[1, 2, 3]: a divisor without zeros."""
    return on(torch.tensor([1, 2, 3])).to(d)


def mat(d):
    return on(torch.tensor([[0, 1, 2], [2, 1, 0]])).to(d)


def sq(d):
    return on(torch.tensor([[1, 0], [2, 1]])).to(d)


def img(d):
    """a (1, 1, 3, 3) image"""
    return on(torch.tensor([[[[0, 1, 2], [2, 1, 0], [1, 1, 1]]]])).to(d)


def ker(d):
    """a (1, 1, 2, 2) kernel"""
    return on(torch.tensor([[[[1, 0], [2, 1]]]])).to(d)


IDX = on(torch.tensor([1, 0]))
MASK = on(torch.tensor([True, False, True]))
COND = MASK

U = lambda f: lambda d: f(vec(d))
B = lambda f: lambda d: f(vec(d), pos(d))
R = lambda f: lambda d: f(mat(d))

OPS = [
    # unary
    *[(n, U(getattr(torch, n))) for n in (
        "abs neg sign sgn exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh "
        "cosh tanh asinh acosh atanh sigmoid erf erfc erfinv lgamma digamma floor ceil round trunc frac reciprocal "
        "relu logical_not bitwise_not isnan isinf isfinite nan_to_num square").split()],
    ("logit", U(torch.logit)),
    ("polygamma", U(lambda x: torch.polygamma(1, x))),
    ("round_decimals", U(lambda x: torch.round(x, decimals=1))),
    ("relu6", U(F.relu6)), ("leaky_relu", U(F.leaky_relu)), ("elu", U(F.elu)), ("selu", U(F.selu)),
    ("celu", U(F.celu)), ("gelu", U(F.gelu)), ("silu", U(F.silu)), ("mish", U(F.mish)),
    ("softplus", U(F.softplus)), ("hardtanh", U(F.hardtanh)), ("hardsigmoid", U(F.hardsigmoid)),
    ("hardswish", U(F.hardswish)),
    # binary, same dtype on both sides
    *[(n, B(getattr(torch, n))) for n in (
        "add sub mul div floor_divide remainder fmod pow atan2 hypot copysign maximum minimum fmax fmin "
        "eq ne lt le gt ge logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor "
        "bitwise_left_shift bitwise_right_shift clamp_min clamp_max").split()],
    ("div_trunc", B(lambda a, b: torch.div(a, b, rounding_mode="trunc"))),
    ("div_floor", B(lambda a, b: torch.div(a, b, rounding_mode="floor"))),
    ("add_scalar", U(lambda x: torch.add(x, 2))),
    ("mul_scalar_float", U(lambda x: torch.mul(x, 0.5))),
    # ternary
    ("where", lambda d: torch.where(COND, vec(d), pos(d))),
    ("clamp", lambda d: torch.clamp(vec(d), vec(d), pos(d))),
    ("clamp_scalar", U(lambda x: torch.clamp(x, 0, 1))),
    ("lerp", lambda d: torch.lerp(vec(d), pos(d), pos(d))),
    ("addcmul", lambda d: torch.addcmul(vec(d), vec(d), pos(d))),
    ("addcdiv", lambda d: torch.addcdiv(vec(d), vec(d), pos(d))),
    # reductions and scans
    *[(n, R(getattr(torch, n))) for n in (
        "sum nansum mean nanmean prod amax amin argmax argmin var std all any count_nonzero "
        "norm").split()],
    ("logsumexp", R(lambda x: torch.logsumexp(x, dim=1))),
    ("max", R(torch.max)), ("min", R(torch.min)),
    ("max_dim", R(lambda x: torch.max(x, dim=1).values)),
    ("var_mean", R(lambda x: torch.var_mean(x)[0])),
    ("linalg_vector_norm", R(torch.linalg.vector_norm)),
    ("cumsum", R(lambda x: torch.cumsum(x, 1))), ("cumprod", R(lambda x: torch.cumprod(x, 1))),
    ("cummax", R(lambda x: torch.cummax(x, 1).values)), ("cummin", R(lambda x: torch.cummin(x, 1).values)),
    ("softmax", R(lambda x: torch.softmax(x, 1))), ("log_softmax", R(lambda x: torch.log_softmax(x, 1))),
    # sorting
    ("sort", R(lambda x: torch.sort(x, dim=1, stable=True).values)),
    ("argsort", R(lambda x: torch.argsort(x, dim=1, stable=True))),
    ("topk", R(lambda x: torch.topk(x, 2, 1).values)),
    ("kthvalue", R(lambda x: torch.kthvalue(x, 2, 1).values)),
    ("unique", R(lambda x: torch.unique(x, sorted=True))),
    # linear algebra
    ("mm", lambda d: torch.mm(sq(d), sq(d))),
    ("bmm", lambda d: torch.bmm(sq(d)[None], sq(d)[None])),
    ("matmul", lambda d: torch.matmul(sq(d), vec(d)[:2])),
    ("dot", lambda d: torch.dot(vec(d), pos(d))),
    ("outer", lambda d: torch.outer(vec(d), pos(d))),
    ("addmm", lambda d: torch.addmm(sq(d), sq(d), sq(d))),
    # shape
    ("cat", lambda d: torch.cat([vec(d), pos(d)])),
    ("stack", lambda d: torch.stack([vec(d), pos(d)])),
    ("flip", R(lambda x: torch.flip(x, [1]))),
    ("roll", R(lambda x: torch.roll(x, 1, 1))),
    ("repeat", U(lambda x: x.repeat(2))),
    ("tril", R(torch.tril)), ("triu", R(torch.triu)),
    ("pad_constant", R(lambda x: F.pad(x, (1, 1)))),
    ("pad_reflect", R(lambda x: F.pad(x, (1, 1), mode="reflect"))),
    ("pad_replicate", R(lambda x: F.pad(x, (1, 1), mode="replicate"))),
    ("pad_circular", R(lambda x: F.pad(x[None], (1, 1), mode="circular")[0])),
    # indexing
    ("index_select", R(lambda x: torch.index_select(x, 1, IDX))),
    ("gather", R(lambda x: torch.gather(x, 1, IDX[None].expand(2, 2).contiguous()))),
    ("scatter", lambda d: torch.scatter(vec(d), 0, IDX, pos(d)[:2])),
    ("scatter_add", lambda d: torch.scatter_add(vec(d), 0, IDX, pos(d)[:2])),
    ("scatter_reduce_amax", lambda d: torch.scatter_reduce(vec(d), 0, IDX, pos(d)[:2], "amax")),
    ("index_add", lambda d: torch.index_add(vec(d), 0, IDX, pos(d)[:2])),
    ("index_copy", lambda d: torch.index_copy(vec(d), 0, IDX, pos(d)[:2])),
    ("index_put_accumulate", lambda d: torch.index_put(vec(d), (IDX,), pos(d)[:2], accumulate=True)),
    ("masked_fill", U(lambda x: torch.masked_fill(x, MASK, 1))),
    ("masked_select", U(lambda x: torch.masked_select(x, MASK))),
    ("masked_scatter", lambda d: torch.masked_scatter(vec(d), MASK, pos(d))),
    ("take", U(lambda x: torch.take(x, IDX))),
    ("nonzero", U(torch.nonzero)),
    ("embedding", lambda d: F.embedding(IDX, mat(d))),
    # neural-network functions: every float input (weights, biases, targets) in dtype d
    ("conv1d", lambda d: F.conv1d(img(d)[0, 0, :2], ker(d)[0], None)),
    ("conv2d", lambda d: F.conv2d(img(d), ker(d), pos(d)[:1])),
    ("conv_transpose2d", lambda d: F.conv_transpose2d(img(d), ker(d), None)),
    ("max_pool2d", lambda d: F.max_pool2d(img(d), 2)),
    ("avg_pool2d", lambda d: F.avg_pool2d(img(d), 2)),
    ("adaptive_avg_pool2d", lambda d: F.adaptive_avg_pool2d(img(d), 1)),
    ("batch_norm", lambda d: F.batch_norm(img(d), pos(d)[:1], pos(d)[:1], training=False)),
    ("layer_norm", R(lambda x: F.layer_norm(x, (3,)))),
    ("group_norm", lambda d: F.group_norm(img(d), 1)),
    ("rms_norm", R(lambda x: F.rms_norm(x, (3,)))),
    ("dropout_eval", R(lambda x: F.dropout(x, 0.5, training=False))),
    ("one_hot", U(lambda x: F.one_hot(x, 4))),
    ("sdpa", lambda d: F.scaled_dot_product_attention(mat(d)[None], mat(d)[None], mat(d)[None])),
    ("cross_entropy", R(lambda x: F.cross_entropy(x, IDX))),
    ("nll_loss", R(lambda x: F.nll_loss(x, IDX))),
    ("mse_loss", B(F.mse_loss)), ("l1_loss", B(F.l1_loss)), ("smooth_l1_loss", B(F.smooth_l1_loss)),
    ("huber_loss", B(F.huber_loss)),
    ("binary_cross_entropy", lambda d: F.binary_cross_entropy(vec(d) / 4, pos(d) / 4)),
    ("binary_cross_entropy_with_logits", B(F.binary_cross_entropy_with_logits)),
    ("kl_div", B(lambda a, b: F.kl_div(a, b, reduction="sum"))),
    ("linear", lambda d: F.linear(mat(d), sq(d)[:, :1].expand(2, 3).contiguous(), None)),
]


def classify(e):
    m = str(e)
    if "not implemented for" in m or "not supported for" in m or "Unsupported dtype" in m or "on CPU" in m:
        return "!unimplemented"
    return "!refused"


def main():
    lines = ["# Generated by tests/golden/gen_dtype_support.py from PyTorch %s on %s; do not edit."
             % (torch.__version__, DEV)]
    for name, fn in OPS:
        for dname, d in DTYPES:
            if d is None:
                continue
            try:
                r = fn(d)
                res = NAMES[r.dtype]
            except Exception as e:  # noqa: BLE001 - every refusal is a fact to record
                res = classify(e)
                if os.environ.get("VERBOSE"):
                    print(name, dname, res, str(e).splitlines()[0][:150])
            lines.append("%s;%s;%s" % (name, dname, res))
    name = "dtype_support.txt" if DEV == "cpu" else "dtype_support_%s.txt" % DEV
    out = os.environ.get("OUT_FILE") or os.path.join(os.path.dirname(__file__), "..", "data", name)
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", out, len(lines) - 1, "cases")


if __name__ == "__main__":
    main()
