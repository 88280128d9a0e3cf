"""Writes tests/data/nn_layers_golden.txt and tests/data/nn_layers_repr.h: torch.nn
layers run by PyTorch in float64 (the committed files: PyTorch 2.15), for
tests/test_nn_layers.c.

Golden format (tests/nn_golden.h): "case NAME" starts a case; each following line is
one tensor: NAME NDIM SIZE... VALUE... A case holds the module's parameters and
buffers as "p.NAME" and "b.NAME" (loaded into the C module before the forward), the
input "x", the output "y", the incoming gradient "gy", the input's gradient "gx", the
parameters' gradients "g.NAME" and the buffers after the forward "a.NAME". A case
named *_eval runs the module in eval mode. The module each case builds is written
again in tests/test_nn_layers.c under the same name.

Usage: torchpy tests/golden/gen_layers.py [golden.txt] [repr.h]
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
out = open(sys.argv[1] if len(sys.argv) > 1 else "tests/data/nn_layers_golden.txt", "w")
reprs = []


def emit(name, t):
    t = torch.as_tensor(t).detach()
    vals = t.double().reshape(-1).tolist()
    out.write("%s %d %s %s\n" % (name, t.dim(), " ".join(str(s) for s in t.shape),
                                 " ".join("%.17g" % v for v in vals)))


def case(name, m, x, scale=1.0):
    """m: the module; x: the input (float64). Random parameters and buffers replace
    the module's own, so every value of the state takes part."""
    out.write("case %s\n" % name)
    reprs.append((name, repr(m)))
    with torch.no_grad():
        for k, p in m.named_parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if k.endswith("weight") and p.dim() == 1 else 0.0))
        for k, b in m.named_buffers():
            if k.endswith("running_var"):
                b.copy_(torch.rand_like(b) + 0.5)
            elif k.endswith("running_mean"):
                b.copy_(torch.randn_like(b) * 0.3)
    for k, p in m.named_parameters():
        emit("p." + k, p)
    for k, b in m.named_buffers():
        if b.is_floating_point():
            emit("b." + k, b)
    if name.endswith("_eval"):
        m.eval()
    x = (x * scale).clone().requires_grad_(True)
    emit("x", x)
    y = m(x)
    emit("y", y)
    gy = torch.randn_like(y)
    emit("gy", gy)
    params = list(m.named_parameters())
    grads = torch.autograd.grad(y, [x] + [p for _, p in params], gy, allow_unused=True)
    emit("gx", grads[0])
    for (k, p), g in zip(params, grads[1:]):
        emit("g." + k, g if g is not None else torch.zeros_like(p))
    for k, b in m.named_buffers():
        if b.is_floating_point():
            emit("a." + k, b)


r = torch.randn

# ---------------------------------------------------------------- convolutions
case("conv1d", nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2), r(2, 4, 9))
case("conv1d_nobias", nn.Conv1d(3, 2, 2, dilation=2, bias=False), r(3, 7))
case("conv1d_reflect", nn.Conv1d(3, 2, 3, padding=2, padding_mode="reflect"), r(2, 3, 7))
case("conv1d_replicate", nn.Conv1d(3, 2, 3, stride=2, padding=1, padding_mode="replicate"), r(2, 3, 6))
case("conv1d_circular", nn.Conv1d(2, 2, 3, padding=2, padding_mode="circular", bias=False), r(2, 2, 5))
case("conv3d", nn.Conv3d(2, 4, 3, stride=(1, 2, 1), padding=(1, 0, 1)), r(2, 2, 4, 5, 4))
case("conv3d_groups", nn.Conv3d(4, 2, (2, 2, 3), dilation=(2, 1, 1), groups=2, bias=False), r(1, 4, 5, 3, 4))
case("conv3d_unbatched", nn.Conv3d(2, 3, 2, stride=2), r(2, 4, 4, 4))
case("conv3d_reflect", nn.Conv3d(2, 2, 3, padding=1, padding_mode="reflect"), r(1, 2, 3, 4, 4))
case("conv3d_circular", nn.Conv3d(2, 2, (2, 3, 3), padding=(1, 1, 2), padding_mode="circular"), r(1, 2, 3, 4, 5))
case("conv_t1d", nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2), r(2, 4, 5))
case("conv_t1d_unbatched", nn.ConvTranspose1d(3, 2, 3, dilation=2, bias=False), r(3, 5))
case("conv_t2d", nn.ConvTranspose2d(3, 4, (3, 2), stride=(2, 1), padding=(1, 0), output_padding=(1, 0),
                                    dilation=(1, 2)), r(2, 3, 4, 5))
