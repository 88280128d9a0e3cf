#!/usr/bin/python3
"""Golden values of the elementwise ops from PyTorch (CPU; the committed file: 2.11).

Writes tests/data/elementwise.txt, read by tests/test_ops_golden.c. Each line is
one case:

    name;dtype:v,v,...;dtype:v,...=>dtype:v,v,...      (inputs, then the result)
    name;dtype:v,...=>ERROR:message                      (PyTorch raised)

The C test knows each case by name (which function, which scalar arguments); the
inputs are 1-D tensors. Floats are written with repr (round-trips), NaN and
infinities as nan/inf/-inf.

Shifts are recorded only for counts inside the type's width: PyTorch 1.13 shifts by
the count modulo the width there (the x86 instruction's behaviour), while ctorch
follows the defined results of later PyTorch versions (see docs/ops.md).

Run with a recent PyTorch (the committed file: 2.11): python3 tests/golden/gen_elementwise.py
"""
import math
import os
import warnings

import torch
import torch.nn.functional as F
from golden_common import DTYPE_NAMES, number

warnings.simplefilter("ignore")

inf, nan = math.inf, math.nan


def ten(t):
    return DTYPE_NAMES[t.dtype] + ":" + ",".join(number(x) for x in t.reshape(-1).tolist())


lines = []


def case(name, fn, *inputs):
    tensors = [torch.tensor(v, dtype=d) for d, v in inputs]
    head = name + "".join(";" + ten(t) for t in tensors)
    try:
        r = fn(*tensors)
        lines.append(head + "=>" + ten(r))
    except (RuntimeError, ValueError) as e:
        lines.append(head + "=>ERROR:" + str(e).split("\n")[0])


i64, i32, i16, i8, u8, b = torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool
f16, bf16, f32, f64 = torch.float16, torch.bfloat16, torch.float32, torch.float64

# ---- remainder / fmod / floor_divide / div rounding modes: signs
ia, ib = [5, -5, 5, -5, 0, 7, -7, 9], [3, 3, -3, -3, 3, -2, 2, 9]
fa = [5.5, -5.5, 5.5, -5.5, -0.0, 0.0, 6.0, -6.0, 5.0, -5.0, 5.0, -5.0, 0.0, inf, nan, 1e-30]
fb = [3.0, 3.0, -3.0, -3.0, 3.0, -3.0, 3.0, -3.0, inf, inf, 0.0, -0.0, 0.0, 2.0, 1.0, 1e30]
for d in (i64, i32, i8):
    case("remainder_" + DTYPE_NAMES[d], torch.remainder, (d, ia), (d, ib))
    case("fmod_" + DTYPE_NAMES[d], torch.fmod, (d, ia), (d, ib))
    case("floor_divide_" + DTYPE_NAMES[d], torch.floor_divide, (d, ia), (d, ib))
    case("div_trunc_" + DTYPE_NAMES[d], lambda x, y: torch.div(x, y, rounding_mode="trunc"), (d, ia), (d, ib))
    case("div_floor_" + DTYPE_NAMES[d], lambda x, y: torch.div(x, y, rounding_mode="floor"), (d, ia), (d, ib))
    case("div_true_" + DTYPE_NAMES[d], torch.div, (d, ia), (d, ib))
case("remainder_uint8", torch.remainder, (u8, [5, 251, 7]), (u8, [3, 3, 250]))
case("floor_divide_uint8", torch.floor_divide, (u8, [5, 251, 7]), (u8, [3, 3, 250]))
for d in (f32, f64, f16, bf16):
    case("remainder_" + DTYPE_NAMES[d], torch.remainder, (d, fa), (d, fb))
    case("fmod_" + DTYPE_NAMES[d], torch.fmod, (d, fa), (d, fb))
    case("floor_divide_" + DTYPE_NAMES[d], torch.floor_divide, (d, fa), (d, fb))
    case("div_trunc_" + DTYPE_NAMES[d], lambda x, y: torch.div(x, y, rounding_mode="trunc"), (d, fa), (d, fb))
    case("div_floor_" + DTYPE_NAMES[d], lambda x, y: torch.div(x, y, rounding_mode="floor"), (d, fa), (d, fb))
