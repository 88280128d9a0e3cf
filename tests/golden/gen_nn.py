"""Writes tests/data/nn_golden.txt: torch.nn.functional forward values and gradients,
computed by PyTorch in float64 (the committed files: PyTorch 2.11; 1.13 works too), and
tests/data/nn_modules_golden.txt: modules' state dicts with an input and output.

Format: "case NAME" starts a case; each following line is one tensor:
  NAME NDIM SIZE... VALUE...
Inputs come first, then the outputs ("y", running statistics), the incoming gradient
"gy" and the gradients "g<input>". Integer tensors are written as floats.
What each case computes is spelled out in tests/test_nn_functional.c under the same
name. Functions PyTorch 1.13 lacks (rms_norm, scaled_dot_product_attention) are
written out from their definitions.
"""
import math
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
out = open(sys.argv[1] if len(sys.argv) > 1 else "tests/data/nn_golden.txt", "w")


def emit(name, t):
    t = torch.as_tensor(t).detach()
    vals = t.double().reshape(-1).tolist()
    out.write("%s %d %s %s\n" % (name, t.dim(), " ".join(str(s) for s in t.shape),
                                 " ".join("%.17g" % v for v in vals)))


def case(name, fn, inputs, consts=None, extra=None):
    """inputs: dict of differentiable float64 tensors; consts: dict of other tensors."""
    consts = consts or {}
    out.write("case %s\n" % name)
    for k, v in inputs.items():
        emit(k, v)
    for k, v in consts.items():
        emit(k, v)
    leaves = {k: v.clone().requires_grad_(True) for k, v in inputs.items()}
    y = fn(**leaves, **consts)
    emit("y", y)
    gy = torch.randn_like(y)
    emit("gy", gy)
    grads = torch.autograd.grad(y, list(leaves.values()), gy, allow_unused=True)
    for k, g in zip(leaves.keys(), grads):
        emit("g" + k, g if g is not None else torch.zeros_like(leaves[k]))
    if extra:
        for k, v in extra().items():
            emit(k, v)


r = torch.randn

# ---------------------------------------------------------------- convolutions
case("conv1d", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1),
     {"x": r(2, 3, 10), "w": r(4, 3, 3), "b": r(4)})
case("conv1d_same", lambda x, w: F.conv1d(x, w, None, padding="same", groups=2),
     {"x": r(2, 4, 9), "w": r(4, 2, 4)})
case("conv2d_same", lambda x, w, b: F.conv2d(x, w, b, padding="same", dilation=(2, 1)),
     {"x": r(1, 2, 7, 6), "w": r(3, 2, 3, 4), "b": r(3)})
case("conv2d_valid", lambda x, w: F.conv2d(x, w, None, padding="valid", stride=(2, 1)),
     {"x": r(2, 2, 6, 5), "w": r(3, 2, 2, 3)})
case("conv_transpose2d", lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
     {"x": r(2, 4, 4, 3), "w": r(4, 3, 3, 3), "b": r(3)})
case("conv_transpose2d_groups",
     lambda x, w: F.conv_transpose2d(x, w, None, stride=(1, 2), padding=(0, 1), output_padding=(0, 1), groups=2,
                                     dilation=(2, 1)),
     {"x": r(1, 4, 4, 3), "w": r(4, 2, 2, 3)})

# ---------------------------------------------------------------- pooling
pool_x = r(2, 3, 7, 8)
case("avg_pool2d_a", lambda x: F.avg_pool2d(x, 3, 2, 1), {"x": pool_x})
case("avg_pool2d_b", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), {"x": pool_x})
case("avg_pool2d_c", lambda x: F.avg_pool2d(x, (2, 3), (3, 2), (1, 1), ceil_mode=True), {"x": pool_x})
case("avg_pool2d_d", lambda x: F.avg_pool2d(x, 2, None, 1, divisor_override=5), {"x": pool_x[0]})
case("adaptive_avg_pool2d_a", lambda x: F.adaptive_avg_pool2d(x, (3, 2)), {"x": r(2, 3, 7, 5)})
case("adaptive_avg_pool2d_b", lambda x: F.adaptive_avg_pool2d(x, (4, 7)), {"x": r(2, 5, 6)})

# ---------------------------------------------------------------- normalization
rm0, rv0 = r(3), r(3).abs() + 0.5


def bn_train(x, w, b, rm, rv):
    rm, rv = rm.clone(), rv.clone()
    y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2, eps=1e-5)
    bn_train.stats = (rm, rv)
    return y


