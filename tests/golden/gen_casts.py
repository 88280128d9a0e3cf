#!/usr/bin/python3
"""Generates tests/data/dtype_casts.txt: PyTorch's dtype conversions, bit-exact.

Run with the Python that has PyTorch 1.13 (x86-64 CPU build):
    /usr/bin/python3 tests/golden/gen_casts.py > tests/data/dtype_casts.txt

Every value is written as the bit pattern of one element, in hex, most significant
digit first, 2 digits per byte of the dtype (float32 1.0 is 3f800000).

Lines:
  D name size is_floating is_signed origin
      origin "torch": size and flags from torch.dtype (itemsize, is_floating_point,
      is_signed); "derived": PyTorch 1.13 has no such dtype (uint16, uint32, uint64),
      the row follows the C type of that name.
  A name canonical     torch.<name> is the dtype <canonical>; canonical "-" means a
                       PyTorch dtype that ctorch does not have (complex, quantized).
  C src srcbits c0 ... c12
      src.to(dst) for the 13 dtypes in the D order. Each cell is a flag and the bits:
        =bits  PyTorch 1.13 on x86-64, the same for a contiguous tensor of 67
               copies (vector loop and scalar tail), a strided view and a
               broadcasting copy_.
        ~bits  derived from documented semantics because PyTorch 1.13 lacks the
               uint16/uint32/uint64 dtype (see derive() below): C's integer
               conversion (modulo 2^N), truncation toward zero for floats in range,
               and PyTorch's own int64 and float32 rules for the value otherwise.
        !bits/alts  C leaves the result undefined and PyTorch either has no such
               dtype or gives layout-dependent answers (alts lists PyTorch's
               distinct results, "-" when it has none). bits is ctorch's documented
               rule (Note [Casts] in src/core/copy.c); the test asserts it and lists
               the case as a documented departure.
  S name count block     a sweep of count inputs (inputs defined below, rebuilt by the
                         test); followed by count/block lines
  H hash                 FNV-1a 64 over the little-endian bytes of one block's outputs
  T kind in out          a single tricky case (kinds h2f, f2h, f2bf, bf2f)

Sweeps (computed per element, through strided views: c10's scalar conversions):
  h2f   half bits h = 0..65535 -> float32 bits
  bf2f  bfloat16 bits b = 0..65535 -> float32 bits
  f2h   float32 bits (i << 13) | low, i = 0..2^19-1, low in LOW13 -> half bits
  f2hs  float32 values s * (k + 0.5) * 2^-24 and their float neighbours below and
        above, k = 0..4095, s = +1, -1 (half's subnormal ties) -> half bits
  f2bf  float32 bits (i << 16) | low, i = 0..65535, low in LOW16 -> bfloat16 bits
"""
import math
import struct
import sys

import numpy as np
import torch

assert torch.__version__.startswith("1.13"), torch.__version__

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
         "float16", "bfloat16", "float32", "float64"]
SIZE = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2,
        "uint32": 4, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
TORCH = {n: getattr(torch, n) for n in NAMES if hasattr(torch, n)}
FLOATS = ["float16", "bfloat16", "float32", "float64"]
BITS_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
UINT_WIDTH = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
INT_WIDTH = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
out = []


def hexbits(name, bits):
    return "%0*x" % (2 * SIZE[name], bits & ((1 << (8 * SIZE[name])) - 1))


def to_bits(t):
    """Bit patterns of a 1-d tensor, as non-negative Python ints."""
    size = t.element_size()
    mask = (1 << (8 * size)) - 1
    return [v & mask for v in t.contiguous().view(BITS_VIEW[size]).tolist()]


def from_bits(name, bits):
    size = SIZE[name]
    signed = [b - (1 << (8 * size)) if size > 1 and b >> (8 * size - 1) else b for b in bits]
    return torch.tensor(signed, dtype=BITS_VIEW[size]).view(TORCH[name])


# ------------------------------------------------------------------ source values