case("int8_min_floor_divide", torch.floor_divide, (i8, [-128, -128, 127]), (i8, [-1, 1, -1]))
case("int8_min_remainder", torch.remainder, (i8, [-128, -128, 127]), (i8, [-1, 1, -1]))
case("int8_min_fmod", torch.fmod, (i8, [-128, -128, 127]), (i8, [-1, 1, -1]))
case("int8_min_div_trunc", lambda x, y: torch.div(x, y, rounding_mode="trunc"), (i8, [-128, -128, 127]),
     (i8, [-1, 1, -1]))
# ---- integer division by zero
for nm, fn in (("floor_divide", torch.floor_divide), ("remainder", torch.remainder), ("fmod", torch.fmod),
               ("div_trunc", lambda x, y: torch.div(x, y, rounding_mode="trunc")),
               ("div_floor", lambda x, y: torch.div(x, y, rounding_mode="floor"))):
    case("zero_" + nm, fn, (i64, [5, -5]), (i64, [2, 0]))
case("zero_scalar_u8", lambda x: torch.floor_divide(x, 0), (u8, [5, 7]))
case("zero_float_ok", torch.floor_divide, (f32, [5.0, -5.0, 0.0]), (f32, [0.0, 0.0, 0.0]))

# ---- pow
pa = [0.0, 0.0, -8.0, -8.0, 2.0, -2.0, inf, -inf, nan, 1.0, -0.0, -0.0, 0.0, -1.0, 4.0, 0.5]
pb = [0.0, -1.0, 1 / 3, 2.0, 0.5, 0.5, -1.0, 3.0, 0.0, nan, 0.5, -1.0, -2.0, inf, -0.5, 10.0]
for d in (f32, f64, f16, bf16):
    case("pow_" + DTYPE_NAMES[d], torch.pow, (d, pa), (d, pb))
case("pow_int64", torch.pow, (i64, [2, 3, 0, 0, -2, 1, -1, -1, 5, -3, 7]), (i64, [10, 3, 0, 1, 3, -1, -2, -3, -2, 3, 0]))
case("pow_uint8_wrap", torch.pow, (u8, [2, 3, 0]), (u8, [8, 200, 0]))
case("pow_int32_wrap", torch.pow, (i32, [3, -3, 7]), (i32, [40, 41, 30]))
ps = [-0.0, 0.0, -inf, inf, -2.0, 3.0, 0.3, nan]
for e in (2, 3, 0.5, -0.5, -1, -2, 2.5, 0):
    tag = str(e).replace("-", "m").replace(".", "p")
    for d in (f32, f64, bf16):
        case("pow_s%s_%s" % (tag, DTYPE_NAMES[d]), lambda x, e=e: torch.pow(x, e), (d, ps))
case("pow_scalar_int_neg", lambda x: torch.pow(x, -1), (i64, [2, 3]))
case("pow_scalar_int_float", lambda x: torch.pow(x, -1.0), (i64, [2, 4]))
case("pow_scalar_int_2", lambda x: torch.pow(x, 2), (i32, [3, -4, 46341]))
case("pow_scalar_bool_2", lambda x: torch.pow(x, 2), (b, [True, False]))
case("pow_tensor_int_neg", torch.pow, (i64, [2, 1, -1]), (i64, [-1, -5, -5]))

# ---- shifts (counts inside the width)
case("lshift_int32", torch.bitwise_left_shift, (i32, [1, -1, 5, -5, 1, 3]), (i32, [0, 1, 3, 30, 31, 30]))
case("rshift_int32", torch.bitwise_right_shift, (i32, [-8, 8, -1, 100, -2147483648]), (i32, [1, 2, 31, 3, 31]))
case("lshift_int8", torch.bitwise_left_shift, (i8, [100, -100, 1, 3]), (i8, [1, 1, 7, 6]))
case("rshift_int8", torch.bitwise_right_shift, (i8, [-100, 100, -1]), (i8, [7, 6, 3]))
case("lshift_uint8", torch.bitwise_left_shift, (u8, [200, 1, 255]), (u8, [1, 7, 4]))
case("rshift_uint8", torch.bitwise_right_shift, (u8, [200, 128, 255]), (u8, [7, 7, 0]))
case("lshift_int64", torch.bitwise_left_shift, (i64, [1, -3, 7]), (i64, [63, 62, 40]))
case("lshift_mixed", torch.bitwise_left_shift, (i8, [1, 2]), (i64, [1, 2]))

