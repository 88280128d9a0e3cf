"""PyTorch's side of bench/rnn: nn.LSTM(512, 512, num_layers=2) over a (128, 32, 512)
float32 sequence, one training step (forward, sum, backward) and the forward alone
under inference mode, each the median of several runs.

    python3 bench/torch_rnn_peer.py [--device cpu|cuda] [--precision highest|high]
                                    [--threads N] [--reps N] [--no-mkldnn] [--no-cudnn]
                                    [--forward-only]

Prints the names bench/rnn prints:
    lstm.<device>.s128b32h512l2.ms_per_step
    lstm.<device>.s128b32h512l2.fwd_ms
and on the CPU the same as the process's CPU time (.cpu_ms_per_step, .fwd_cpu_ms).
On x86 PyTorch runs float32 LSTMs on the CPU through oneDNN's fused RNN kernel
(mkldnn_rnn) where it is built in; --no-mkldnn turns that off
(torch.backends.mkldnn.enabled = False) for its composite path, printed with the tag
.nomkldnn. On CUDA it runs cuDNN's RNN; --no-cudnn turns that off for its composite
path (tag .nocudnn). --precision sets both torch.backends.cudnn.allow_tf32 (PyTorch's
default is True: TF32) and the float32 matmul precision, so "highest" is full float32
everywhere and "high" is TF32 everywhere.
"""
import argparse
import time

import torch


def median_ms(fn, reps):
    """Medians of the wall time and of the process's CPU time, in ms."""
    fn()
    ts, cs = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        ts.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
    ts.sort()
    cs.sort()
    return 1e3 * ts[len(ts) // 2], 1e3 * cs[len(cs) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--no-mkldnn", action="store_true")
    ap.add_argument("--no-cudnn", action="store_true")
    ap.add_argument("--forward-only", action="store_true")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--precision", default="highest", choices=["highest", "high"])
    args = ap.parse_args()
    cuda = args.device == "cuda"
    torch.set_float32_matmul_precision(args.precision)
    torch.backends.cudnn.allow_tf32 = args.precision == "high"
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.no_mkldnn:
        torch.backends.mkldnn.enabled = False
    if args.no_cudnn:
        torch.backends.cudnn.enabled = False
    torch.manual_seed(0)
    m = torch.nn.LSTM(512, 512, num_layers=2).to(args.device)
    x = torch.randn(128, 32, 512, device=args.device)
    tag = f"lstm.{args.device}.s128b32h512l2"
    tag += ".nomkldnn" if args.no_mkldnn else ""
    tag += ".nocudnn" if args.no_cudnn else ""
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def step():
        m.zero_grad(set_to_none=True)
        y, _ = m(x)
        y.sum().backward()
        sync()

    if not args.forward_only:
        wall, cpu = median_ms(step, args.reps)
        print(f"{tag}.ms_per_step {wall:.1f} ms", flush=True)
        if not cuda:
            print(f"{tag}.cpu_ms_per_step {cpu:.1f} ms", flush=True)

    def fwd():
        with torch.inference_mode():
            m(x)
        sync()

    wall, cpu = median_ms(fwd, args.reps)
    print(f"{tag}.fwd_ms {wall:.1f} ms", flush=True)
    if not cuda:
        print(f"{tag}.fwd_cpu_ms {cpu:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
