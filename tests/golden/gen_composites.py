#!/usr/bin/env python3
"""Golden values of the composite ops (src/ops/composite.c) from PyTorch.

Writes tests/data/composites_golden.txt, read by tests/test_composites.c. One case per
line:

    name|in;in;...|out          out: a tensor, or ERR:<start of PyTorch's message>

where a tensor is dtype:shape:values (shape as 2x3, empty for 0-d; values comma-
separated, nan/inf/-inf). The name says which call (and its fixed arguments); each maps
to one adapter in tests/test_composites.c. Ops returning two tensors have one case per
output (name.values / name.indices).

Run with a recent PyTorch:  python3 tests/golden/gen_composites.py
"""
import math
import os

import torch
import torch.nn.functional as F
from golden_common import DTYPE_NAMES, number

torch.manual_seed(0)
nan, inf = math.nan, math.inf


def ten(t):
    shape = "x".join(str(s) for s in t.shape)
    return "%s:%s:%s" % (DTYPE_NAMES[t.dtype], shape, ",".join(number(x) for x in t.reshape(-1).tolist()))


lines = []


def case(name, fn, *inputs):
    head = name + "|" + ";".join(ten(t) for t in inputs) + "|"
    try:
        r = fn(*inputs)
        lines.append(head + ten(r))
    except Exception as e:  # noqa: BLE001 - a refusal is a golden value too
        lines.append(head + "ERR:" + str(e).splitlines()[0][:60].replace("|", "/"))


def T(v, d=torch.float64):
    return torch.tensor(v, dtype=d)


def R(*shape, d=torch.float64):
    return torch.randn(*shape, dtype=d)


SPECIAL_A = [-inf, inf, 1.0, nan, 0.0, -1000.0, 3.5, -2.0]
SPECIAL_B = [-inf, inf, 2.0, 1.0, 1e-10, 5.0, 3.5, -inf]
for d in (torch.float32, torch.float64):
    case("logaddexp", torch.logaddexp, T(SPECIAL_A, d), T(SPECIAL_B, d))
    case("logaddexp2", torch.logaddexp2, T(SPECIAL_A, d), T(SPECIAL_B, d))
case("logaddexp", torch.logaddexp, R(2, 3), R(3))
case("logaddexp", torch.logaddexp, T([1, 2], torch.int64), T([3, 4], torch.int64))
case("xlogy", torch.xlogy, T([0.0, 0.0, 1.0, 2.0, 0.5, -1.0, 0.0], torch.float32),
     T([nan, 0.0, 0.0, 3.0, -1.0, 2.0, inf], torch.float32))
case("xlogy", torch.xlogy, T([0, 1, 2], torch.int64), T([5, 2, 3], torch.int32))
case("sinc", torch.sinc, T([0.0, 0.5, -1.5, 1e-8, 2.0, 3.25, -inf, nan], torch.float32))
case("sinc", torch.sinc, T([0, 1, 3], torch.int32))
for op in ("deg2rad", "rad2deg"):
    case(op, getattr(torch, op), T([0.0, 90.0, -45.5, 3.0], torch.float32))
    case(op, getattr(torch, op), T([0, 180, -30], torch.int64))
    case(op, getattr(torch, op), T([True, False], torch.bool))
case("heaviside", torch.heaviside, T([-1.5, 0.0, -0.0, 2.0, nan], torch.float32), T([0.5], torch.float32))
case("heaviside", torch.heaviside, T([-1, 0, 3], torch.int64), T([7, 8, 9], torch.int64))
case("heaviside", torch.heaviside, T([-1.0, 0.0], torch.float32), T([7, 8], torch.int64))
case("signbit", torch.signbit, T([-0.0, 0.0, -1.0, nan, inf, -inf, 2.5], torch.float32))
case("signbit", torch.signbit, T([-3, 0, 4], torch.int16))
case("signbit", torch.signbit, T([0, 200], torch.uint8))
case("signbit", torch.signbit, T([True, False], torch.bool))
case("float_power", torch.float_power, T([1, 2, 3], torch.int64), T([2, 3, -1], torch.int64))
case("float_power", torch.float_power, T([1.5, -2.0, 4.0], torch.float32), T([0.5, 3.0, 0.5], torch.float32))