case("batch_norm_train", bn_train, {"x": r(4, 3, 2, 2), "w": r(3), "b": r(3)}, {"rm": rm0, "rv": rv0},
     extra=lambda: {"rm_after": bn_train.stats[0], "rv_after": bn_train.stats[1]})
case("batch_norm_eval", lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=False, eps=1e-3),
     {"x": r(3, 3, 4), "w": r(3), "b": r(3)}, {"rm": rm0, "rv": rv0})
case("layer_norm", lambda x, w, b: F.layer_norm(x, (3, 4), w, b, eps=1e-5),
     {"x": r(2, 3, 4), "w": r(3, 4), "b": r(3, 4)})
case("layer_norm_plain", lambda x: F.layer_norm(x, (4,)), {"x": r(5, 4)})
case("group_norm", lambda x, w, b: F.group_norm(x, 3, w, b, eps=1e-5), {"x": r(2, 6, 3, 2), "w": r(6), "b": r(6)})


def rms_norm(x, shape, w, eps):
    dims = tuple(range(-len(shape), 0))
    y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    return y * w if w is not None else y


case("rms_norm", lambda x, w: rms_norm(x, (5,), w, 1e-6), {"x": r(2, 3, 5), "w": r(5)})
case("rms_norm_plain", lambda x: rms_norm(x, (3, 5), None, torch.finfo(torch.float64).eps), {"x": r(2, 3, 5)})

# ---------------------------------------------------------------- embedding
case("embedding", lambda w, idx: F.embedding(idx, w, padding_idx=2), {"w": r(10, 4)},
     {"idx": torch.tensor([[1, 2, 3], [2, 9, 1]])})


# ---------------------------------------------------------------- attention
def sdpa(q, k, v, mask=None, causal=False, scale=None):
    s = (q @ k.transpose(-2, -1)) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


case("sdpa", lambda q, k, v: sdpa(q, k, v), {"q": r(2, 2, 5, 4), "k": r(2, 2, 6, 4), "v": r(2, 2, 6, 3)})
case("sdpa_causal", lambda q, k, v: sdpa(q, k, v, causal=True, scale=0.3),
     {"q": r(2, 6, 4), "k": r(2, 6, 4), "v": r(2, 6, 4)})
bmask = torch.rand(5, 6) > 0.3
bmask[:, 0] = True
case("sdpa_bool_mask", lambda q, k, v, mask: sdpa(q, k, v, mask), {"q": r(2, 5, 4), "k": r(2, 6, 4), "v": r(2, 6, 2)},
     {"mask": bmask})
case("sdpa_float_mask", lambda q, k, v, mask: sdpa(q, k, v, mask),
     {"q": r(2, 2, 5, 4), "k": r(2, 2, 6, 4), "v": r(2, 2, 6, 3)}, {"mask": r(2, 1, 5, 6)})
case("sdpa_long_causal", lambda q, k, v: sdpa(q, k, v, causal=True),
     {"q": r(1, 130, 3), "k": r(1, 130, 3), "v": r(1, 130, 2)})

# ---------------------------------------------------------------- losses
x54 = r(5, 4)
t5 = torch.tensor([0, 3, -100, 1, 3])
w4 = r(4).abs() + 0.1
case("ce_mean", lambda x, t: F.cross_entropy(x, t), {"x": x54}, {"t": t5})
case("ce_weight_mean", lambda x, t, w: F.cross_entropy(x, t, w), {"x": x54}, {"t": t5, "w": w4})
case("ce_weight_sum", lambda x, t, w: F.cross_entropy(x, t, w, reduction="sum"), {"x": x54}, {"t": t5, "w": w4})
case("ce_none", lambda x, t: F.cross_entropy(x, t, reduction="none"), {"x": x54}, {"t": t5})
case("ce_ls_weight_ignore1", lambda x, t, w: F.cross_entropy(x, t, w, ignore_index=1, label_smoothing=0.2),
     {"x": x54}, {"t": torch.tensor([0, 3, 1, 1, 2]), "w": w4})
case("ce_ls_mean", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.3), {"x": x54}, {"t": t5})
case("ce_ls_none", lambda x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.3), {"x": x54}, {"t": t5})
case("ce_ls_sum_w", lambda x, t, w: F.cross_entropy(x, t, w, reduction="sum", label_smoothing=0.1), {"x": x54},
     {"t": t5, "w": w4})
case("ce_spatial", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), {"x": r(2, 4, 3)},
     {"t": torch.tensor([[0, 1, 3], [2, -100, 0]])})