BASE_FLOATS = [
    0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, -0.5, 0.9999, -0.9999,
    127.0, -128.0, 128.0, -129.0, 255.0, 255.9, 256.0, -256.0, 32767.0, -32768.0, 32768.0,
    -32769.0, 65535.0, 65536.0, 70000.0, -70000.0, 2.0**31 - 1, -2.0**31, 2.0**31, -2.0**31 - 1,
    2.0**32 - 1, 2.0**32, 2.0**32 + 5, -(2.0**32) - 5, 3000000001.0, -3000000001.0,
    2.0**63 - 1024, 2.0**63, -2.0**63, -2.0**63 - 2048, 2.0**64 - 2048, 2.0**64, 1e20, -1e20,
    65504.0, 65520.0, 65519.99, -65520.0, 1e-8, 6e-8, 2.0**-24, 2.0**-25, 3 * 2.0**-26,
    2.0**-14, 2.0**-14 - 2.0**-25,
    1 + 2.0**-8, 1 + 3 * 2.0**-8, 1 + 2.0**-8 + 2.0**-20, 1 + 2.0**-8 - 2.0**-20,
    -(1 + 3 * 2.0**-8), 1 + 2.0**-11, 1 + 3 * 2.0**-11, 2049.0, 2051.0, 16777217.0,
    3.4028234663852886e38, -3.4028234663852886e38, 1e38 * 10, 1e-45, 1e-40,
    math.nan, -math.nan, math.inf, -math.inf,
]
BASE_INTS = [
    0, 1, -1, 2, 127, -128, 128, -129, 255, 256, -256, 32767, -32768, 32768, -32769, 65535, 65536,
    2049, 2051, 65519, 65520, 2**24 + 1, 2**24 + 3, 2**31 - 1, -2**31, 2**31, 2**32 - 1, 2**32,
    2**53 + 1, 2**63 - 1, -2**63, 2**63 - 1025, 2**64 - 1, 2**63, 2**63 + 1025, 2**64 - 2**39,
]


def float_sources(name):
    t = torch.tensor(BASE_FLOATS, dtype=torch.float64).to(TORCH[name])
    bits = to_bits(t)
    # NaN payloads and signalling NaNs go in by bit pattern.
    extra = {"float16": [0x7c01, 0xfd00, 0x7e00], "bfloat16": [0x7f81, 0xffc1, 0x7fc0],
             "float32": [0x7f800001, 0xffc00001, 0x7fc00000], "float64": [0x7ff0000000000001,
                                                                        0xfff8000000000001]}[name]
    return list(dict.fromkeys(bits + extra))


def int_sources(name):
    if name == "bool":
        return [0, 1]
    width = 8 * SIZE[name]
    return list(dict.fromkeys(v % (1 << width) for v in BASE_INTS))


def value_of(name, bits):
    """Mathematical value of one element (Python int, or float for float dtypes)."""
    if name == "bool":
        return bits
    if name in FLOATS:
        return from_bits(name, [bits]).double().item()
    width = 8 * SIZE[name]
    if name in INT_WIDTH and bits >> (width - 1):
        return bits - (1 << width)
    return bits


# ------------------------------------------------------------------ PyTorch results

def torch_results(src, bits, dst):
    """Distinct results of PyTorch's src -> dst over several layouts (as a set)."""
    x = from_bits(src, [bits])
    d = TORCH[dst]
    results = set()
    contiguous = x.repeat(67).to(d)
    results.update(to_bits(contiguous))
    strided = x.repeat(134)[::2].to(d)
    results.update(to_bits(strided))
    target = torch.empty(5, 16, dtype=d)
    target.copy_(x.expand(16))
    results.update(to_bits(target.reshape(-1)))
    target = torch.empty(16, 5, dtype=d)
    target.t().copy_(x.repeat(16))
    results.update(to_bits(target.reshape(-1)))
    return results


# ------------------------------------------------------------------ derived results

def f32_of_int(v):
    """float32 nearest to integer v (C's conversion; numpy applies it)."""
    if v < 0:
        return struct.unpack("<I", np.array([v], dtype=np.int64).astype(np.float32).tobytes())[0]
    return struct.unpack("<I", np.array([v], dtype=np.uint64).astype(np.float32).tobytes())[0]


def ctorch_float_to_int(x, dst):
    """ctorch's rule for float -> integer where C leaves it undefined (Note [Casts])."""
    def via_int64(x):
        if not (-2.0**63 < x < 2.0**63):
            return -2**63
        return int(x)
    if dst == "uint64" and 2.0**63 <= x < 2.0**64:
        return int(x)
    return via_int64(x) % (1 << UINT_WIDTH[dst])