# activations
ACT = [-30.0, -2.0, -0.5, -0.25, 0.0, 0.25, 0.5, 3.0, 40.0, nan]
for d in (torch.float32, torch.float64):
    case("logsigmoid", F.logsigmoid, T(ACT, d))
    case("softsign", F.softsign, T(ACT, d))
    case("tanhshrink", F.tanhshrink, T(ACT, d))
    case("hardshrink", F.hardshrink, T(ACT, d))
    case("softshrink", F.softshrink, T(ACT, d))
    case("hardshrink_0.25", lambda x: F.hardshrink(x, 0.25), T(ACT, d))
    case("softshrink_0.25", lambda x: F.softshrink(x, 0.25), T(ACT, d))
case("logsigmoid", F.logsigmoid, T([1, 2], torch.int64))
case("softsign", F.softsign, T([1, -2], torch.int64))
case("tanhshrink", F.tanhshrink, T([1, -2], torch.int32))
case("hardshrink", F.hardshrink, T([1, -2], torch.int64))
case("softshrink_neg", lambda x: F.softshrink(x, -1.0), T([1.0, -2.0]))
case("glu", F.glu, R(2, 4))
case("glu_dim0", lambda x: F.glu(x, 0), R(4, 3))
case("glu", F.glu, R(2, 3))
case("prelu", F.prelu, R(2, 3), R(3))
case("prelu", F.prelu, R(2, 3, 2, 2), R(3))
case("prelu", F.prelu, R(2, 3), R(1))
case("prelu", F.prelu, R(4), R(1))
case("prelu", F.prelu, R(2, 3), R(2))

# products
case("mv", torch.mv, R(3, 4), R(4))
case("mv", torch.mv, T([[1, 2], [3, 4]], torch.int64), T([5, 6], torch.int64))
case("mv", torch.mv, R(3, 4), R(3))
case("mv", torch.mv, R(3), R(3))
case("addmv_b0.5_a2", lambda c, m, v: torch.addmv(c, m, v, beta=0.5, alpha=2), R(3), R(3, 4), R(4))
case("addmv_b0_a1", lambda c, m, v: torch.addmv(c, m, v, beta=0), T([nan, 1.0]), R(2, 3), R(3))
case("addr_b2_a0.5", lambda c, a, b: torch.addr(c, a, b, beta=2, alpha=0.5), R(3, 2), R(3), R(2))
case("addr_b1_a1", torch.addr, T([[1, 2], [3, 4]], torch.int64), T([1, 2], torch.int64), T([3, 4], torch.int64))
case("inner", torch.inner, R(2, 3), R(4, 3))
case("inner", torch.inner, R(3), R(3))
case("inner", torch.inner, R(2, 2, 3), R(3))
case("inner", torch.inner, T(2.5), R(2, 3))
case("inner", torch.inner, R(2, 3), R(2, 4))
case("vdot", torch.vdot, R(4), R(4))
case("vdot", torch.vdot, R(2, 2), R(4))
case("tensordot_1", lambda a, b: torch.tensordot(a, b, dims=1), R(2, 3), R(3, 4))
case("tensordot_2", lambda a, b: torch.tensordot(a, b, dims=2), R(2, 3, 4), R(3, 4, 5))
case("tensordot_10_01", lambda a, b: torch.tensordot(a, b, dims=([1, 0], [0, 1])), R(3, 4, 5), R(4, 3, 2))
case("tensordot_0", lambda a, b: torch.tensordot(a, b, dims=0), R(2), R(3))
case("tensordot_1", lambda a, b: torch.tensordot(a, b, dims=1), R(2, 3), R(4, 4))
case("kron", torch.kron, T([[1, 2], [3, 4]], torch.int64), T([[0, 1], [1, 0]], torch.int64))
case("kron", torch.kron, R(2), R(2, 3))
case("kron", torch.kron, R(2, 1, 3), R(3, 2))
case("linalg_cross_-1", lambda a, b: torch.linalg.cross(a, b), R(3), R(3))
case("linalg_cross_-1", lambda a, b: torch.linalg.cross(a, b), R(2, 3), R(1, 3))
case("linalg_cross_0", lambda a, b: torch.linalg.cross(a, b, dim=0), R(3, 2), R(3, 2))
case("linalg_cross_-1", lambda a, b: torch.linalg.cross(a, b), T([[1, 0, 0]], torch.int64), T([[0, 1, 0]], torch.int64))
case("linalg_cross_-1", lambda a, b: torch.linalg.cross(a, b), R(2, 4), R(2, 4))
for k in (0, 1, -2):
    case("diag_%d" % k, lambda x, k=k: torch.diag(x, k), T([1, 2, 3], torch.int64))
    case("diag_%d" % k, lambda x, k=k: torch.diag(x, k), R(3, 4))
