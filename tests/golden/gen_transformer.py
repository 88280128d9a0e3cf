"""Writes tests/data/transformer_golden.txt: nn.MultiheadAttention, the Transformer
encoder and decoder layers, TransformerEncoder / TransformerDecoder and nn.Transformer,
forward values and gradients computed by PyTorch in float64 (the committed file:
PyTorch 2.15), for tests/test_nn_transformer.c.

Run:  torchpy tests/golden/gen_transformer.py   (or python3 with torch installed)

Format: that of tests/data/nn_golden.txt (tests/nn_golden.h reads it): "case NAME"
starts a case; each following line is one tensor, NAME NDIM SIZE... VALUE...
Each case holds
  cfg        the module's kind and arguments (see CFG below; flags as 0/1)
  p.NAME     the module's state dict, keys and order as PyTorch's, every entry set
             from this script's generator (so the values are not PyTorch's init)
  inputs     q k v (MultiheadAttention; self-attention cases have q only, used as
             all three), src / tgt / memory (the layers)
  masks      mask, kpm (MultiheadAttention), src_mask, tgt_mask, memory_mask, src_kpm,
             tgt_kpm, memory_kpm (the layers); a "_bool" suffix marks a bool mask
             stored as 0/1
  out, w     the output and (need_weights) the attention weights
  gout, gw   random gradients of those
  gq ..., g.NAME   the gradients they give to the inputs and every parameter
The case enc_post_relu also saves its module's state dict with torch.save, as
io/transformer_encoder_layer.pt beside the text file (float64 values, full precision).
Values are written with 12 significant digits (the tests compare at 1e-6). Dropout
is 0 throughout; the fast paths are off, so eval and train agree.
"""
import os
import sys

import torch

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
torch.backends.mha.set_fastpath_enabled(False)
path = sys.argv[1] if len(sys.argv) > 1 else "tests/data/transformer_golden.txt"
out = open(path, "w")

# cfg[0]: the kind
MHA, ENC_LAYER, DEC_LAYER, ENCODER, DECODER, TRANSFORMER = range(6)


def emit(name, t):
    t = torch.as_tensor(t).detach()
    vals = t.double().reshape(-1).tolist()
    out.write("%s %d %s %s\n" % (name, t.dim(), " ".join(str(s) for s in t.shape),
                                 " ".join("%.12g" % v for v in vals)))


def set_params(m):
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("norm1.weight") or name.endswith("norm2.weight") or \
                    name.endswith("norm3.weight") or name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.4 * torch.randn_like(p))


def mask_value(name, m):
    if m is None:
        return None
    if m.dtype == torch.bool:
        emit(name + "_bool", m.double())
    else:
        emit(name, m)
    return m


def finish(m, leaves, outs):
    """outs: [(name, tensor)]: emits them, random gradients for them, and the
    gradients of the leaves [(name, tensor)] and the parameters."""
    for k, v in outs:
        emit(k, v)
    gs = []
    for k, v in outs:
        g = torch.randn_like(v)
        emit("g" + k, g)
        gs.append(g)
    params = list(m.named_parameters())
    grads = torch.autograd.grad([v for _, v in outs], [t for _, t in leaves] + [p for _, p in params], gs,
                                allow_unused=True)
    for (k, t), g in zip(leaves, grads[:len(leaves)]):
        emit("g" + k, g if g is not None else torch.zeros_like(t))
    for (k, p), g in zip(params, grads[len(leaves):]):
        emit("g." + k, g if g is not None else torch.zeros_like(p))


def state(m):
    set_params(m)
    for k, v in m.state_dict().items():
        emit("p." + k, v)


def rand(*shape):
    return torch.randn(*shape, requires_grad=True)


def mha_case(name, E, H, L, S, N, batch_first=False, bias=True, add_bias_kv=False, add_zero_attn=False,
             kdim=None, vdim=None, self_attn=False, unbatched=False, need_weights=True, average=True,
             is_causal=False, mask=None, kpm=None):
    m = torch.nn.MultiheadAttention(E, H, dropout=0.0, bias=bias, add_bias_kv=add_bias_kv,
                                    add_zero_attn=add_zero_attn, kdim=kdim, vdim=vdim, batch_first=batch_first)
    out.write("case %s\n" % name)
    emit("cfg", torch.tensor([MHA, E, H, bias, add_bias_kv, add_zero_attn, kdim or 0, vdim or 0, batch_first,
                              need_weights, average, is_causal, self_attn], dtype=torch.float64))
    state(m)

    def seq(n, d):
        if unbatched:
            return rand(n, d)
        return rand(N, n, d) if batch_first else rand(n, N, d)
    q = seq(L, E)
    emit("q", q)
    leaves = [("q", q)]
    if self_attn:
        k = v = q
    else:
        k, v = seq(S, kdim or E), seq(S, vdim or E)
        emit("k", k)
        emit("v", v)
        leaves += [("k", k), ("v", v)]
    mask_value("mask", mask)
    mask_value("kpm", kpm)
    o, w = m(q, k, v, key_padding_mask=kpm, need_weights=need_weights, attn_mask=mask,
             average_attn_weights=average, is_causal=is_causal)
    finish(m, leaves, [("out", o)] + ([("w", w)] if need_weights else []))


