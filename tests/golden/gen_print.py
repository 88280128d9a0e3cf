#!/usr/bin/python3
"""Generates tests/data/print_golden.txt: tensors and the repr PyTorch gives them.

Run with a Python that has a recent PyTorch (the committed file: 2.11):
    python3 tests/golden/gen_print.py > tests/data/print_golden.txt

Each case in the output file reads:

    case NAME
    opts PRECISION THRESHOLD EDGEITEMS LINEWIDTH SCI_MODE DEFAULT_DTYPE
    tensor DTYPE DEVICE REQUIRES_GRAD NDIM SIZE...
    strides STRIDE...                  (optional: values are then the storage)
    values N V...                      (or: arange N START STEP, value i = START + i*STEP)
    set INDEX VALUE                    (optional, any number: storage[INDEX] = VALUE)
    expect NLINES
    ...NLINES lines of repr(tensor)...

SCI_MODE is -1 (automatic), 0 or 1. Values are decimal text that parses back to the
exact element (floats as Python's repr of the double, "-nan" for a NaN with its sign
bit set); meta tensors have "values 0".
"""
import math
import sys

import torch

DTYPES = {
    "bool": torch.bool,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}

DEFAULT_OPTS = dict(precision=4, threshold=1000, edgeitems=3, linewidth=80, sci_mode=-1)

cases = []


def case(name, dtype, shape, values=None, arange=None, sets=(), strides=None, device="cpu",
         requires_grad=False, default_dtype="float32", **opts):
    cases.append(dict(name=name, dtype=dtype, shape=tuple(shape), values=values, arange=arange, sets=list(sets),
                      strides=strides, device=device, requires_grad=requires_grad, default_dtype=default_dtype,
                      opts={**DEFAULT_OPTS, **opts}))


def storage_numel(c):
    if c["strides"] is None:
        return math.prod(c["shape"])
    if math.prod(c["shape"]) == 0:
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(c["shape"], c["strides"]))


def storage_values(c):
    n = storage_numel(c)
    if c["arange"] is not None:
        start, step = c["arange"]
        vals = [float(start) + float(i) * float(step) for i in range(n)]
    else:
        vals = list(c["values"] or [])
        assert len(vals) == n, (c["name"], len(vals), n)
    for idx, v in c["sets"]:
        vals[idx] = v
    return vals


def build(c):
    dt = DTYPES[c["dtype"]]
    if c["device"] == "meta":
        t = torch.empty(c["shape"], dtype=dt, device="meta")
        stored = None
    else:
        vals = storage_values(c)
        if dt.is_floating_point:
            base = torch.tensor([float(v) for v in vals], dtype=torch.float64)
            stored = base.to(dt)
            if c["arange"] is not None:
                # C recomputes arange values in double: they must need no rounding.
                same = (stored.double() == base) | (torch.isnan(base) & torch.isnan(stored.double()))
                assert bool(same.all()), c["name"]
        else:
            base = torch.tensor([int(v) for v in vals], dtype=torch.int64)
            stored = base.to(dt)
            assert bool((stored.long() == base).all()), c["name"]
        if c["strides"] is None:
            t = stored.reshape(c["shape"])
        else:
            t = stored.as_strided(c["shape"], c["strides"])
    if c["requires_grad"]:
        t.requires_grad_()
    return t, stored


def fmt_value(v, floating):
    if not floating:
        return str(int(v))
    v = float(v)
    if math.isnan(v):
        return "-nan" if math.copysign(1.0, v) < 0 else "nan"
    return repr(v)