# ---- rounding
rv = [0.5, 1.5, 2.5, -0.5, -2.5, 2.4999999, 1e20, -0.0, 3.5, -3.5, 0.49999997, 4503599627370497.0]
for d in (f32, f64, bf16):
    case("round_" + DTYPE_NAMES[d], torch.round, (d, rv))
dv = [0.125, 0.135, 1.25, -1.35, 1234.5678, 0.005, -0.0, 2.675]
for d in (f32, f64, bf16):
    case("round_dec2_" + DTYPE_NAMES[d], lambda x: torch.round(x, decimals=2), (d, dv))
    case("round_decm2_" + DTYPE_NAMES[d], lambda x: torch.round(x, decimals=-2),
         (d, [125.0, 135.0, 1250.0, -1350.0, 1234.5678, 50.0, 150.0]))
case("round_dec400", lambda x: torch.round(x, decimals=400), (f32, [1.5, 0.0]))
case("round_decm400", lambda x: torch.round(x, decimals=-400), (f32, [1.5, 0.0]))
case("round_dec30_f32", lambda x: torch.round(x, decimals=30), (f32, [1.5, 2.5]))
case("round_dec_int", lambda x: torch.round(x, decimals=1), (i64, [1, 2]))
case("round_int", torch.round, (i32, [7, -7]))
case("floor_int", torch.floor, (u8, [7, 250]))
case("frac_f32", torch.frac, (f32, [-1.5, inf, 2.25, -0.0, nan, 1e10]))
case("trunc_f32", torch.trunc, (f32, [-1.5, inf, 2.75, -0.25, nan]))
case("ceil_f32", torch.ceil, (f32, [-1.5, -0.5, 2.25, nan]))
case("floor_f32", torch.floor, (f32, [-1.5, -0.5, 2.25, -inf]))

# ---- activations
av = [-30.0, -5.0, -3.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 3.0, 5.0, 19.0, 20.0, 21.0, 30.0, nan, inf, -inf]
# bfloat16 only for the piecewise-linear ones: PyTorch 1.13 evaluates some bfloat16
# activations step by step in bfloat16, ctorch in float32 with one final rounding.
for d in (f32, f64, bf16):
    n = DTYPE_NAMES[d]
    case("leaky_relu_" + n, lambda x: F.leaky_relu(x, 0.2), (d, av))
    case("hardtanh_" + n, lambda x: F.hardtanh(x, -2.0, 3.0), (d, av))
    case("relu6_" + n, F.relu6, (d, av))
for d in (f32, f64):
    n = DTYPE_NAMES[d]
    case("gelu_" + n, F.gelu, (d, av))
    case("gelu_tanh_" + n, lambda x: F.gelu(x, approximate="tanh"), (d, av))
    case("silu_" + n, F.silu, (d, av))
    case("softplus_" + n, F.softplus, (d, av))
    case("softplus_b2_" + n, lambda x: F.softplus(x, beta=2, threshold=20), (d, av))
    case("softplus_bm2_" + n, lambda x: F.softplus(x, beta=-2, threshold=20), (d, av))
    case("elu_" + n, lambda x: torch.ops.aten.elu(x, 1.5, 2.0, 3.0), (d, av))
    case("selu_" + n, F.selu, (d, av))
    case("celu_" + n, lambda x: F.celu(x, alpha=0.5), (d, av))
    case("hardsigmoid_" + n, F.hardsigmoid, (d, av))
    case("hardswish_" + n, F.hardswish, (d, av))
    case("mish_" + n, F.mish, (d, av))
case("hardtanh_i8_limits", lambda x: F.hardtanh(x, -1.5, 1.5), (i8, [-3, -1, 0, 1, 2]))
case("hardtanh_u8_neg", F.hardtanh, (u8, [1, 2]))
case("hardtanh_bool", F.hardtanh, (b, [True]))
case("hardtanh_swapped", lambda x: F.hardtanh(x, 2.0, 1.0), (f32, [0.0, 1.5, 3.0]))
case("relu6_uint8", F.relu6, (u8, [0, 5, 7, 255]))
case("celu_zero", lambda x: F.celu(x, alpha=0.0), (f32, [1.0]))
case("gelu_int", F.gelu, (i64, [1]))

# ---- logit, erfinv and friends
lv = [0.0, 0.3, 1.0, 1.2, -0.1, nan, 0.5, 1e-8]
for d in (f32, f64):
    n = DTYPE_NAMES[d]
    case("logit_" + n, torch.logit, (d, lv))
    case("logit_eps_" + n, lambda x: torch.logit(x, eps=0.1), (d, lv))