case("conv_t2d_groups", nn.ConvTranspose2d(4, 2, 2, stride=2, groups=2), r(1, 4, 3, 3))

# ---------------------------------------------------------------- normalization
case("bn1d_2d", nn.BatchNorm1d(3), r(5, 3))
case("bn1d_3d", nn.BatchNorm1d(3, momentum=0.3), r(4, 3, 5))
case("bn1d_eval", nn.BatchNorm1d(3), r(4, 3, 5))
case("bn3d", nn.BatchNorm3d(2, eps=1e-3), r(2, 2, 3, 2, 2))
case("bn2d_cumulative", nn.BatchNorm2d(2, momentum=None), r(3, 2, 2, 2))
case("bn3d_noaffine", nn.BatchNorm3d(2, affine=False, track_running_stats=False), r(2, 2, 2, 2, 3))
case("gn", nn.GroupNorm(2, 4), r(2, 4, 3, 3))
case("gn_noaffine", nn.GroupNorm(3, 6, eps=1e-4, affine=False), r(2, 6, 5))
case("in1d", nn.InstanceNorm1d(3), r(2, 3, 6))
case("in1d_unbatched", nn.InstanceNorm1d(3, affine=True), r(3, 6))
case("in2d_track", nn.InstanceNorm2d(3, affine=True, track_running_stats=True), r(2, 3, 4, 4))
case("in2d_eval", nn.InstanceNorm2d(3, affine=True, track_running_stats=True), r(2, 3, 4, 4))

# ---------------------------------------------------------------- pooling
case("maxpool1d", nn.MaxPool1d(3, 2, 1, ceil_mode=True), r(2, 3, 10))
case("maxpool1d_unbatched", nn.MaxPool1d(2, dilation=2), r(3, 9))
case("maxpool2d_ex", nn.MaxPool2d((2, 3), stride=1, padding=1, dilation=2, ceil_mode=True), r(2, 2, 6, 7))
case("maxpool3d", nn.MaxPool3d(2), r(2, 2, 4, 5, 4))
case("maxpool3d_ex", nn.MaxPool3d((3, 2, 3), stride=(2, 1, 2), padding=1, dilation=(1, 2, 1), ceil_mode=True),
     r(1, 2, 6, 5, 7))
case("maxpool3d_unbatched", nn.MaxPool3d(2, stride=1, padding=(1, 0, 1)), r(2, 3, 4, 3))
case("avgpool1d", nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False), r(2, 3, 10))
case("avgpool2d", nn.AvgPool2d((2, 3), stride=(1, 2), padding=1), r(2, 2, 5, 6))
case("avgpool2d_div", nn.AvgPool2d(2, divisor_override=3), r(1, 2, 4, 4))
case("adaptive_avg1d", nn.AdaptiveAvgPool1d(4), r(2, 3, 10))
case("adaptive_avg2d", nn.AdaptiveAvgPool2d((3, None)), r(2, 3, 7, 5))
case("adaptive_max1d", nn.AdaptiveMaxPool1d(4), r(2, 3, 10))
case("adaptive_max2d", nn.AdaptiveMaxPool2d((3, 4)), r(2, 3, 7, 5))
case("adaptive_max2d_none", nn.AdaptiveMaxPool2d((None, 2)), r(1, 2, 3, 5))
case("adaptive_max2d_unbatched", nn.AdaptiveMaxPool2d(3), r(2, 6, 4))

# ---------------------------------------------------------------- shape
case("pixel_shuffle", nn.PixelShuffle(2), r(2, 8, 3, 3))
case("pixel_shuffle_5d", nn.PixelShuffle(2), r(2, 1, 8, 2, 2))
case("pixel_unshuffle", nn.PixelUnshuffle(2), r(2, 2, 4, 6))
case("unflatten", nn.Unflatten(1, (2, -1)), r(3, 6))
case("identity", nn.Identity(), r(2, 3))

