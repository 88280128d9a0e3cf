#!/usr/bin/env python3
"""PyTorch's figures for bench/cuda_ops on the same GPU, under the same names
(prefixed "torch_"): elementwise bandwidth against a device copy, bf16 matmul, flash
attention (its FLASH_ATTENTION backend, with and without dropout) and the host cost of
launching an op from Python (PyTorch's Python path: its C++ dispatcher alone is
cheaper than this). Prints "name value unit" lines.

    python3 bench/torch_cuda_peer.py [--quick | --attention | --grad]

--grad: the gradient kernels of a GPT-2 step (bench/cuda_ops --nn's column sums,
gelu backward, slice add and layer_norm backward).
"""
import sys
import time

try:
    import torch
except ImportError:
    print("# torch_cuda_peer: PyTorch is not installed; nothing measured")
    sys.exit(0)

if not torch.cuda.is_available():
    print("# torch_cuda_peer: no CUDA device; nothing measured")
    sys.exit(0)

quick = "--quick" in sys.argv[1:]
attention_only = "--attention" in sys.argv[1:]
grad_only = "--grad" in sys.argv[1:]


def time_ms(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / iters


def elementwise(n, label):
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")
    out = torch.empty(n, device="cuda")
    iters = 20 if n > (1 << 26) else 100
    nbytes = 4.0 * n
    copy = time_ms(lambda: out.copy_(x), 3, iters)
    add = time_ms(lambda: torch.add(x, y, out=out), 3, iters)
    mul = time_ms(lambda: torch.mul(x, y, out=out), 3, iters)
    s = time_ms(lambda: torch.sum(x), 3, iters)
    cbw, abw, mbw = 2 * nbytes / (copy * 1e6), 3 * nbytes / (add * 1e6), 3 * nbytes / (mul * 1e6)
    print(f"torch_copy_f32_{label} {cbw:.1f} GB/s")
    print(f"torch_add_f32_{label} {abw:.1f} GB/s")
    print(f"torch_mul_f32_{label} {mbw:.1f} GB/s")
    print(f"torch_add_f32_{label}_vs_copy {abw / cbw:.3f} ratio")
    print(f"torch_mul_f32_{label}_vs_copy {mbw / cbw:.3f} ratio")
    print(f"torch_sum_f32_{label} {nbytes / (s * 1e6):.1f} GB/s")
    print(f"torch_sum_f32_{label}_vs_copy {nbytes / (s * 1e6) / cbw:.3f} ratio")
    del x, y, out
    torch.cuda.empty_cache()


def softmax():
    x = torch.randn(4096, 4096, device="cuda")
    out = torch.empty_like(x)
    ms = time_ms(lambda: torch.softmax(x, 1, out=out), 3, 50)
    print(f"torch_softmax_f32_4096x4096 {2.0 * 4.0 * 4096 * 4096 / (ms * 1e6):.1f} GB/s")


def matmul(n):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    ms = time_ms(lambda: torch.mm(a, b, out=out), 3, 10 if n >= 8192 else 30)
    print(f"torch_mm_bf16_{n} {2.0 * n ** 3 / (ms * 1e9):.1f} TFLOP/s")


def launch():
    a = torch.ones(1, device="cuda")
    b = torch.ones(1, device="cuda")
    out = torch.empty(1, device="cuda")
    iters = 20000
    for _ in range(1000):
        torch.add(a, b, out=out)
        torch.add(a, b)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        torch.add(a, b, out=out)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    for _ in range(iters):
        torch.add(a, b)
    t2 = time.perf_counter()
    torch.cuda.synchronize()
    print(f"torch_launch_add_out_tiny {(t1 - t0) * 1e6 / iters:.2f} us")
    print(f"torch_launch_add_tiny {(t2 - t1) * 1e6 / iters:.2f} us")


def attention(b, h, t, d, dropout, label):
    """bench/cuda_ops' attention cases: causal bf16, forward and forward + backward."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    torch.manual_seed(3)
    q, k, v, go = (torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    qg, kg, vg = (x.clone().requires_grad_(True) for x in (q, k, v))
    fwd_flop = 4.0 * b * h * t * t * d / 2
    tag = f"_p{dropout:g}" if dropout > 0 else ""
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        def fwd():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)

        def fwd_bwd():
            y = F.scaled_dot_product_attention(qg, kg, vg, dropout_p=dropout, is_causal=True)
            torch.autograd.grad(y, (qg, kg, vg), go)

        for name, fn, mult in (("flash_attn_fwd", fwd, 1.0), ("flash_attn_fwd_bwd", fwd_bwd, 3.5)):
            ms = time_ms(fn, 3, 20)
            print(f"torch_{name}{tag}_bf16_{label}_causal {ms:.3f} ms")
            print(f"torch_{name}{tag}_bf16_{label}_causal {fwd_flop * mult / (ms * 1e9):.1f} TFLOP/s")


def grad_kernels():
    """bench/cuda_ops' gradient kernels of a GPT-2 bf16 step, under the same names."""
    import torch.nn.functional as F
    torch.manual_seed(6)
    rows = 32768
    for n in (768, 2304, 3072):
        a = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        ms = time_ms(lambda: a.sum(0), 3, 30)
        print(f"torch_column_sum_bf16_{rows}x{n} {rows * n * 2 / (ms * 1e6):.1f} GB/s ({ms:.3f} ms)")
    gy, x = (torch.randn(rows, 3072, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ms = time_ms(lambda: torch.ops.aten.gelu_backward(gy, x, approximate="tanh"), 3, 30)
    print(f"torch_gelu_backward_bf16_{rows}x3072 {3.0 * rows * 3072 * 2 / (ms * 1e6):.1f} GB/s ({ms:.3f} ms)")
    g = torch.randn(rows, 768, device="cuda", dtype=torch.bfloat16)
    p = torch.zeros(rows, 2304, device="cuda", dtype=torch.bfloat16)
    ms = time_ms(lambda: p[:, 768:1536].add_(g), 3, 30)
    print(f"torch_slice_add_bf16_{rows}x768_of_2304 {3.0 * rows * 768 * 2 / (ms * 1e6):.1f} GB/s ({ms:.3f} ms)")
    for dt, label in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        x = torch.randn(rows, 768, device="cuda", dtype=dt, requires_grad=True)
        w = torch.randn(768, device="cuda", dtype=dt, requires_grad=True)
        b = torch.randn(768, device="cuda", dtype=dt, requires_grad=True)
        gy = torch.randn(rows, 768, device="cuda", dtype=dt)
        y = F.layer_norm(x, (768,), w, b, 1e-5)
        ms = time_ms(lambda: torch.autograd.grad(y, (x, w, b), gy, retain_graph=True), 3, 50)
        nbytes = rows * 768 * x.element_size()
        print(f"torch_layer_norm_bwd_{label}_{rows}x768 {3 * nbytes / (ms * 1e6):.1f} GB/s ({ms:.3f} ms)")


print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
if grad_only:
    grad_kernels()
    sys.exit(0)
if attention_only:
    for p in (0.0, 0.1):
        attention(32, 12, 1024, 64, p, "b32h12t1024d64")
        attention(64, 6, 256, 64, p, "b64h6t256d64")
    sys.exit(0)
elementwise(1 << 24, "16M")
if not quick:
    elementwise(1 << 28, "256M")
softmax()
matmul(4096)
if not quick:
    matmul(8192)
launch()
for p in (0.0, 0.1):
    attention(32, 12, 1024, 64, p, "b32h12t1024d64")
    attention(64, 6, 256, 64, p, "b64h6t256d64")