def derive(src, bits, dst):
    """(flag, bits) for a cast that involves uint16/uint32/uint64."""
    v = value_of(src, bits)
    if dst == "bool":
        return "~", int(v != 0)
    if src in FLOATS:
        # Only unsigned destinations can get here (dst is a uint16/32/64).
        width = UINT_WIDTH[dst]
        if math.isnan(v) or math.isinf(v) or not (0 <= math.trunc(v) < (1 << width)):
            return "!", ctorch_float_to_int(v, dst)
        return "~", math.trunc(v)
    # Integer (or bool) source: the value alone decides.
    if dst in INT_WIDTH or dst in UINT_WIDTH:
        width = 8 * SIZE[dst]
        return "~", v % (1 << width)
    # Integer to floating: PyTorch converts any integer of this value as it converts
    # an int64 holding it; values past int64 (uint64 only) round to float32 first for
    # the half types, as PyTorch's integer -> half conversions go through float.
    if -2**63 <= v < 2**63:
        r = to_bits(torch.tensor([v], dtype=torch.int64).to(TORCH[dst]))[0]
        return "~", r
    if dst == "float64":
        return "~", struct.unpack("<Q", struct.pack("<d", float(v)))[0]
    f = f32_of_int(v)
    if dst == "float32":
        return "~", f
    return "~", to_bits(from_bits("float32", [f]).to(TORCH[dst]))[0]


def cast_cell(src, bits, dst):
    if src not in TORCH or dst not in TORCH:
        flag, r = derive(src, bits, dst)
        if flag == "!":
            return "!%s/-" % hexbits(dst, r)
        return "%s%s" % (flag, hexbits(dst, r))
    results = torch_results(src, bits, dst)
    if len(results) == 1:
        return "=" + hexbits(dst, results.pop())
    # Layout-dependent: only NaN -> bfloat16 is known to do this; ctorch writes
    # c10::BFloat16's canonical NaN 0x7fc0 (what PyTorch's scalar path writes).
    v = value_of(src, bits)
    assert dst == "bfloat16" and math.isnan(v), (src, hex(bits), dst, results)
    return "!7fc0/" + ",".join(hexbits(dst, r) for r in sorted(results))


# ------------------------------------------------------------------ sweeps

LOW13 = [0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff]
LOW16 = [0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff]


def fnv_blocks(arr, block):
    data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
    step = block * arr.itemsize
    hashes = []
    for off in range(0, len(data), step):
        h = 0xcbf29ce484222325
        for byte in data[off:off + step]:
            h = ((h ^ byte) * 0x100000001b3) & 0xffffffffffffffff
        hashes.append(h)
    return hashes


def per_element(src_dtype, dst_dtype, bits_np):
    """Converts through a strided view so every element takes c10's scalar path."""
    def mask(dtype):
        return (1 << (8 * torch.empty(0, dtype=dtype).element_size())) - 1
    view = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}
    doubled = np.repeat(bits_np, 2)
    src = torch.from_numpy(doubled).view(src_dtype)[::2]
    res = src.to(dst_dtype)
    contiguous = torch.from_numpy(bits_np.copy()).view(src_dtype).to(dst_dtype)
    same = (res.view(view[dst_dtype]) == contiguous.view(view[dst_dtype]))
    differ = (~same).nonzero().reshape(-1)
    if len(differ):
        # Only NaN -> bfloat16 is known to differ by layout; anything else would make the
        # per-element answer a poor reference.
        assert dst_dtype == torch.bfloat16 and bool(src[differ].isnan().all()), (src_dtype, dst_dtype)
        # Report the inputs whose vector-path answer differs (NaN -> bfloat16); the
        # sweeps keep the per-element answer, c10's scalar conversion.
        first = differ[:3].tolist()
        out.append("# %s -> %s: %d inputs differ between strided and contiguous (first: %s)" % (
            src_dtype, dst_dtype, len(differ),
            ", ".join("%x -> %x vs %x" % (int(bits_np[i]) & mask(src_dtype),
                                          int(res.view(view[dst_dtype])[i]) & mask(dst_dtype),
                                          int(contiguous.view(view[dst_dtype])[i]) & mask(dst_dtype))
                      for i in first)))
    assert res.is_contiguous()
    return res.view(view[dst_dtype]).numpy().view(
        {torch.int16: np.uint16, torch.int32: np.uint32}[view[dst_dtype]])


def sweep(name, src_dtype, dst_dtype, bits_np, block):
    res = per_element(src_dtype, dst_dtype, bits_np)
    out.append("S %s %d %d" % (name, len(bits_np), block))
    for h in fnv_blocks(res, block):
        out.append("H %016x" % h)
    return res