# ---------------------------------------------------------------- upsampling
case("up_nearest_2x", nn.Upsample(scale_factor=2), r(2, 3, 4, 5))
case("up_nearest_size", nn.Upsample(size=(7, 3)), r(1, 2, 4, 5))
case("up_nearest_1d", nn.Upsample(scale_factor=1.7), r(2, 3, 5))
case("up_nearest_exact", nn.Upsample(scale_factor=(1.5, 0.6), mode="nearest-exact"), r(1, 2, 4, 5))
case("up_linear", nn.Upsample(scale_factor=2.5, mode="linear"), r(2, 3, 4))
case("up_linear_ac", nn.Upsample(size=7, mode="linear", align_corners=True), r(2, 2, 4))
case("up_bilinear", nn.Upsample(size=(5, 7), mode="bilinear"), r(2, 2, 3, 4))
case("up_bilinear_ac", nn.Upsample(scale_factor=(2.0, 1.5), mode="bilinear", align_corners=True), r(1, 3, 3, 4))
case("up_bilinear_down", nn.Upsample(size=(2, 3), mode="bilinear"), r(1, 2, 5, 7))
case("up_bilinear_same", nn.Upsample(size=(3, 4), mode="bilinear"), r(1, 2, 3, 4))
case("up_bicubic", nn.Upsample(scale_factor=2, mode="bicubic"), r(1, 2, 3, 4))
case("up_bicubic_ac", nn.Upsample(size=(6, 5), mode="bicubic", align_corners=True), r(2, 1, 4, 3))
case("up_bicubic_down", nn.Upsample(size=(3, 2), mode="bicubic"), r(1, 1, 6, 5))
case("up_nearest2d", nn.UpsamplingNearest2d(scale_factor=2), r(1, 2, 3, 3))
case("up_bilinear2d", nn.UpsamplingBilinear2d(size=(5, 4)), r(1, 2, 3, 3))

# ---------------------------------------------------------------- activations
acts = [
    ("relu", nn.ReLU()), ("tanh", nn.Tanh()), ("sigmoid", nn.Sigmoid()), ("silu", nn.SiLU()),
    ("mish", nn.Mish()), ("selu", nn.SELU()), ("relu6", nn.ReLU6()), ("hardswish", nn.Hardswish()),
    ("hardsigmoid", nn.Hardsigmoid()), ("logsigmoid", nn.LogSigmoid()), ("softsign", nn.Softsign()),
    ("tanhshrink", nn.Tanhshrink()), ("leaky_relu", nn.LeakyReLU(0.2)), ("elu", nn.ELU(1.5)),
    ("celu", nn.CELU(0.7)), ("softplus", nn.Softplus(2.0, 5.0)), ("hardtanh", nn.Hardtanh(-0.5, 2.0)),
    ("hardshrink", nn.Hardshrink(0.6)), ("softshrink", nn.Softshrink(0.4)), ("softmax", nn.Softmax(1)),
    ("log_softmax", nn.LogSoftmax(0)), ("glu", nn.GLU()), ("prelu", nn.PReLU()),
]
for name, m in acts:
    case("act_" + name, m, r(3, 6), scale=3.0)
case("act_prelu3", nn.PReLU(3, 0.1), r(2, 3, 4), scale=3.0)

# ---------------------------------------------------------------- functions
# "f_" cases call a function of x (no module); tests/test_nn_layers.c has the same
# arguments under the same names.


def func_case(name, fn, x):
    out.write("case %s\n" % name)
    x = x.clone().requires_grad_(True)
    emit("x", x)
    y = fn(x)
    emit("y", y)
    gy = torch.randn_like(y)
    emit("gy", gy)
    emit("gx", torch.autograd.grad(y, x, gy)[0])


for mode in ("reflect", "replicate", "circular"):
    func_case("f_pad_%s_1d" % mode, lambda x: F.pad(x, (2, 3), mode=mode), r(2, 3, 5))
    func_case("f_pad_%s_2d" % mode, lambda x: F.pad(x, (1, 2, 2, 0), mode=mode), r(2, 2, 4, 5))
    func_case("f_pad_%s_3d" % mode, lambda x: F.pad(x, (1, 1, 0, 2, 2, 1), mode=mode), r(1, 2, 3, 4, 3))
    func_case("f_pad_%s_unbatched" % mode, lambda x: F.pad(x, (3, 1), mode=mode), r(2, 4))