# eps > 0.5 (an empty clamp range): PyTorch's float64 kernel clamps max-first, its
# float32 kernel (and ctorch) min-first; only float32 is recorded.
case("logit_eps6_float32", lambda x: torch.logit(x, eps=0.6), (f32, lv))
# erfinv: PyTorch's values where they are accurate; near +-1 its float64 kernel loses
# digits (Newton steps on erf cancel), so the tails are checked against mpmath.
ev = [-1.0, 1.0, 0.0, -0.0, 0.5, -0.5, 1.5, nan, 1e-300, 1e-10, 0.1, 0.25, 0.7, 0.9, 5e-324]
case("erfinv_float64", torch.erfinv, (f64, ev))
case("erfinv_float32", torch.erfinv, (f32, ev))
try:
    import mpmath
    mpmath.mp.dps = 50
    tails = [0.99, 0.999999, 1 - 1e-10, 1 - 1e-15, -0.999999999999, 1 - 2**-53, 0.5 + 2**-40, 1e-5]
    for d in (f64, f32):
        xs = torch.tensor(tails, dtype=d)
        ref = torch.tensor([float(mpmath.erfinv(mpmath.mpf(v))) for v in xs.tolist()], dtype=d)
        lines.append("erfinv_mp_%s;%s=>%s" % (DTYPE_NAMES[d], ten(xs), ten(ref)))
except ImportError:
    pass
case("erfinv_int", torch.erfinv, (i64, [0, 1, -1]))
case("erf_float64", torch.erf, (f64, [-3.0, -0.5, 0.0, 1e-5, 2.0, 6.0]))
case("erfc_float64", torch.erfc, (f64, [-3.0, -0.5, 0.0, 1e-5, 2.0, 6.0, 27.0]))
case("expm1_float64", torch.expm1, (f64, [-1e-10, 0.0, 1e-10, 1.0, 710.0]))
case("log1p_float64", torch.log1p, (f64, [-1.0, -2.0, 1e-10, 0.0, 1.0]))

# ---- nan_to_num
nv = [nan, inf, -inf, 1.0, -0.0]
for d in (f32, f64, f16, bf16):
    case("nan_to_num_" + DTYPE_NAMES[d], torch.nan_to_num, (d, nv))
case("nan_to_num_args_f64", lambda x: torch.nan_to_num(x, 1.5, 2.0, -3.0), (f64, nv))
case("nan_to_num_args_f16", lambda x: torch.nan_to_num(x, 1e6, 1e6, -1e6), (f16, nv))
case("nan_to_num_posinf_only", lambda x: torch.nan_to_num(x, posinf=7.0), (f32, nv))
case("nan_to_num_int", lambda x: torch.nan_to_num(x, 1.5, 2.0, -3.0), (i64, [1, 2]))

# ---- clamp
cv = [1.0, nan, 3.0, -1.0, 0.5]
case("clamp_scalar_f32", lambda x: torch.clamp(x, 0.0, 2.0), (f32, cv))
case("clamp_nan_min", lambda x: torch.clamp(x, nan, 2.0), (f32, cv))
case("clamp_nan_max", lambda x: torch.clamp(x, 0.0, nan), (f32, cv))
case("clamp_min_only", lambda x: torch.clamp(x, min=0.75), (f32, cv))
case("clamp_max_only", lambda x: torch.clamp(x, max=0.75), (f32, cv))
case("clamp_swapped", lambda x: torch.clamp(x, 2, 1), (i64, [0, 1, 2, 3]))
case("clamp_int_float", lambda x: torch.clamp(x, 0.5, 2.5), (i64, [0, 1, 2, 3]))
case("clamp_bool_int", lambda x: torch.clamp(x, 0, 0), (b, [True, False]))
case("clamp_int8_overflow", lambda x: torch.clamp(x, 300, 400), (i8, [1]))
case("clamp_uint8_minus1", lambda x: torch.clamp_min(x, -1), (u8, [1, 2]))
case("clamp_none", lambda x: torch.clamp(x), (f32, [1.0]))
case("clamp_tensor", torch.clamp, (f32, cv), (f32, [0.0, 0.0, nan, 0.0, 1.0]), (f32, [2.0, 2.0, 2.0, nan, 0.0]))
case("clamp_tensor_int", torch.clamp, (i64, [0, 5, 9]), (i64, [1, 1, 1]), (f32, [8.5, 8.5, 8.5]))
case("clamp_min_tensor_nan", torch.clamp_min, (f32, cv), (f32, [nan, 0.0, 0.0, 0.0, 0.0]))
case("clamp_max_tensor", torch.clamp_max, (f32, cv), (i64, [0, 0, 2, 2, 2]))
case("clamp_min_scalar_nan", lambda x: torch.clamp_min(x, nan), (f32, cv))
case("clamp_min_scalar_float_on_int", lambda x: torch.clamp_min(x, 1.5), (i32, [1, 2]))