def causal(n):
    return torch.nn.Transformer.generate_square_subsequent_mask(n)


def float_mask(*shape):
    return 0.5 * torch.randn(*shape)


E, H, L, S, N = 8, 2, 4, 5, 3
mha_case("mha_plain", E, H, L, S, N)
mha_case("mha_self_bf", E, H, L, L, N, batch_first=True, self_attn=True)
mha_case("mha_noweights", E, H, L, S, N, need_weights=False)
mha_case("mha_noavg", E, H, L, S, N, average=False)
mha_case("mha_bool_mask", E, H, L, S, N, mask=torch.rand(L, S) < 0.3 * (torch.arange(S) > 0))
mha_case("mha_float_mask3d_nw", E, H, L, S, N, need_weights=False, mask=float_mask(N * H, L, S))
mha_case("mha_float_mask3d", E, H, L, S, N, mask=float_mask(N * H, L, S))
kpm_b = torch.tensor([[False, False, False, True, True], [False] * 5, [False, True, False, False, True]])
mha_case("mha_kpm_bool", E, H, L, S, N, kpm=kpm_b)
mha_case("mha_kpm_bool_nw", E, H, L, S, N, need_weights=False, kpm=kpm_b)
mha_case("mha_kpm_float_mask_bool", E, H, L, S, N, kpm=float_mask(N, S), mask=torch.rand(L, S) < 0.3 * (torch.arange(S) > 0))
mha_case("mha_causal_nw", E, H, L, L, N, self_attn=True, need_weights=False, is_causal=True, mask=causal(L))
mha_case("mha_causal_kpm_nw", E, H, L, L, N, self_attn=True, need_weights=False, is_causal=True, mask=causal(L),
         kpm=kpm_b[:, :L])
mha_case("mha_kvdim", E, H, L, S, N, kdim=6, vdim=3)
mha_case("mha_kvdim_bf_nw", E, H, L, S, N, kdim=5, vdim=8, batch_first=True, need_weights=False)
mha_case("mha_nobias", E, H, L, S, N, bias=False)
mha_case("mha_bias_kv_zero_attn", E, H, L, S, N, add_bias_kv=True, add_zero_attn=True, kpm=kpm_b,
         mask=float_mask(L, S))
mha_case("mha_bias_kv_nw", E, H, L, S, N, add_bias_kv=True, need_weights=False, mask=float_mask(N * H, L, S))
mha_case("mha_unbatched", E, H, L, S, N, unbatched=True, kpm=kpm_b[0], mask=float_mask(H, L, S))
mha_case("mha_unbatched_nw", E, 4, L, S, N, unbatched=True, need_weights=False, mask=float_mask(L, S))


def layer_cfg(kind, d, h, dff, act, eps, bf, nf, bias, extra=()):
    return torch.tensor([kind, d, h, dff, act == "gelu", eps, bf, nf, bias] + list(extra), dtype=torch.float64)


def seq(n, d, batch, bf, unbatched=False):
    if unbatched:
        return rand(n, d)
    return rand(batch, n, d) if bf else rand(n, batch, d)


def enc_case(name, d=8, h=2, dff=12, act="relu", eps=1e-5, bf=False, nf=False, bias=True, T=4, B=3,
             src_mask=None, src_kpm=None, is_causal=False, num_layers=0, norm=False, unbatched=False, save=None):
    layer = torch.nn.TransformerEncoderLayer(d, h, dff, 0.0, act, eps, bf, nf, bias)
    if num_layers:
        m = torch.nn.TransformerEncoder(layer, num_layers, torch.nn.LayerNorm(d, eps) if norm else None,
                                        enable_nested_tensor=False)
        cfg = layer_cfg(ENCODER, d, h, dff, act, eps, bf, nf, bias, [is_causal, num_layers, norm])
    else:
        m = layer
        cfg = layer_cfg(ENC_LAYER, d, h, dff, act, eps, bf, nf, bias, [is_causal])
    out.write("case %s\n" % name)
    emit("cfg", cfg)
    state(m)
    if save:
        torch.save(m.state_dict(), os.path.join(os.path.dirname(path), "io", save))
    src = seq(T, d, B, bf, unbatched)
    emit("src", src)
    mask_value("src_mask", src_mask)
    mask_value("src_kpm", src_kpm)
    if num_layers:
        y = m(src, mask=src_mask, src_key_padding_mask=src_kpm, is_causal=is_causal or None)
    else:
        y = m(src, src_mask=src_mask, src_key_padding_mask=src_kpm, is_causal=is_causal)
    finish(m, [("src", src)], [("out", y)])