def emit(c, out):
    o = c["opts"]
    torch.set_printoptions(precision=o["precision"], threshold=o["threshold"], edgeitems=o["edgeitems"],
                           linewidth=o["linewidth"], sci_mode=None if o["sci_mode"] < 0 else bool(o["sci_mode"]))
    torch.set_default_dtype(DTYPES[c["default_dtype"]])
    try:
        t, stored = build(c)
        text = repr(t)
    finally:
        torch.set_default_dtype(torch.float32)
        torch.set_printoptions(profile="default", sci_mode=None)
    floating = DTYPES[c["dtype"]].is_floating_point
    out.append("case " + c["name"])
    out.append("opts %d %d %d %d %d %s" % (o["precision"], o["threshold"], o["edgeitems"], o["linewidth"],
                                           o["sci_mode"], c["default_dtype"]))
    out.append("tensor %s %s %d %d %s" % (c["dtype"], c["device"], int(c["requires_grad"]), len(c["shape"]),
                                         " ".join(str(s) for s in c["shape"])))
    if c["strides"] is not None:
        out.append("strides " + " ".join(str(s) for s in c["strides"]))
    if c["device"] == "meta":
        out.append("values 0")
    elif c["arange"] is not None:
        start, step = c["arange"]
        out.append("arange %d %s %s" % (storage_numel(c), fmt_value(start, True), fmt_value(step, True)))
        for idx, v in c["sets"]:
            out.append("set %d %s" % (idx, fmt_value(v, floating)))
    else:
        # The elements as stored (literals rounded to the dtype), so C needs no rounding.
        vals = stored.double().tolist() if floating else stored.long().tolist()
        out.append("values %d %s" % (len(vals), " ".join(fmt_value(v, floating) for v in vals)))
    lines = text.split("\n")
    out.append("expect %d" % len(lines))
    out.extend(lines)


nan, inf = float("nan"), float("inf")

# ---- every dtype, small shapes
case("f32_1d", "float32", [3], [1.5, 2.25, -3.125])
case("f32_1d_int_valued", "float32", [3], [1.0, 2.0, 3.0])
case("f32_2d_int_valued", "float32", [2, 3], [1, 2, 3, 4, 5, 6])
case("f32_2d_fixed", "float32", [2, 3], [0.5, -1.25, 10.0, 3.0, 0.125, -100.5])
case("f32_3d", "float32", [2, 2, 3], [i * 0.5 - 2.0 for i in range(12)])
case("f32_4d", "float32", [2, 1, 2, 2], [1, -2, 3, -4, 5, -6, 7, -8])
case("f32_8d", "float32", [1, 1, 1, 1, 1, 1, 2, 2], [0.25, 1, 2, 3])
case("f32_1x1", "float32", [1, 1], [7.0])
case("f32_1elem", "float32", [1], [0.1])
case("f32_0d", "float32", [], [3.5])
case("f32_0d_int_valued", "float32", [], [3.0])
case("f32_0d_nan", "float32", [], [nan])
case("f32_0d_neginf", "float32", [], [-inf])
case("f32_0d_negzero", "float32", [], [-0.0])
case("f32_0d_tiny", "float32", [], [1e-5])
case("f64_1d", "float64", [4], [1.0 / 3.0, 2.0 / 3.0, -1.0, 1e-3])
case("f64_0d", "float64", [], [2.5])
case("f64_2d_int_valued", "float64", [2, 2], [1, 20, 300, -4])
case("f16_1d", "float16", [4], [0.0999755859375, 65504.0, -2.0, 0.5])
case("f16_fixed", "float16", [3], [0.0999755859375, 1.5, -2.75])
case("f16_sci_small", "float16", [2], [5.960464477539063e-08, 1.0])
case("f16_nan_inf", "float16", [3], [nan, inf, -1.5])
case("bf16_1d", "bfloat16", [3], [0.10009765625, 1.0, -7.5])
case("bf16_big", "bfloat16", [2], [3.3895313892515355e+38, 1.0])
case("bf16_nan_inf", "bfloat16", [3], [-inf, nan, 2.0])
case("i64_1d", "int64", [5], [0, -1, 22, -333, 4444])
case("i64_extremes", "int64", [2], [9223372036854775807, -9223372036854775808])
case("i64_0d", "int64", [], [-42])
case("i32_2d", "int32", [2, 3], [1, -20, 300, 4, 5, -6])
case("i32_0d", "int32", [], [7])
case("i16_2d", "int16", [2, 2], [32767, -32768, 0, 1])
case("i8_1d", "int8", [4], [127, -128, 0, -1])
case("u8_1d", "uint8", [4], [0, 1, 128, 255])
case("u8_2d_wrap", "uint8", [2, 40], [(i * 7) % 256 for i in range(80)])
case("bool_1d", "bool", [3], [1, 0, 1])
case("bool_2d", "bool", [2, 2], [0, 0, 1, 0])
case("bool_0d", "bool", [], [1])