case("diag_0", lambda x: torch.diag(x), R(2, 2, 2))
case("trace", torch.trace, T([[1, 2, 3], [4, 5, 6]], torch.int8))
case("trace", torch.trace, R(3, 3))
case("trace", torch.trace, R(3))

# order statistics
M = T([[3.0, 1.0, 2.0, 1.0, 5.0], [nan, 4.0, 1.0, nan, 0.0], [2.0, 2.0, 2.0, 2.0, 2.0], [nan, nan, nan, nan, nan]])
case("aminmax_1.min", lambda x: torch.aminmax(x, dim=1).min, R(3, 4))
case("aminmax_1.max", lambda x: torch.aminmax(x, dim=1).max, R(3, 4))
case("aminmax.min", lambda x: torch.aminmax(x).min, T([[3, -1], [7, 2]], torch.int32))
case("aminmax.max", lambda x: torch.aminmax(x).max, T([[3, -1], [7, 2]], torch.int32))
case("median", torch.median, M)
case("median", torch.median, T([3.0, 1.0, 2.0, 4.0]))
case("median", torch.median, T([5, 1, 4, 1, 3, 9], torch.int64))
case("nanmedian", torch.nanmedian, M)
case("nanmedian", torch.nanmedian, T([3.0, nan, 2.0, 4.0]))
for kd in (0, 1):
    case("median_1_%d.values" % kd, lambda x, kd=kd: torch.median(x, 1, bool(kd)).values, M)
    case("median_1_%d.indices" % kd, lambda x, kd=kd: torch.median(x, 1, bool(kd)).indices, M)
    case("nanmedian_1_%d.values" % kd, lambda x, kd=kd: torch.nanmedian(x, 1, bool(kd)).values, M)
    case("nanmedian_1_%d.indices" % kd, lambda x, kd=kd: torch.nanmedian(x, 1, bool(kd)).indices, M)
