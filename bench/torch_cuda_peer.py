#!/usr/bin/env python3
"""PyTorch's figures for bench/cuda_ops on the same GPU, under the same names
(prefixed "torch_"): elementwise bandwidth against a device copy, bf16 matmul and the
host cost of launching an op from Python (PyTorch's Python path: its C++ dispatcher
alone is cheaper than this). Prints "name value unit" lines.

    python3 bench/torch_cuda_peer.py [--quick]
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


print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
elementwise(1 << 24, "16M")
if not quick:
    elementwise(1 << 28, "256M")
softmax()
matmul(4096)
if not quick:
    matmul(8192)
launch()
