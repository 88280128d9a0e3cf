"""Writes tests/data/conv_golden.txt: conv2d and max_pool2d, forward and backward,
computed by PyTorch in float64 (the committed file comes from PyTorch 2.11; 1.13 gives
the same values).

Each case: a header line, then one line per tensor: name, shape, values.
  conv N C H W O KH KW sh sw ph pw dh dw groups bias batched
  pool N C H W kh kw sh sw ph pw dh dw ceil batched
"""
import torch
import torch.nn.functional as F

torch.manual_seed(0)


def emit(name, t):
    t = t.detach().contiguous().double().reshape(-1)
    shape = "x".join(str(s) for s in t.shape)
    print(name, " ".join("%.17g" % float(v) for v in t))


conv_cases = [
    (2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
    (1, 4, 8, 8, 6, 3, 2, 2, 1, 0, 1, 1, 2, 2, 1, 1),
    (2, 6, 9, 7, 6, 3, 3, 2, 3, 2, 1, 2, 1, 3, 0, 1),
    (1, 2, 5, 5, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1),
    (1, 3, 6, 5, 2, 2, 2, 1, 1, 0, 0, 1, 1, 1, 1, 0),
    (2, 1, 12, 12, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
    # output as wide as the input with stride 1 (the contiguous column path):
    # dilated, rectangular, kw = 1 with grouped channels, and a window wider than
    # the input, where whole column rows fall in the padding
    (2, 3, 6, 7, 4, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1, 1),
    (1, 2, 7, 5, 3, 5, 3, 1, 1, 2, 1, 1, 1, 1, 0, 1),
    (2, 4, 5, 6, 4, 3, 1, 1, 1, 0, 0, 1, 1, 2, 1, 1),
    (1, 2, 2, 2, 3, 5, 5, 1, 1, 2, 2, 1, 1, 1, 1, 1),
]
for (n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, g, has_bias, batched) in conv_cases:
    x = torch.randn(n, c, h, w, dtype=torch.float64, requires_grad=True)
    wt = torch.randn(o, c // g, kh, kw, dtype=torch.float64, requires_grad=True)
    b = torch.randn(o, dtype=torch.float64, requires_grad=True) if has_bias else None
    xi = x if batched else x[0]
    y = F.conv2d(xi, wt, b, (sh, sw), (ph, pw), (dh, dw), g)
    gy = torch.randn_like(y)
    y.backward(gy)
    print("conv", n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, g, has_bias, batched, *y.shape)
    emit("x", x)
    emit("w", wt)
    if has_bias:
        emit("b", b)
    emit("y", y)
    emit("gy", gy)
    emit("gx", x.grad)
    emit("gw", wt.grad)
    if has_bias:
        emit("gb", b.grad)

pool_cases = [
    (2, 3, 8, 8, 2, 2, 2, 2, 0, 0, 1, 1, 0, 1),
    (1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 0, 1),
    (1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),
    (2, 1, 10, 10, 3, 2, 2, 3, 1, 0, 2, 1, 1, 1),
    (1, 2, 5, 5, 2, 2, 1, 1, 0, 0, 1, 1, 0, 0),
]
for (n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, ceil, batched) in pool_cases:
    x = torch.randn(n, c, h, w, dtype=torch.float64)
    x.view(-1)[3] = x.view(-1)[4]  # a tie
    x.requires_grad_(True)
    xi = x if batched else x[0]
    y, idx = F.max_pool2d(xi, (kh, kw), (sh, sw), (ph, pw), (dh, dw), bool(ceil), return_indices=True)
    gy = torch.randn_like(y)
    y.backward(gy)
    print("pool", n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, ceil, batched, *y.shape)
    emit("x", x)
    emit("y", y)
    emit("idx", idx)
    emit("gy", gy)
    emit("gx", x.grad)
