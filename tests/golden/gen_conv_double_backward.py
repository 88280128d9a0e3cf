"""Writes tests/data/conv_double_backward_golden.txt: second derivatives of conv2d and
conv_transpose2d, computed by PyTorch in float64 (the committed file comes from
PyTorch 2.15).

For y = conv(x, w, b) and a gradient gy, the first derivatives gx, gw, gb are taken
with create_graph; s = <gx, vx> + <gw, vw> + <gb, vb> is then differentiated with
respect to x, w and gy (conv is bilinear, so this reaches every term of the double
backward). Each case: a header line, then one line per tensor: name, values.
  case transposed N C H W O KH KW sh sw ph pw oph opw dh dw groups bias batched OH OW
(for the transposed case C is the input's channels and O the output's; the weight is
(C, O / groups, KH, KW)).
"""
import torch
import torch.nn.functional as F

from golden_common import number

torch.manual_seed(0)


def emit(name, t):
    t = t.detach().contiguous().double().reshape(-1)
    print(name, " ".join(number(float(v)) for v in t))


cases = [
    # transposed, n, c, h, w, o, kh, kw, sh, sw, ph, pw, oph, opw, dh, dw, groups, bias, batched
    (0, 2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1),
    (0, 1, 4, 7, 8, 6, 3, 2, 2, 1, 0, 1, 0, 0, 1, 2, 2, 1, 1),
    (0, 2, 6, 9, 7, 6, 3, 3, 2, 3, 2, 1, 0, 0, 2, 1, 3, 0, 1),
    (0, 1, 2, 5, 6, 3, 2, 2, 1, 2, 1, 0, 0, 0, 1, 1, 1, 1, 0),
    (1, 2, 4, 4, 3, 6, 3, 3, 2, 1, 1, 0, 1, 0, 1, 1, 2, 1, 1),
    (1, 1, 3, 3, 4, 2, 2, 3, 1, 2, 0, 1, 0, 1, 2, 1, 1, 0, 0),
]

for (tr, n, c, h, w, o, kh, kw, sh, sw, ph, pw, oph, opw, dh, dw, g, has_bias, batched) in cases:
    x = torch.randn(n, c, h, w, dtype=torch.float64, requires_grad=True)
    wshape = (c, o // g, kh, kw) if tr else (o, c // g, kh, kw)
    wt = torch.randn(*wshape, dtype=torch.float64, requires_grad=True)
    b = torch.randn(o, dtype=torch.float64, requires_grad=True) if has_bias else None
    xi = x if batched else x[0]
    if tr:
        y = F.conv_transpose2d(xi, wt, b, (sh, sw), (ph, pw), (oph, opw), g, (dh, dw))
    else:
        y = F.conv2d(xi, wt, b, (sh, sw), (ph, pw), (dh, dw), g)
    gy = torch.randn_like(y).requires_grad_(True)
    params = [x, wt] + ([b] if has_bias else [])
    grads = torch.autograd.grad(y, params, gy, create_graph=True)
    vs = [torch.randn_like(p) for p in params]
    s = sum((gr * v).sum() for gr, v in zip(grads, vs))
    ggx, ggw, ggy = torch.autograd.grad(s, [x, wt, gy])
    print("case", tr, n, c, h, w, o, kh, kw, sh, sw, ph, pw, oph, opw, dh, dw, g, has_bias, batched,
          y.shape[-2], y.shape[-1])
    emit("x", x)
    emit("w", wt)
    if has_bias:
        emit("b", b)
    emit("gy", gy)
    emit("vx", vs[0])
    emit("vw", vs[1])
    if has_bias:
        emit("vb", vs[2])
    emit("gx", grads[0])
    emit("gw", grads[1])
    emit("ggx", ggx)
    emit("ggw", ggw)
    emit("ggy", ggy)