# ---- where
cond = [True, False, True]
case("where_int_float_scalar", lambda c, x: torch.where(c, x, 2.5), (b, cond), (i32, [1, 2, 3]))
case("where_scalars_int_float", lambda c: torch.where(c, 1, 2.5), (b, cond))
case("where_scalars_int", lambda c: torch.where(c, 1, 2), (b, cond))
case("where_u8_i8", torch.where, (b, cond), (u8, [1, 2, 3]), (i8, [-1, -2, -3]))
case("where_int32_0d_int64", lambda c, x: torch.where(c, x, torch.tensor(7)), (b, cond), (i32, [1, 2, 3]))
case("where_int32_0d_f64", lambda c, x: torch.where(c, x, torch.tensor(7.5, dtype=f64)), (b, cond),
     (i32, [1, 2, 3]))
case("where_uint8_cond", torch.where, (u8, [1, 0, 2]), (f32, [1.0, 2.0, 3.0]), (f32, [-1.0, -2.0, -3.0]))
case("where_int_cond", torch.where, (i64, [1, 0, 2]), (f32, [1.0, 2.0, 3.0]), (f32, [-1.0, -2.0, -3.0]))
case("where_bool_values", torch.where, (b, cond), (b, [False, False, False]), (b, [True, True, True]))

# ---- misc
case("sign_uint8", torch.sign, (u8, [0, 1, 255]))
case("sign_float32", torch.sign, (f32, [-2.0, nan, 0.0, -0.0, inf, 3.0]))
case("sgn_float64", torch.sgn, (f64, [-2.0, nan, 0.0, -0.0, inf, 3.0]))
case("sign_bool", torch.sign, (b, [True, False]))
case("bitwise_not_bool", torch.bitwise_not, (b, [True, False]))
case("bitwise_not_uint8", torch.bitwise_not, (u8, [0, 200]))
case("bitwise_not_float", torch.bitwise_not, (f32, [1.0]))
case("isnan_int", torch.isnan, (i64, [1, 2]))
case("isnan_f16", torch.isnan, (f16, [nan, inf, 1.0]))
case("isinf_bf16", torch.isinf, (bf16, [nan, inf, -inf, 1.0]))
case("isfinite_f64", torch.isfinite, (f64, [nan, inf, -inf, 1.0]))
case("isfinite_int", torch.isfinite, (i32, [1]))
case("logical_not_float", torch.logical_not, (f32, [0.0, -0.0, nan, 2.0]))
case("logical_xor_nan", torch.logical_xor, (f32, [nan, 0.0, 1.0]), (f32, [0.5, 0.0, 0.0]))
case("logical_and_mixed", torch.logical_and, (i64, [1, 2, 0]), (f32, [0.5, 0.0, 1.0]))
case("square_bool", torch.square, (b, [True, False]))
case("square_uint8", torch.square, (u8, [200, 3]))
case("copysign_int", torch.copysign, (i64, [1, 2, 3]), (f32, [-0.0, 0.0, -1.0]))
case("copysign_scalar", lambda x: torch.copysign(x, -1), (i64, [1, 2]))
case("atan2_mixed", torch.atan2, (i64, [1, -2, 0]), (f64, [1.0, -2.0, -0.0]))
case("hypot_f32", torch.hypot, (f32, [3.0, inf, nan, 1e30]), (f32, [4.0, nan, inf, 1e30]))
case("hypot_int", torch.hypot, (i64, [3]), (i64, [4]))
case("fmax_nan", torch.fmax, (f32, [nan, 1.0, nan]), (f32, [2.0, nan, nan]))
case("fmin_nan", torch.fmin, (f32, [nan, 1.0, nan]), (f32, [2.0, nan, nan]))
case("bitwise_and_scalar_wrap", lambda x: torch.bitwise_and(x, 300), (u8, [44, 2]))
case("bitwise_and_bool_uint8", torch.bitwise_and, (u8, [1, 2]), (b, [True, True]))
case("bitwise_or_float", torch.bitwise_or, (f32, [1.0]), (f32, [1.0]))
case("lerp_scalar_f32", lambda x, y: torch.lerp(x, y, 0.3), (f32, [1.0, 2.0, -5.0, 1e30]), (f32, [3.0, 4.0, 5.0, -1e30]))
case("lerp_scalar_w07_f32", lambda x, y: torch.lerp(x, y, 0.7), (f32, [1.0, 2.0, -5.0]), (f32, [3.0, 4.0, 5.0]))
case("lerp_tensor_f64", torch.lerp, (f64, [1.0, 2.0, -5.0]), (f64, [3.0, 4.0, 5.0]), (f64, [0.0, 1.0, 0.5]))
case("lerp_dtype_mismatch", lambda x, y: torch.lerp(x, y, 0.5), (f32, [1.0]), (f64, [1.0]))
case("lerp_weight_mismatch", torch.lerp, (f32, [1.0]), (f32, [1.0]), (f64, [0.5]))
case("addcmul_int_value", lambda x, y, z: torch.addcmul(x, y, z, value=3), (i64, [1, 2]), (i64, [1, 2]), (i64, [3, 4]))
case("addcmul_f32", lambda x, y, z: torch.addcmul(x, y, z, value=0.1), (f32, [1.0, 2.0]), (f32, [0.3, 2.0]),
     (f32, [3.0, 0.7]))
