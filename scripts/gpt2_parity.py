"""GPT-2 124M in ctorch against PyTorch from the same initial weights, on the GPU.

Builds shared/bench/torch_peer.py's GPT (nanoGPT's model) with GPT-2's initialisation,
writes its weights and one batch of random tokens to a PyTorch checkpoint, trains it
for --steps steps in float32 (no TF32) with torch.optim.AdamW(lr=3e-4), and runs
ctorch's bench/train_gpt2 --init on the same checkpoint. Every step's loss must agree
to --rtol (default 1e-4) relative. Then both run again under bf16 autocast: ctorch's
bf16 losses must stay within --bf16-rtol (default 2e-2) of its float32 ones, the band
PyTorch's own bf16 run shows (printed beside).

  python3 scripts/gpt2_parity.py --bench build-gpu/bench/train_gpt2 [--batch 8]
      [--steps 20] [--work DIR] [--grads [--grads-after K]]

--grads compares every parameter's gradient, ctorch's and PyTorch's bf16 ones against
PyTorch's float32 one, at the initial weights or at those PyTorch's float32 run reaches
after K steps: a kernel that is wrong only on trained weights shows there.

Exit status 0 when both checks hold. Needs PyTorch and a GPU; never run by make test.
"""
import argparse, math, os, subprocess, sys
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(s, d, h):
        super().__init__()
        s.h = h
        s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        s.qkv, s.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        s.fc, s.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, s.h, C // s.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + s.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + s.fc2(F.gelu(s.fc(s.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(s, V, T, L, H, D):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        s.blocks = nn.ModuleList(Block(D, H) for _ in range(L))
        s.lnf = nn.LayerNorm(D)
        s.head = nn.Linear(D, V, bias=False)
        s.head.weight = s.wte.weight
        for n, p in s.named_parameters():  # GPT-2's initialisation, as nanoGPT's
            if ".ln" in n or n.startswith("ln"):
                continue
            if n.endswith(".bias"):
                nn.init.zeros_(p)
            elif n.endswith("proj.weight") or n.endswith("fc2.weight"):
                nn.init.normal_(p, 0, 0.02 / math.sqrt(2 * L))
            else:
                nn.init.normal_(p, 0, 0.02)

    def forward(s, idx, tgt):
        x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in s.blocks:
            x = b(x)
        logits = s.head(s.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), tgt.view(-1))


def torch_losses(state, x, y, steps, amp, final=None):
    """Every step's loss; the weights after the last step go into final (a dict) when given."""
    torch.manual_seed(0)
    m = GPT(50304, 1024, 12, 12, 768).cuda()
    m.load_state_dict(state)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    out = []
    for _ in range(steps):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = m(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        out.append(loss.item())
    if final is not None:
        final.update({k: v.detach().cpu().clone() for k, v in m.state_dict().items()})
    return out


def torch_grads(state, x, y, amp):
    m = GPT(50304, 1024, 12, 12, 768).cuda()
    m.load_state_dict(state)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        loss = m(x, y)
    loss.backward()
    return {n: p.grad.float() for n, p in m.named_parameters()}


def compare_grads(a, state, x, y, init):
    """The first step's gradient of every parameter: ctorch's and PyTorch's bf16 ones
    against PyTorch's float32 one (relative norm of the difference), ctorch's float32
    one too. A bf16 gradient much further off than PyTorch's names the culprit."""
    ref = torch_grads(state, x, y, False)
    t16 = torch_grads(state, x, y, True)
    got = {}
    for prec in ("fp32", "bf16"):
        path = os.path.join(a.work, f"grads_{prec}.pt")
        ctorch_losses(a.bench, init, a.batch, 1, prec, ["--grads", path])
        got[prec] = torch.load(path)
    print("parameter                      ctorch fp32  ctorch bf16  torch bf16   (|g - g_torch_fp32| / |g_torch_fp32|)")
    rows = []
    for n, g in ref.items():
        if n == "head.weight":
            continue
        r = lambda h: ((h.cuda() - g).norm() / g.norm().clamp_min(1e-30)).item()
        rows.append((r(got["bf16"][n]), n, r(got["fp32"][n]), r(t16[n])))
    for c16, n, c32, t in sorted(rows, reverse=True)[:16]:
        print(f"{n:30s} {c32:.2e}     {c16:.2e}     {t:.2e}")


def ctorch_losses(bench, init, batch, steps, precision, extra=()):
    cmd = [bench, "--device", "cuda", "--precision", precision, "--batch", str(batch), "--steps", str(steps),
           "--warmup", "0", "--init", init, "--losses", "1", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    return [float(l.split()[3]) for l in r.stdout.splitlines() if l.startswith("step ")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--bf16-rtol", type=float, default=2e-2)
    ap.add_argument("--work", default="/tmp/gpt2_parity")
    ap.add_argument("--grads", action="store_true", help="also compare the first step's gradients")
    ap.add_argument("--grads-after", type=int, default=0, metavar="K",
                    help="compare the gradients at the weights PyTorch's float32 run reaches after K steps")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(a.work, exist_ok=True)
    torch.manual_seed(1234)
    m = GPT(50304, 1024, 12, 12, 768)
    x = torch.randint(0, 50257, (a.batch, 1024))
    y = torch.randint(0, 50257, (a.batch, 1024))
    state = {k: v.detach().clone() for k, v in m.state_dict().items()}
    init = os.path.join(a.work, "init.pt")
    torch.save({"model": state, "x": x, "y": y}, init)
    if a.grads:
        gstate, ginit = state, init
        if a.grads_after > 0:
            gstate = {}
            torch_losses(state, x.cuda(), y.cuda(), a.grads_after, False, gstate)
            ginit = os.path.join(a.work, f"init_after{a.grads_after}.pt")
            torch.save({"model": gstate, "x": x, "y": y}, ginit)
        compare_grads(a, gstate, x.cuda(), y.cuda(), ginit)
    ref = torch_losses(state, x.cuda(), y.cuda(), a.steps, False)
    got = ctorch_losses(a.bench, init, a.batch, a.steps, "fp32")
    ok = len(got) == a.steps
    worst = 0.0
    print(f"GPT-2 124M B{a.batch} T1024 float32, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("step  pytorch      ctorch       rel.diff")
    for i, (p, c) in enumerate(zip(ref, got)):
        rel = abs(p - c) / abs(p)
        worst = max(worst, rel)
        print(f"{i:4d}  {p:.7f}  {c:.7f}  {rel:.2e}")
    ok = ok and worst <= a.rtol
    print(f"fp32: worst relative difference {worst:.2e} (limit {a.rtol:g}): {'ok' if ok else 'FAILED'}")
    ref16 = torch_losses(state, x.cuda(), y.cuda(), a.steps, True)
    got16 = ctorch_losses(a.bench, init, a.batch, a.steps, "bf16")
    band_t = max(abs(p - q) / abs(q) for p, q in zip(ref16, ref))
    band_c = max(abs(p - q) / abs(q) for p, q in zip(got16, got)) if len(got16) == len(got) == a.steps else math.inf
    ok16 = band_c <= a.bf16_rtol
    print(f"bf16: ctorch bf16 vs ctorch fp32 worst {band_c:.2e}, PyTorch bf16 vs PyTorch fp32 worst {band_t:.2e} "
          f"(limit {a.bf16_rtol:g}): {'ok' if ok16 else 'FAILED'}")
    print("bf16 losses (pytorch, ctorch):", " ".join(f"{p:.4f}/{c:.4f}" for p, c in zip(ref16, got16)))
    return 0 if ok and ok16 else 1


if __name__ == "__main__":
    sys.exit(main())