func_case("f_pad_circular_crop", lambda x: F.pad(x, (-1, 2, 1, -2), mode="circular"), r(1, 2, 5, 6))
func_case("f_pad_replicate_crop", lambda x: F.pad(x, (-1, 3, 2, -1), mode="replicate"), r(2, 1, 4, 5))

# ---------------------------------------------------------------- EmbeddingBag
# "bag_" cases: integer input "x", offsets "off" (absent for 2-D input), weights "psw"
# (with their gradient "gpsw"), and the weight's gradient "g.weight".


def bag_case(name, m, x, off=None, psw=None):
    out.write("case %s\n" % name)
    reprs.append((name, repr(m)))
    with torch.no_grad():
        m.weight.copy_(torch.randn_like(m.weight))
    emit("p.weight", m.weight)
    emit("x", x)
    if off is not None:
        emit("off", off)
    if psw is not None:
        psw = psw.clone().requires_grad_(True)
        emit("psw", psw)
    y = m(x, off, psw)
    emit("y", y)
    gy = torch.randn_like(y)
    emit("gy", gy)
    leaves = [m.weight] + ([psw] if psw is not None else [])
    grads = torch.autograd.grad(y, leaves, gy)
    emit("g.weight", grads[0])
    if psw is not None:
        emit("gpsw", grads[1])


ri = torch.randint
T = torch.tensor
bag_case("bag_sum_2d", nn.EmbeddingBag(10, 3, mode="sum"), ri(0, 10, (4, 3)))
bag_case("bag_mean_offsets", nn.EmbeddingBag(10, 3), ri(0, 10, (9,)), T([0, 2, 2, 5]))
bag_case("bag_max", nn.EmbeddingBag(8, 4, mode="max"), T([1, 5, 1, 7, 2, 2, 6]), T([0, 3, 4]))
bag_case("bag_sum_psw", nn.EmbeddingBag(10, 3, mode="sum", include_last_offset=True), ri(0, 10, (9,)),
         T([0, 2, 5, 9]), r(9))
bag_case("bag_mean_pad", nn.EmbeddingBag(6, 2, padding_idx=2), T([2, 1, 2, 3, 2, 2, 0, 5]), T([0, 3, 4, 6]))
bag_case("bag_max_pad", nn.EmbeddingBag(6, 3, mode="max", padding_idx=0, include_last_offset=True),
         T([0, 4, 3, 0, 0, 5, 1, 1]), T([0, 3, 5, 7]))
bag_case("bag_sum_psw_2d", nn.EmbeddingBag(7, 2, mode="sum", padding_idx=-1), T([[6, 1, 2], [3, 6, 6]]), None,
         r(2, 3))

# ---------------------------------------------------------------- later additions
# (after the cases above, so that their random draws stay as they were)
case("avgpool3d", nn.AvgPool3d(2), r(2, 2, 4, 5, 4))
case("avgpool3d_ex", nn.AvgPool3d((3, 2, 3), stride=(2, 1, 2), padding=1, ceil_mode=True, count_include_pad=False),
     r(1, 2, 6, 5, 7))
case("avgpool3d_ceil_pad", nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True), r(1, 1, 5, 6, 4))
case("avgpool3d_div_unbatched", nn.AvgPool3d(2, stride=1, padding=(1, 0, 1), divisor_override=5), r(2, 3, 4, 3))


def unpool_case(name, x, pool, unpool, output_size=None):
    """MaxPool2d(return_indices=True) then MaxUnpool2d: x, the pool's indices "idx",
    the unpooled y, gy and gx."""
    out.write("case %s\n" % name)
    reprs.append((name, repr(unpool)))
    x = x.clone().requires_grad_(True)
    emit("x", x)
    v, idx = pool(x)
    emit("idx", idx)
    y = unpool(v, idx, output_size=output_size)
    emit("y", y)
    gy = torch.randn_like(y)
    emit("gy", gy)
    emit("gx", torch.autograd.grad(y, x, gy)[0])