case("addcdiv_f32", lambda x, y, z: torch.addcdiv(x, y, z, value=0.1), (f32, [1.0, 2.0, 1.0]),
     (f32, [0.3, 2.0, 1.0]), (f32, [3.0, 0.7, 0.0]))
case("addcdiv_int", lambda x, y, z: torch.addcdiv(x, y, z), (i64, [1]), (i64, [1]), (i64, [1]))
case("addcdiv_mixed", lambda x, y, z: torch.addcdiv(x, y, z, value=2), (i64, [1, 2]), (f32, [1.0, 2.0]),
     (i64, [3, 4]))

# ---- the gamma family: PyTorch's values at special points; polygamma also against
# mpmath, since PyTorch's trigamma keeps about 9 digits.
gv = [0.0, -0.0, 1.0, 2.0, 0.5, -0.5, -1.0, -2.5, 1e-300, 1e10, 171.5, inf, -inf, nan, 3.5, 1e-8, 7.3, -10.25]
for d in (f64, f32):
    case("lgamma_" + DTYPE_NAMES[d], torch.lgamma, (d, gv))
    case("digamma_" + DTYPE_NAMES[d], torch.digamma, (d, gv))
for n in (1, 2, 3):
    case("polygamma%d_float64" % n, lambda x: torch.polygamma(n, x), (f64, [0.0, -3.0, nan, -inf]))
case("polygamma2_float32", lambda x: torch.polygamma(2, x), (f32, [0.0, -3.0, nan, 1.0, 2.5]))
case("polygamma1_int", lambda x: torch.polygamma(1, x), (i64, [1, 2, 3]))
case("lgamma_int", torch.lgamma, (i32, [1, 2, 3, 0, -1]))
case("digamma_bool", torch.digamma, (b, [True, False]))
case("polygammam1", lambda x: torch.polygamma(-1, x), (f64, [1.0]))
try:
    import mpmath
    mpmath.mp.dps = 40
    pv = [1.0, 0.5, -0.5, 2.5, 1e-3, 30.0, 1e6, -10.25, -99999.5, 7.3, 0.1, -0.001]
    for n in (0, 1, 2, 3, 6):
        xs = torch.tensor(pv, dtype=f64)
        ref = torch.tensor([float(mpmath.polygamma(n, mpmath.mpf(v))) for v in pv], dtype=f64)
        lines.append("polygamma%d_mp_float64;%s=>%s" % (n, ten(xs), ten(ref)))
except ImportError:
    pass

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "elementwise.txt")
with open(out, "w") as f:
    f.write("# Generated by tests/golden/gen_elementwise.py from PyTorch %s; do not edit.\n" % torch.__version__)
    for line in lines:
        f.write(line + "\n")
print("wrote %d cases to %s" % (len(lines), os.path.normpath(out)))