p35 = torch.softmax(r(3, 5), 1)
w5 = r(5).abs() + 0.1
case("ce_probs", lambda x, p, w: F.cross_entropy(x, p, w, label_smoothing=0.1), {"x": r(3, 5)}, {"p": p35, "w": w5})
case("ce_probs_none", lambda x, p: F.cross_entropy(x, p, reduction="none"), {"x": r(3, 5)}, {"p": p35})
case("ce_probs_sum", lambda x, p: F.cross_entropy(x, p, reduction="sum"), {"x": r(3, 5)}, {"p": p35})
lp = torch.log_softmax(r(4, 3), 1)
t4 = torch.tensor([2, 0, 1, 0])
w3 = r(3).abs() + 0.1
case("nll_weight_ignore0", lambda x, t, w: F.nll_loss(x, t, w, ignore_index=0), {"x": lp}, {"t": t4, "w": w3})
case("nll_none", lambda x, t, w: F.nll_loss(x, t, w, reduction="none"), {"x": lp}, {"t": t4, "w": w3})
case("nll_sum", lambda x, t: F.nll_loss(x, t, reduction="sum"), {"x": lp}, {"t": t4})
case("nll_1d", lambda x, t: F.nll_loss(x, t), {"x": r(3)}, {"t": torch.tensor(2)})
a, b = r(3, 4), r(3, 4)
for red in ("none", "mean", "sum"):
    case("mse_" + red, lambda x, t: F.mse_loss(x, t, reduction=red), {"x": a}, {"t": b})
    case("l1_" + red, lambda x, t: F.l1_loss(x, t, reduction=red), {"x": a}, {"t": b})
    case("smooth_l1_" + red, lambda x, t: F.smooth_l1_loss(x, t, reduction=red, beta=0.5), {"x": a}, {"t": b})
    case("huber_" + red, lambda x, t: F.huber_loss(x, t, reduction=red, delta=0.7), {"x": a}, {"t": b})
pr = torch.rand(3, 4) * 0.9 + 0.05
tb = torch.rand(3, 4)
case("bce", lambda x, t, w: F.binary_cross_entropy(x, t, w), {"x": pr}, {"t": tb, "w": r(3, 4).abs()})
case("bce_sum", lambda x, t: F.binary_cross_entropy(x, t, reduction="sum"), {"x": pr}, {"t": tb})
case("bce_logits", lambda x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, w, pos_weight=pw),
     {"x": r(3, 4) * 3}, {"t": tb, "w": r(3, 4).abs(), "pw": r(4).abs()})
case("bce_logits_none", lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="none"), {"x": r(3, 4) * 3},
     {"t": tb})
kq = torch.log_softmax(r(3, 4), 1)
kp = torch.softmax(r(3, 4), 1)
kp[0, 1] = 0
case("kl_batchmean", lambda x, t: F.kl_div(x, t, reduction="batchmean"), {"x": kq}, {"t": kp})
case("kl_sum_logt", lambda x, t: F.kl_div(x, t, reduction="sum", log_target=True), {"x": kq},
     {"t": torch.log_softmax(r(3, 4), 1)})
case("kl_none", lambda x, t: F.kl_div(x, t, reduction="none"), {"x": kq}, {"t": kp})
case("kl_mean", lambda x, t: F.kl_div(x, t, reduction="mean"), {"x": kq}, {"t": kp})


# ---------------------------------------------------------------- modules
out.close()
out = open(sys.argv[2] if len(sys.argv) > 2 else "tests/data/nn_modules_golden.txt", "w")
class Block(torch.nn.Module):
    """bench/torch_peer.py's Block, with attention written out (PyTorch 1.13 has no
    F.scaled_dot_product_attention)."""

    def __init__(s, d, h):
        super().__init__()
        s.h = h
        s.ln1, s.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        s.qkv, s.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        s.fc, s.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, s.h, C // s.h).transpose(1, 2) for t in (q, k, v))
        y = sdpa(q, k, v, causal=True)
        x = x + s.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + s.fc2(F.gelu(s.fc(s.ln2(x)), approximate="tanh"))


blk = Block(8, 2)
out.write("case gpt_block\n")
for k, v in blk.state_dict().items():
    emit(k, v)
xb = r(2, 5, 8)
emit("x", xb)
emit("y", blk(xb))
cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                          torch.nn.Flatten(), torch.nn.Linear(4 * 3 * 3, 5))
out.write("case cnn\n")
for k, v in cnn.state_dict().items():
    emit(k, v)
xc = r(2, 1, 6, 6)
emit("x", xc)
emit("y", cnn(xc))
out.close()
