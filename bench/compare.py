"""Prints ctorch's benchmark figures beside PyTorch's from the same run.

    python3 bench/compare.py CTORCH_OUTPUT TORCH_OUTPUT

Both files hold "name value unit" lines (bench/ops, bench/train_char_gpt and
shared/bench/torch_peer.py print them; equal names are the same workload). For rates
(GB/s, GFLOP/s, img/s, ...) the ratio is ctorch/PyTorch; for times (ms, us) it is
PyTorch/ctorch, so > 1 always means ctorch is faster.
"""
import sys


def read(path):
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                try:
                    out[parts[0]] = (float(parts[1]), " ".join(parts[2:]))
                except ValueError:
                    pass
    return out


def main():
    ours, theirs = read(sys.argv[1]), read(sys.argv[2])
    print(f"{'figure':40s} {'ctorch':>12s} {'PyTorch':>12s}  ratio (>1: ctorch faster)")
    for name, (v, unit) in ours.items():
        peer = theirs.get(name)
        if peer is None:
            print(f"{name:40s} {v:12.3f} {'-':>12s}  {unit}")
            continue
        p = peer[0]
        is_time = unit.split()[0] in ("ms", "us", "s")
        ratio = (p / v if is_time else v / p) if v and p else float("nan")
        print(f"{name:40s} {v:12.3f} {p:12.3f}  {ratio:5.2f}x  {unit}")
    for name, (p, unit) in theirs.items():
        if name not in ours:
            print(f"{name:40s} {'-':>12s} {p:12.3f}  {unit}")


if __name__ == "__main__":
    main()