def f2hs_inputs():
    vals = []
    for k in range(4096):
        for s in (1.0, -1.0):
            t = np.float32(s * (k + 0.5) * 2.0**-24)
            vals += [np.nextafter(t, np.float32(-np.inf)), t, np.nextafter(t, np.float32(np.inf))]
    return np.array(vals, dtype=np.float32).view(np.uint32).view(np.int32)


def main():
    out.append("# PyTorch %s dtype conversions on x86-64; generated by tests/golden/gen_casts.py." %
               torch.__version__)
    out.append("# See the generator's docstring for the format. Do not edit by hand.")
    for n in NAMES:
        if n in TORCH:
            d = TORCH[n]
            out.append("D %s %d %d %d torch" % (n, torch.empty(0, dtype=d).element_size(),
                                                int(d.is_floating_point), int(d.is_signed)))
        else:
            out.append("D %s %d 0 0 derived" % (n, SIZE[n]))
    for a in sorted(dir(torch)):
        d = getattr(torch, a)
        if isinstance(d, torch.dtype):
            canonical = str(d)[len("torch."):]
            out.append("A %s %s" % (a, canonical if canonical in NAMES else "-"))

    for src in NAMES:
        sources = int_sources(src) if src not in FLOATS else float_sources(src)
        for bits in sources:
            cells = [cast_cell(src, bits, dst) for dst in NAMES]
            out.append("C %s %s %s" % (src, hexbits(src, bits), " ".join(cells)))

    h = np.arange(65536, dtype=np.int32).astype(np.int16)
    h2f = sweep("h2f", torch.float16, torch.float32, h, 1024)
    sweep("bf2f", torch.bfloat16, torch.float32, h, 1024)
    i = np.arange(1 << 19, dtype=np.uint32)
    f2h_in = ((i[:, None] << 13) | np.array(LOW13, dtype=np.uint32)[None, :]).reshape(-1)
    sweep("f2h", torch.float32, torch.float16, f2h_in.view(np.int32), 6 * 1024)
    sweep("f2hs", torch.float32, torch.float16, f2hs_inputs(), 1024)
    i = np.arange(1 << 16, dtype=np.uint32)
    f2bf_in = ((i[:, None] << 16) | np.array(LOW16, dtype=np.uint32)[None, :]).reshape(-1)
    sweep("f2bf", torch.float32, torch.bfloat16, f2bf_in.view(np.int32), 6 * 1024)

    # Single cases, readable on failure.
    for hb in [0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0x7c00, 0xfc00,
               0x7c01, 0x7dff, 0x7e00, 0xfe01, 0x7fff]:
        out.append("T h2f %04x %08x" % (hb, int(h2f[hb])))
    f2h_cases = [0x00000000, 0x80000000, 0x3f800000, 0x477fe000, 0x477fefff, 0x477ff000,
                 0x477fffff, 0x47800000, 0x7f7fffff, 0x7f800000, 0xff800000, 0x7f800001,
                 0xffc00001, 0x7fc00000, 0x33800000, 0x33000000, 0x33000001, 0x33400000,
                 0x32ffffff, 0x00000001, 0x387fc000, 0x387fe000, 0x38800000, 0x3f801000,
                 0x3f803000, 0x3f801001, 0x3f802fff, 0x322bcc77, 0x337ba882]
    f2bf_cases = [0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, 0xbf818000, 0x7f7f8000,
                  0x7f7fffff, 0x7f7f7fff, 0x7f800000, 0xff800000, 0x7f800001, 0x7fc00000,
                  0xffc00000, 0xff800001, 0x7fff0000, 0x00000001, 0x00008000, 0x00018000,
                  0x00007fff, 0x807fffff, 0x00800000, 0x80000000]
    for name, cases, dst in (("f2h", f2h_cases, torch.float16), ("f2bf", f2bf_cases, torch.bfloat16)):
        res = per_element(torch.float32, dst, np.array(cases, dtype=np.uint32).view(np.int32))
        for a, b in zip(cases, res):
            out.append("T %s %08x %04x" % (name, a, int(b)))
    for bb in [0x0000, 0x8000, 0x0001, 0x7f7f, 0x7f80, 0xff80, 0x7f81, 0x7fc0, 0xffff]:
        r = per_element(torch.bfloat16, torch.float32, np.array([bb], dtype=np.uint16).view(np.int16))
        out.append("T bf2f %04x %08x" % (bb, int(r[0])))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