case("median_0_0.values", lambda x: torch.median(x, 0).values, T([[1, 1, 1, 2, 1], [2, 1, 2, 2, 0]], torch.int32))
case("median_0_0.indices", lambda x: torch.median(x, 0).indices, T([[1, 1, 1, 2, 1], [2, 1, 2, 2, 0]], torch.int32))
case("median_1_0.values", lambda x: torch.median(x, 1).values, T([[1, 1, 1, 2, 1], [5, 4, 3, 2, 1]], torch.int64))
case("median_1_0.indices", lambda x: torch.median(x, 1).indices, T([[2, 1, 2, 2], [0, 0, 1, 1]], torch.int64))
case("median", torch.median, T([True, False]))
case("msort", torch.msort, T([[3.0, nan], [1.0, 2.0], [2.0, -1.0]]))
Q = T([[1.0, 2.0, 3.0, 4.0, 10.0], [4.0, 3.0, 2.0, nan, 1.0], [0.5, -0.5, 7.0, 2.0, 2.0]])
for mode in ("linear", "lower", "higher", "midpoint", "nearest"):
    case("quantile_1_1_" + mode, lambda x, q, m=mode: torch.quantile(x, q, dim=1, keepdim=True, interpolation=m), Q,
         T([0.0, 0.125, 0.375, 0.5, 0.875, 1.0]))
    case("quantile_all_0_" + mode, lambda x, q, m=mode: torch.quantile(x, q, interpolation=m),
         T([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), T(0.3))
case("quantile_0_0_linear", lambda x, q: torch.quantile(x, q, dim=0), Q, T(0.5))
case("quantile_all_1_linear", lambda x, q: torch.quantile(x, q, keepdim=True), R(2, 3), T([0.25, 0.75]))
case("quantile_all_0_linear", lambda x, q: torch.quantile(x, q), R(5, d=torch.float32), T(0.4, torch.float32))
case("quantile_all_0_linear", lambda x, q: torch.quantile(x, q), T([1, 2, 3], torch.int64), T(0.5))
case("quantile_all_0_linear", lambda x, q: torch.quantile(x, q), R(4), T(1.5))
case("quantile_all_0_linear", lambda x, q: torch.quantile(x, q), R(4), T(0.5, torch.float32))
case("diff_1_-1", lambda x: torch.diff(x), T([1, 4, 9, 16], torch.int64))
case("diff_2_-1", lambda x: torch.diff(x, n=2), R(3, 5))
case("diff_1_0", lambda x: torch.diff(x, dim=0), R(3, 2))
case("diff_1_-1", lambda x: torch.diff(x), T([True, False, False, True]))
case("diff_1_-1", lambda x: torch.diff(x), T([5, 3, 200], torch.uint8))
case("diff_5_-1", lambda x: torch.diff(x, n=5), R(3))
case("diff_pre_app", lambda x, p, a: torch.diff(x, prepend=p, append=a), R(2, 3), R(2, 1), R(2, 2))
case("diff_1_-1", lambda x: torch.diff(x), T(3.0))
for args in ((4, 3, 0), (4, 3, -1), (3, 4, 1), (3, 3, 5), (0, 3, 0), (3, 3, -5)):
    n = "_".join(str(a) for a in args)
    case("tril_indices_" + n, lambda a=args: torch.tril_indices(*a))
    case("triu_indices_" + n, lambda a=args: torch.triu_indices(*a))
for p in (2.0, 1.0, 0.0, 3.0, inf):
    case("cdist_%s" % number(p), lambda a, b, p=p: torch.cdist(a, b, p=p), R(3, 4), R(2, 4))
case("cdist_2.0", lambda a, b: torch.cdist(a, b), R(2, 3, 4), R(2, 5, 4))
case("cdist_2.0", lambda a, b: torch.cdist(a, b), R(3, 4), R(2, 3))
case("cdist_-1.0", lambda a, b: torch.cdist(a, b, p=-1.0), R(3, 4), R(2, 4))

# binning
B = T([1.0, 3.0, 5.0, 7.0])
X = T([[0.0, 1.0, 3.5], [7.0, 9.0, nan]])
case("bucketize_left", lambda x, b: torch.bucketize(x, b), X, B)
case("bucketize_right", lambda x, b: torch.bucketize(x, b, right=True), X, B)
case("bucketize_left32", lambda x, b: torch.bucketize(x, b, out_int32=True), T([2, 5, 8], torch.int64),
     T([1, 5, 5, 9], torch.int64))
case("bucketize_left", lambda x, b: torch.bucketize(x, b), X, T([[1.0, 2.0]]))
case("searchsorted_left", lambda s, v: torch.searchsorted(s, v), B, X)
case("searchsorted_right", lambda s, v: torch.searchsorted(s, v, right=True), T([[1.0, 2, 3], [2, 4, 6]]),
     T([[2.0, 0.5], [5.0, 6.0]]))
case("searchsorted_left", lambda s, v: torch.searchsorted(s, v), T([[1.0, 2, 3], [2, 4, 6]]), T([[2.0, 0.5]]))
case("bincount_0", lambda x: torch.bincount(x), T([0, 2, 2, 5], torch.int64))
case("bincount_7", lambda x: torch.bincount(x, minlength=7), T([0, 2, 2, 5], torch.int32))
case("bincount_0", lambda x: torch.bincount(x), T([], torch.int64))
case("bincount_0", lambda x: torch.bincount(x), T([1, -1], torch.int64))
case("bincount_0", lambda x: torch.bincount(x), T([[1, 2]], torch.int64))
case("bincount_0", lambda x: torch.bincount(x), T([1.0, 2.0]))
case("bincount_w_0", lambda x, w: torch.bincount(x, w), T([0, 2, 2], torch.int64), T([0.5, 1.0, 2.0], torch.float32))
case("bincount_w_4", lambda x, w: torch.bincount(x, w, minlength=4), T([0, 2, 2], torch.int64), T([1, 2, 3], torch.int32))
case("bincount_w_0", lambda x, w: torch.bincount(x, w), T([0, 2, 2], torch.int64), T([0.5, 1.0]))
case("histc_4_0_4", lambda x: torch.histc(x, bins=4, min=0, max=4), T([1.0, 2.0, 1.0, 4.0, 2.5, -1.0, 9.0, nan], torch.float32))
case("histc_3_0_0", lambda x: torch.histc(x, bins=3), T([1.0, 2.0, 1.0, 4.0]))
case("histc_2_0_0", lambda x: torch.histc(x, bins=2), T([1.0, 1.0, 1.0]))
case("histc_5_-1_1", lambda x: torch.histc(x, bins=5, min=-1, max=1), R(40))
case("histc_7_0.1_0.9", lambda x: torch.histc(x, bins=7, min=0.1, max=0.9), torch.rand(50, dtype=torch.float64))
case("histc_3_0_0", lambda x: torch.histc(x, bins=3), T([1, 2], torch.int64))
case("histc_0_0_1", lambda x: torch.histc(x, bins=0, min=0, max=1), T([1.0]))
case("histc_3_2_1", lambda x: torch.histc(x, bins=3, min=2, max=1), T([1.0]))
case("logcumsumexp_0", lambda x: torch.logcumsumexp(x, 0), T([-1000.0, 0.0, 1000.0, 3.0, -inf, nan, 2.0]))
case("logcumsumexp_0", lambda x: torch.logcumsumexp(x, 0), T([-1e30, -1e30, 0.0, -inf, -inf], torch.float32))
case("logcumsumexp_1", lambda x: torch.logcumsumexp(x, 1), R(3, 9))
case("logcumsumexp_0", lambda x: torch.logcumsumexp(x, 0), R(5, 2, d=torch.float32))
case("logcumsumexp_0", lambda x: torch.logcumsumexp(x, 0), T([1, 2], torch.int64))

# nanquantile, arrangement, statistics
for mode in ("linear", "lower", "higher", "midpoint", "nearest"):
    case("nanquantile_1_0_" + mode, lambda x, q, m=mode: torch.nanquantile(x, q, dim=1, interpolation=m), Q,
         T([0.0, 0.25, 0.5, 0.9, 1.0]))
case("nanquantile_all_0_linear", lambda x, q: torch.nanquantile(x, q), Q, T(0.3))
case("nanquantile_1_1_linear", lambda x, q: torch.nanquantile(x, q, dim=1, keepdim=True),
     T([[nan, nan, nan], [1.0, nan, 3.0]]), T(0.5))
X4 = torch.arange(24.0, dtype=torch.float64).reshape(2, 3, 4)
for k in (1, 2, 3, -1, 4):
    case("rot90_%d_0_1" % k, lambda x, k=k: torch.rot90(x, k, [0, 1]), X4)
case("rot90_1_2_0", lambda x: torch.rot90(x, 1, [2, 0]), X4)
case("rot90_1_-1_1", lambda x: torch.rot90(x, 1, [-1, 1]), T([[1, 2], [3, 4]], torch.int64))
case("rot90_1_0_0", lambda x: torch.rot90(x, 1, [0, 0]), X4)
case("rot90_1_0_1", lambda x: torch.rot90(x, 1, [0, 1]), T([1.0, 2.0]))
for args in ((0, -2, -1), (1, -2, -1), (-1, 0, 2), (2, 1, 0), (0, 0, 0)):
    case("diag_embed_%d_%d_%d" % args, lambda x, a=args: torch.diag_embed(x, *a), R(2, 3))
case("diag_embed_0_-2_-1", lambda x: torch.diag_embed(x), T([1, 2, 3], torch.int32))
case("block_diag", lambda a, b, c: torch.block_diag(a, b, c), R(2, 2), T(3.0), T([4, 5], torch.int64))
case("block_diag", lambda a, b: torch.block_diag(a, b), T([[1, 2, 3]], torch.int32), T([[True], [False]]))
case("block_diag", lambda a: torch.block_diag(a), R(2, 2, 2))
case("cartesian_prod", lambda a, b: torch.cartesian_prod(a, b), T([1, 2], torch.int64), T([3, 4, 5], torch.int64))
case("cartesian_prod", lambda a, b, c: torch.cartesian_prod(a, b, c), R(2), R(1), R(3))
case("cartesian_prod", lambda a: torch.cartesian_prod(a), R(3))
case("cartesian_prod", lambda a, b: torch.cartesian_prod(a, b), R(2, 2), R(3))
case("cov_1", lambda x: torch.cov(x), R(3, 6))
case("cov_0", lambda x: torch.cov(x, correction=0), R(2, 5))
case("cov_1", lambda x: torch.cov(x), T([1.0, 2.0, 4.0]))
case("cov_1", lambda x: torch.cov(x), T([[1, 2, 3], [3, 5, 4]], torch.int64))
case("cov_1", lambda x: torch.cov(x), R(2, 2, 2))
case("corrcoef", torch.corrcoef, R(3, 6))
case("corrcoef", torch.corrcoef, T([[0.0, 1.0, 2.0], [2.0, 1.0, 0.5]], torch.float32))
case("corrcoef", torch.corrcoef, T([1.0, 2.0, 4.0]))

# xlog1py, entr, ldexp
for d in (torch.float32, torch.float64):
    case("xlog1py", torch.special.xlog1py, T([0.0, 0.0, 1.0, 2.0, 0.5, -1.0, 0.0, 3.0], d),
         T([-1.0, nan, 0.5, -1.0, 1e-10, 2.0, 5.0, inf], d))
    case("entr", torch.special.entr, T([0.0, -0.0, 1.0, 0.5, -1.0, nan, inf, 1e-300, 2.0], d))
    case("ldexp", torch.ldexp, T([1.0, -2.5, 0.0, inf, nan, 3.0], d), T([3, -2, 5, 1, 0, 1100], torch.int64))
case("xlog1py", torch.special.xlog1py, T([0, 1, 2], torch.int64), T([5, 2, 3], torch.int32))
case("xlog1py", torch.special.xlog1py, R(2, 3), R(3))
case("entr", torch.special.entr, T([0, 1, 2, -3], torch.int64))
case("ldexp", torch.ldexp, T([1, 2, 3], torch.int32), T([1, 2, 3], torch.int32))
case("ldexp", torch.ldexp, R(2, 3, d=torch.float32), T([0.5, 1.5, -1.0]))
case("ldexp", torch.ldexp, R(2, 3), T([1, 2], torch.int64))

# closeness, equality, lookup
CA = [1.0, inf, -inf, nan, 1e-8, 1.0, 0.0, 1e10, 2.0]
CB = [1.0 + 1e-6, inf, inf, nan, 0.0, 1.1, -0.0, 1.00001e10, -2.0]
for d in (torch.float32, torch.float64):
    for rtol, atol, en in ((1e-5, 1e-8, 0), (1e-5, 1e-8, 1), (0.0, 0.0, 1), (0.1, 0.0, 0), (0.0, 0.5, 0)):
        case("isclose_%g_%g_%d" % (rtol, atol, en), lambda a, b: torch.isclose(a, b, rtol, atol, bool(en)),
             T(CA, d), T(CB, d))
case("isclose_1e-05_1e-08_0", lambda a, b: torch.isclose(a, b), R(3, 1), R(4))
case("isclose_1e-05_1e-08_0", lambda a, b: torch.isclose(a, b), T([1, 5, 10, -3], torch.int64), T([1, 6, 10, -3], torch.int64))
case("isclose_0_1_0", lambda a, b: torch.isclose(a, b, 0.0, 1.0), T([1, 5, 10, -3], torch.int64), T([1, 6, 12, -4], torch.int64))
case("isclose_0.5_0_0", lambda a, b: torch.isclose(a, b, 0.5, 0.0), T([1, 5, 10], torch.int32), T([2, 6, 30], torch.int32))
case("isclose_1e-05_1e-08_0", lambda a, b: torch.isclose(a, b), T([True, False, True]), T([True, True, False]))
case("isclose_0.1_0.5_0", lambda a, b: torch.isclose(a, b, 0.1, 0.5), T([True, False, True]), T([True, True, False]))
case("isclose_1e-05_1e-08_0", lambda a, b: torch.isclose(a, b), R(3), R(3, d=torch.float32))
case("isclose_-1_0_0", lambda a, b: torch.isclose(a, b, -1.0, 0.0), R(3), R(3))
case("isclose_0_-1_0", lambda a, b: torch.isclose(a, b, 0.0, -1.0), R(3), R(3))
X = R(2, 3)
for rtol, atol, en in ((1e-5, 1e-8, 0), (1e-5, 1e-8, 1), (0.5, 0.0, 0)):
    case("allclose_%g_%g_%d" % (rtol, atol, en), lambda a, b: torch.tensor(torch.allclose(a, b, rtol, atol, bool(en))),
         X, X * (1 + 1e-7))
    case("allclose_%g_%g_%d" % (rtol, atol, en), lambda a, b: torch.tensor(torch.allclose(a, b, rtol, atol, bool(en))),
         T([1.0, nan, 3.0]), T([1.2, nan, 3.0]))
case("allclose_1e-05_1e-08_0", lambda a, b: torch.tensor(torch.allclose(a, b)), R(2, 3), R(3, 2))
EQ = [(X, X.clone()), (X, X + 1e-12), (R(2), R(3)), (T([1.0, nan]), T([1.0, nan])), (T([True, False]), T([True, False])),
      (T([1, 2], torch.int64), T([1, 2], torch.int64)), (T(2.0), T([2.0])), (T(3.0), T(3.0)), (R(0), R(0))]
for a_, b_ in EQ:
    case("equal", lambda a, b: torch.tensor(torch.equal(a, b)), a_, b_)
case("argwhere", torch.argwhere, T([[0.0, 1.5, 0.0], [-2.0, 0.0, nan]]))
case("argwhere", torch.argwhere, T([True, False, True, True]))
case("argwhere", torch.argwhere, T(3, torch.int64))
case("argwhere", torch.argwhere, T(0, torch.int64))
case("argwhere", torch.argwhere, R(0, 3))
X3 = R(2, 3, 4)
case("take_along_dim_2", lambda x, i: torch.take_along_dim(x, i, 2), X3, torch.argsort(X3, 2))
case("take_along_dim_-1", lambda x, i: torch.take_along_dim(x, i, -1), X3, T([[[3, 0]], [[1, 1]]], torch.int64))
case("take_along_dim_0", lambda x, i: torch.take_along_dim(x, i, 0), X3, T([[[1]], [[0]], [[1]]], torch.int64))
case("take_along_dim_1", lambda x, i: torch.take_along_dim(x, i, 1), T([[1, 2, 3], [4, 5, 6]], torch.int32),
     T([[2], [0]], torch.int64))
case("take_along_dim_none", lambda x, i: torch.take_along_dim(x, i), R(2, 3), T([0, 5, 2], torch.int64))
case("take_along_dim_none", lambda x, i: torch.take_along_dim(x, i), R(2, 3), T([[4], [1]], torch.int64))
case("take_along_dim_1", lambda x, i: torch.take_along_dim(x, i, 1), R(2, 3), T([[0]], torch.int32))
case("take_along_dim_1", lambda x, i: torch.take_along_dim(x, i, 1), R(2, 3), T([0, 1], torch.int64))
# an index out of range (3 along a dim of 3) is left out: PyTorch 2.11 returns a value for it
# without an error (x[:, 0]); ctorch refuses it (test_error_inputs)
R(2, 3)
case("take_along_dim_1", lambda x, i: torch.take_along_dim(x, i, 1), R(2, 3), T([[0], [1], [2]], torch.int64))
case("take_along_dim_3", lambda x, i: torch.take_along_dim(x, i, 3), R(2, 3), T([[0]], torch.int64))
for p in (2.0, 1.0, 0.0, 3.0, inf, -inf):
    case("dist_%g" % p, lambda a, b: torch.dist(a, b, p), R(3, 4), R(4))
case("dist_2", lambda a, b: torch.dist(a, b), R(3, d=torch.float32), R(3, d=torch.float32))
case("dist_2", lambda a, b: torch.dist(a, b), T([1, 2], torch.int64), T([3, 4], torch.int64))
case("dist_2", lambda a, b: torch.dist(a, b), R(3), R(2))

out = os.environ.get("OUT_FILE") or os.path.join(os.path.dirname(__file__), "..", "data", "composites_golden.txt")
with open(out, "w") as f:
    f.write("# Generated by tests/golden/gen_composites.py from PyTorch %s; do not edit.\n" % torch.__version__)
    f.write("\n".join(lines) + "\n")
print("wrote", out, len(lines), "cases")