# ---- empty tensors
case("empty_f32_1d", "float32", [0], [])
case("empty_f32_0x3", "float32", [0, 3], [])
case("empty_i64_1d", "int64", [0], [])
case("empty_bool_2x0", "bool", [2, 0], [])
case("empty_f64_0x3", "float64", [0, 3], [])
case("empty_f16_3d", "float16", [1, 0, 2], [])

# ---- formatter modes
case("sci_tiny", "float32", [2], [1e-5, 1.0])
case("sci_huge", "float32", [2], [1e9, 1.5])
case("sci_ratio", "float32", [2], [0.5, 1000.5])
case("int_sci_ratio", "float32", [2], [1.0, 2000.0])
case("int_no_sci", "float32", [3], [1.0, 999.0, -5.0])
case("int_huge", "float64", [2], [1e10, 3.0])
case("nan_inf_mix", "float32", [4], [nan, inf, -inf, 1.5])
case("nan_inf_only", "float32", [2], [nan, inf])
case("nan_with_ints", "float32", [3], [1.0, nan, 3.0])
case("negative_nan", "float32", [2], [-nan, 1.0])
case("sci_with_nan_inf", "float32", [3], [1e-5, nan, -inf])
case("negzero_int", "float32", [2], [-0.0, 1.0])
case("negzero_fixed", "float32", [2], [-0.0, 0.5])
case("negzero_only", "float32", [2], [-0.0, 0.0])
case("all_zero", "float32", [3], [0, 0, 0])
case("tiny_f32", "float32", [2], [1e-30, 1.401298464324817e-45])
case("tiny_f64", "float64", [2], [1e-300, 5e-324])
case("huge_f64", "float64", [2], [1e300, -1.7976931348623157e308])
case("huge_f32", "float32", [2], [3.4028234663852886e+38, -1.0])
case("wide_fixed", "float32", [3], [12345.5, -0.25, 7.75])

case("sci_mixed_sign", "float32", [2], [-1e-5, 1e5])
case("int_sci_negative", "float32", [2], [-1.0, 1e9])
case("f16_0d", "float16", [], [0.333251953125])
case("bf16_0d", "bfloat16", [], [-2.0])
case("bool_3d", "bool", [2, 1, 2], [1, 0, 0, 1])

# ---- line wrapping
case("wrap_f32", "float32", [30], arange=(0.0, 1.5))
case("wrap_i64", "int64", [100], arange=(0, 1))
case("wrap_f64_suffix", "float64", [17], arange=(1000.25, 1.0))
case("suffix_newline", "float64", [8], [123456.5] * 8)
case("wrap_3d_rows", "float32", [2, 2, 25], arange=(-10.0, 0.125))

