#!/usr/bin/env python3
"""PyTorch's side of `ctorch train char-gpt --preset shakespeare --device cuda --dtype bf16`
with the preset's dropout (nanoGPT's shakespeare-char: 6 layers, 6 heads, 384 wide,
block 256, batch 64, dropout 0.2, AdamW lr 1e-3 betas (0.9, 0.99), clip 1.0, bf16
autocast): the median step time eager and compiled, on random tokens of a 65-symbol
vocabulary. Prints "name value unit" lines.

    python3 bench/torch_char_dropout_peer.py [--steps N] [--no-compile]
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, h, p):
        super().__init__()
        self.h, self.p = h, p
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True)
        x = x + self.drop(self.proj(y.transpose(1, 2).contiguous().view(b, t, c)))
        return x + self.drop(self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(self, vocab, block, layers, heads, width, p):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(block, width)
        self.drop = nn.Dropout(p)
        self.blocks = nn.ModuleList(Block(width, heads, p) for _ in range(layers))
        self.lnf = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx, tgt):
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device)))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), tgt.view(-1))


def bench(compiled, steps, warm=10):
    torch.manual_seed(0)
    m = GPT(65, 256, 6, 6, 384, 0.2).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.99), fused=True)
    f = torch.compile(m) if compiled else m
    x = torch.randint(0, 65, (64, 256), device="cuda")
    y = torch.randint(0, 65, (64, 256), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = f(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    tag = "char_dropout0.2." + ("compile" if compiled else "eager")
    print(f"{tag}.ms_per_step {ts[len(ts) // 2] * 1e3:.2f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    bench(False, a.steps)
    if not a.no_compile:
        bench(True, a.steps)