def dec_case(name, d=8, h=2, dff=12, act="relu", eps=1e-5, bf=False, nf=False, bias=True, T=4, S=5, B=3,
             tgt_mask=None, memory_mask=None, tgt_kpm=None, memory_kpm=None, tgt_is_causal=False,
             num_layers=0, norm=False):
    layer = torch.nn.TransformerDecoderLayer(d, h, dff, 0.0, act, eps, bf, nf, bias)
    if num_layers:
        m = torch.nn.TransformerDecoder(layer, num_layers, torch.nn.LayerNorm(d, eps) if norm else None)
        cfg = layer_cfg(DECODER, d, h, dff, act, eps, bf, nf, bias, [tgt_is_causal, num_layers, norm])
    else:
        m = layer
        cfg = layer_cfg(DEC_LAYER, d, h, dff, act, eps, bf, nf, bias, [tgt_is_causal])
    out.write("case %s\n" % name)
    emit("cfg", cfg)
    state(m)
    tgt, memory = seq(T, d, B, bf), seq(S, d, B, bf)
    emit("tgt", tgt)
    emit("memory", memory)
    for k, v in (("tgt_mask", tgt_mask), ("memory_mask", memory_mask), ("tgt_kpm", tgt_kpm),
                 ("memory_kpm", memory_kpm)):
        mask_value(k, v)
    y = m(tgt, memory, tgt_mask, memory_mask, tgt_kpm, memory_kpm, tgt_is_causal=tgt_is_causal or
          (None if num_layers else False))
    finish(m, [("tgt", tgt), ("memory", memory)], [("out", y)])


def transformer_case(name, d=8, h=2, ne=2, nd=1, dff=12, act="relu", eps=1e-5, bf=False, nf=False, bias=True,
                     T=4, S=5, B=2, src_mask=None, tgt_mask=None, memory_mask=None, src_kpm=None, tgt_kpm=None,
                     memory_kpm=None):
    m = torch.nn.Transformer(d, h, ne, nd, dff, 0.0, act, None, None, eps, bf, nf, bias)
    out.write("case %s\n" % name)
    emit("cfg", torch.tensor([TRANSFORMER, d, h, dff, act == "gelu", eps, bf, nf, bias, ne, nd],
                             dtype=torch.float64))
    state(m)
    src, tgt = seq(S, d, B, bf), seq(T, d, B, bf)
    emit("src", src)
    emit("tgt", tgt)
    for k, v in (("src_mask", src_mask), ("tgt_mask", tgt_mask), ("memory_mask", memory_mask),
                 ("src_kpm", src_kpm), ("tgt_kpm", tgt_kpm), ("memory_kpm", memory_kpm)):
        mask_value(k, v)
    y = m(src, tgt, src_mask, tgt_mask, memory_mask, src_kpm, tgt_kpm, memory_kpm)
    finish(m, [("src", src), ("tgt", tgt)], [("out", y)])


kpm4 = torch.tensor([[False, False, True, True], [False] * 4, [False, True, False, False]])
enc_case("enc_post_relu", save="transformer_encoder_layer.pt")
enc_case("enc_pre_gelu_bf", act="gelu", nf=True, bf=True)
enc_case("enc_kpm_bool", src_kpm=kpm4)
enc_case("enc_causal", src_mask=causal(4), is_causal=True, nf=True)
enc_case("enc_bool_mask_float_kpm", src_mask=torch.triu(torch.ones(4, 4, dtype=torch.bool), 1),
         src_kpm=float_mask(3, 4), bf=True)
enc_case("enc_nobias_eps", bias=False, eps=1e-3, act="gelu")
enc_case("enc_unbatched", unbatched=True, src_mask=float_mask(4, 4))
enc_case("encoder_2_norm", num_layers=2, norm=True, src_kpm=kpm4, nf=True)
enc_case("encoder_2_causal_bf", num_layers=2, src_mask=causal(4), bf=True)
kpm5 = torch.tensor([[False, False, False, True, True], [False] * 5, [False, True, False, False, True]])
dec_case("dec_post_relu")
dec_case("dec_pre_gelu_bf_masks", act="gelu", nf=True, bf=True, tgt_mask=causal(4), tgt_is_causal=True,
         memory_kpm=kpm5, tgt_kpm=kpm4)
dec_case("dec_bool_masks", tgt_mask=torch.triu(torch.ones(4, 4, dtype=torch.bool), 1),
         memory_mask=float_mask(4, 5), memory_kpm=float_mask(3, 5))
dec_case("dec_nobias", bias=False)
dec_case("decoder_2_norm", num_layers=2, norm=True, tgt_mask=causal(4), memory_kpm=kpm5)
transformer_case("transformer_post", src_kpm=kpm5[:2], tgt_mask=causal(4), memory_kpm=kpm5[:2])
transformer_case("transformer_pre_bf_gelu", nf=True, bf=True, act="gelu", ne=1, nd=2, tgt_mask=causal(4),
                 src_mask=float_mask(5, 5), memory_mask=float_mask(4, 5))
out.close()