# ---- summarization
case("sum_1d_i64", "int64", [2000], arange=(0, 1))
case("sum_2d", "float32", [40, 50], arange=(0.0, 0.25))
case("sum_3d", "float32", [12, 12, 12], arange=(-3.0, 0.5))
case("sum_hidden_huge", "float32", [1200], arange=(100.0, 1.0), sets=[(600, float(2**66))])
case("sum_hidden_wide_int", "int64", [1200], arange=(0, 1), sets=[(600, -123456789)])
case("sum_hidden_fraction", "float32", [30, 40], arange=(100.0, 1.0), sets=[(600, 0.5)])
case("sum_f16_2d", "float16", [40, 40], arange=(0.0, 0.125))
case("sum_bool_3d", "bool", [11, 10, 10], [(i // 3) % 2 for i in range(1100)])
case("sum_tall", "float32", [1100, 1], arange=(0.0, 1.0))
case("sum_wide", "float32", [2, 600], arange=(0.5, 1.0))
case("sum_exact_threshold", "int32", [1000], arange=(0, 1))
case("sum_bool", "bool", [1001], [i % 2 for i in range(1001)])

# ---- print options
case("precision_2", "float32", [3], [1.12345, 2.5, -0.001953125], precision=2)
case("precision_0", "float32", [3], [1.5, 2.5, -0.75], precision=0)
case("precision_10", "float64", [2], [1.0 / 3.0, -2.0 / 7.0], precision=10)
case("threshold_5", "int64", [10], arange=(0, 1), threshold=5)
case("threshold_0_2d", "float32", [3, 3], arange=(0.0, 1.0), threshold=0, edgeitems=1)
case("edgeitems_1", "float32", [40, 30], arange=(0.0, 1.0), edgeitems=1)
case("edgeitems_1_small", "float32", [20, 20], arange=(0.0, 1.0), edgeitems=1)
case("edgeitems_2_3d", "int64", [5, 5, 50], arange=(0, 1), edgeitems=2)
case("edgeitems_0_1d", "int64", [10], arange=(0, 1), edgeitems=0, threshold=5)
case("linewidth_40", "float32", [20], arange=(0.0, 0.5), linewidth=40)
case("linewidth_10_2d", "float32", [2, 4], arange=(0.0, 1.0), linewidth=10)
case("linewidth_200", "int64", [60], arange=(0, 1), linewidth=200)
case("sci_on", "float32", [3], [1.5, 2.0, -3.25], sci_mode=1)
case("sci_on_zeros", "float32", [2], [0.0, 0.0], sci_mode=1)
case("sci_on_ints", "int64", [2], [1, 2], sci_mode=1)
case("sci_off_tiny", "float32", [2], [1e-5, 1.0], sci_mode=0)
case("sci_off_huge_ints", "float64", [2], [1e10, 1.0], sci_mode=0)
case("sci_on_0d", "float32", [], [1.5], sci_mode=1)
case("sci_on_precision_0", "float32", [2], [1.5, 250.0], sci_mode=1, precision=0)
case("linewidth_5", "int64", [4], [1, 2, 3, 4], linewidth=5)
case("sci_on_precision_1", "float64", [2], [123.456, 0.5], sci_mode=1, precision=1)

# ---- non-contiguous layouts
case("transposed", "float32", [4, 3], list(range(12)), strides=[1, 4])
case("strided_step2", "float32", [3], [1.5, 9, 2.5, 9, 3.5], strides=[2])
case("expanded", "int64", [3, 2], [5, 6], strides=[0, 1])
case("transposed_3d", "float64", [2, 3, 2], [i * 0.5 for i in range(12)], strides=[1, 2, 6])

# ---- devices, gradients, default dtype
case("meta_2x3", "float32", [2, 3], device="meta")
case("meta_i64_1d", "int64", [3], device="meta")
case("meta_0d_f64", "float64", [], device="meta")
case("meta_empty", "float32", [0, 4], device="meta")
case("requires_grad_1d", "float32", [2], [1.0, 2.5], requires_grad=True)
case("requires_grad_f64_2d", "float64", [2, 2], [1, 2, 3, 4], requires_grad=True)
case("requires_grad_0d", "float32", [], [1.0], requires_grad=True)
case("requires_grad_meta", "float16", [2], device="meta", requires_grad=True)
case("requires_grad_wrap", "float32", [15], arange=(0.5, 1000.0), requires_grad=True)
case("requires_grad_empty", "float32", [0], [], requires_grad=True)
case("requires_grad_wrap_f64", "float64", [3, 9], arange=(0.5, 1000.0), requires_grad=True)
case("default_f64_f32", "float32", [2], [1.5, 2.0], default_dtype="float64")
case("default_f64_f64", "float64", [2], [1.5, 2.0], default_dtype="float64")
case("default_f64_empty", "float64", [0], [], default_dtype="float64")
case("default_f64_meta", "float32", [1], device="meta", default_dtype="float64")

names = [c["name"] for c in cases]
assert len(names) == len(set(names))
out = ["# repr() of tensors as PyTorch %s prints them; generated by tests/golden/gen_print.py" % torch.__version__]
for c in cases:
    emit(c, out)
sys.stdout.write("\n".join(out) + "\n")
