"""PyTorch's side of the bench/ops figures that shared/bench/torch_peer.py does not print.

    python3 bench/torch_ops.py --threads N

torch_peer.py --what ops gives tiny_add (from Python), add, sum and matmul; this adds
the copy ceiling, mul, exp and softmax with the names and byte counts bench/ops uses,
so bench/compare.py pairs every line. Each figure is the median of several runs.
"""
import argparse
import time

import torch


def median_time(fn, inner, reps=9):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        ts.append((time.perf_counter() - t0) / inner)
    ts.sort()
    return ts[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    for e in (20, 24):
        n = 1 << e
        a, b, out = torch.rand(n), torch.rand(n), torch.empty(n)
        t = median_time(lambda: out.copy_(a), 5)
        print(f"ops.copy_f32_{n}.GBps {8 * n / t / 1e9:.1f} GB/s")
        t = median_time(lambda: torch.mul(a, b, out=out), 5)
        print(f"ops.mul_f32_{n}.GBps {12 * n / t / 1e9:.1f} GB/s")
        t = median_time(lambda: torch.exp(a, out=out), 5)
        print(f"ops.exp_f32_{n}.GBps {8 * n / t / 1e9:.1f} GB/s")
    m = 4096
    x = torch.rand(m, m)
    t = median_time(lambda: torch.softmax(x, 1), 3)
    print(f"ops.softmax_f32_{m}.GBps {8 * m * m / t / 1e9:.1f} GB/s")


if __name__ == "__main__":
    main()
