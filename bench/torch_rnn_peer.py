"""PyTorch's side of bench/rnn: nn.LSTM(512, 512, num_layers=2) over a (128, 32, 512)
float32 sequence on the CPU, one training step (forward, sum, backward) and the forward
alone under inference mode, each the median of several runs.

    python3 bench/torch_rnn_peer.py [--threads N] [--reps N]

Prints the names bench/rnn prints:
    lstm.cpu.s128b32h512l2.ms_per_step
    lstm.cpu.s128b32h512l2.fwd_ms
and the same as the process's CPU time (.cpu_ms_per_step, .fwd_cpu_ms).
On x86 PyTorch runs float32 LSTMs on the CPU through oneDNN's fused RNN kernel
(mkldnn_rnn) where it is built in; --no-mkldnn turns that off
(torch.backends.mkldnn.enabled = False) for its composite path, printed as
lstm.cpu.s128b32h512l2.nomkldnn.ms_per_step and .fwd_ms.
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
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.no_mkldnn:
        torch.backends.mkldnn.enabled = False
    torch.manual_seed(0)
    m = torch.nn.LSTM(512, 512, num_layers=2)
    x = torch.randn(128, 32, 512)
    tag = "lstm.cpu.s128b32h512l2" + (".nomkldnn" if args.no_mkldnn else "")

    def step():
        m.zero_grad(set_to_none=True)
        y, _ = m(x)
        y.sum().backward()

    wall, cpu = median_ms(step, args.reps)
    print(f"{tag}.ms_per_step {wall:.1f} ms", flush=True)
    print(f"{tag}.cpu_ms_per_step {cpu:.1f} ms", flush=True)

    def fwd():
        with torch.inference_mode():
            m(x)

    wall, cpu = median_ms(fwd, args.reps)
    print(f"{tag}.fwd_ms {wall:.1f} ms", flush=True)
    print(f"{tag}.fwd_cpu_ms {cpu:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