unpool_case("f_unpool2d", r(2, 3, 4, 6), nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2))
unpool_case("f_unpool2d_ex", r(1, 2, 7, 5), nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 0), return_indices=True),
            nn.MaxUnpool2d((3, 2), stride=(2, 1), padding=(1, 0)), output_size=(8, 5))
unpool_case("f_unpool2d_unbatched", r(2, 4, 5), nn.MaxPool2d(2, stride=1, return_indices=True),
            nn.MaxUnpool2d(2, stride=1))
case("up_trilinear", nn.Upsample(scale_factor=2, mode="trilinear"), r(1, 2, 2, 3, 4))
case("up_trilinear_ac", nn.Upsample(size=(3, 4, 5), mode="trilinear", align_corners=True), r(2, 1, 2, 3, 3))
case("up_trilinear_mixed", nn.Upsample(scale_factor=(1.5, 0.7, 2.0), mode="trilinear"), r(1, 2, 4, 5, 3))
case("up_nearest_3d", nn.Upsample(scale_factor=(2.0, 1.5, 0.5), mode="nearest"), r(1, 2, 2, 3, 4))
case("up_nearest_exact_3d", nn.Upsample(size=(3, 2, 5), mode="nearest-exact"), r(1, 1, 4, 3, 3))
case("conv_t3d", nn.ConvTranspose3d(2, 4, (3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1), output_padding=(1, 0, 1)),
     r(2, 2, 3, 4, 3))
case("conv_t3d_groups", nn.ConvTranspose3d(4, 2, 2, stride=2, groups=2, bias=False, dilation=(2, 1, 1)),
     r(1, 4, 2, 3, 2))
case("conv_t3d_unbatched", nn.ConvTranspose3d(2, 3, 2, dilation=2, padding=1), r(2, 3, 3, 3))

out.close()

# ---------------------------------------------------------------- reprs
extra = [
    ("r_conv1d_default", nn.Conv1d(4, 6, 3)),
    ("r_conv_t2d_default", nn.ConvTranspose2d(4, 6, (3, 2))),
    ("r_bn1d_default", nn.BatchNorm1d(3)),
    ("r_bn3d_plain", nn.BatchNorm3d(3, affine=False, track_running_stats=False)),
    ("r_in2d_default", nn.InstanceNorm2d(5)),
    ("r_maxpool1d_default", nn.MaxPool1d(3)),
    ("r_avgpool1d_default", nn.AvgPool1d(3)),
    ("r_avgpool2d_default", nn.AvgPool2d(2)),
    ("r_adaptive_avg2d_square", nn.AdaptiveAvgPool2d(3)),
    ("r_adaptive_avg2d_pair", nn.AdaptiveAvgPool2d((3, 4))),
    ("r_leaky_relu_default", nn.LeakyReLU()),
    ("r_softplus_default", nn.Softplus()),
    ("r_hardtanh_default", nn.Hardtanh()),
    ("r_prelu_default", nn.PReLU()),
    ("r_bag_default", nn.EmbeddingBag(10, 3)),
    ("r_conv3d_default", nn.Conv3d(2, 4, 3)),
    ("r_in1d_momentum_none", nn.InstanceNorm1d(3, momentum=None)),
    ("r_conv_t3d_default", nn.ConvTranspose3d(2, 4, 3)),
    ("r_maxpool2d_indices", nn.MaxPool2d((2, 3), stride=1, padding=1, dilation=(1, 2), ceil_mode=True,
                                         return_indices=True)),
]
with open(sys.argv[2] if len(sys.argv) > 2 else "tests/data/nn_layers_repr.h", "w") as h:
    h.write("/* Written by tests/golden/gen_layers.py: repr() of the modules of "
            "tests/test_nn_layers.c, by PyTorch %s. */\n" % torch.__version__.split("+")[0])
    h.write("static const struct {\n    const char *name, *repr;\n} layer_reprs[] = {\n")
    for name, s in reprs + [(n, repr(m)) for n, m in extra]:
        h.write('    {"%s", "%s"},\n' % (name, s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")))
    h.write("};\n")
