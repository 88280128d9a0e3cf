"""Prints ctorch's benchmark figures beside PyTorch's from the same run.

    python3 bench/compare.py CTORCH_OUTPUT TORCH_OUTPUT
    python3 bench/compare.py CT_1 TORCH_1 CT_2 TORCH_2 ...     (several rounds)

Both files hold "name value unit" lines (bench/ops, bench/train_char_gpt and
shared/bench/torch_peer.py print them; equal names are the same workload). For rates
(GB/s, GFLOP/s, img/s, ...) the ratio is ctorch/PyTorch; for times (ms, us) it is
PyTorch/ctorch, so > 1 always means ctorch is faster.

With several rounds (pairs of files, each pair measured back to back), every figure
shows the median of each side, the median of the per-round ratios and their range:
on a shared machine single rounds move by tens of percent, and the median ratio is
the figure to quote.
"""
import statistics
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


def ratio_of(v, p, unit):
    is_time = unit.split()[0] in ("ms", "us", "s")
    return (p / v if is_time else v / p) if v and p else float("nan")


def rounds(paths):
    pairs = [(read(paths[i]), read(paths[i + 1])) for i in range(0, len(paths), 2)]
    print(f"{len(pairs)} rounds: medians, and the median of the per-round ratios (>1: ctorch faster)")
    print(f"{'figure':40s} {'ctorch':>10s} {'PyTorch':>10s} {'ratio':>7s}  {'range':>13s}")
    for name, (_, unit) in pairs[0][0].items():
        vs = [o[name][0] for o, _ in pairs if name in o]
        ps = [t[name][0] for _, t in pairs if name in t]
        rs = [ratio_of(o[name][0], t[name][0], unit) for o, t in pairs if name in o and name in t]
        v = f"{statistics.median(vs):10.3f}"
        if not rs:
            print(f"{name:40s} {v} {'-':>10s}  {unit}")
            continue
        span = f"{min(rs):.2f}-{max(rs):.2f}"
        print(f"{name:40s} {v} {statistics.median(ps):10.3f} {statistics.median(rs):6.2f}x  {span:>13s}  {unit}")


def main():
    if len(sys.argv) < 3 or len(sys.argv) % 2 == 0:
        sys.exit(__doc__)
    if len(sys.argv) > 3:
        rounds(sys.argv[1:])
        return
    ours, theirs = read(sys.argv[1]), read(sys.argv[2])
    print(f"{'figure':40s} {'ctorch':>12s} {'PyTorch':>12s}  ratio (>1: ctorch faster)")
    for name, (v, unit) in ours.items():
        peer = theirs.get(name)
        if peer is None:
            print(f"{name:40s} {v:12.3f} {'-':>12s}  {unit}")
            continue
        p = peer[0]
        ratio = ratio_of(v, p, unit)
        print(f"{name:40s} {v:12.3f} {p:12.3f}  {ratio:5.2f}x  {unit}")
    for name, (p, unit) in theirs.items():
        if name not in ours:
            print(f"{name:40s} {'-':>12s} {p:12.3f}  {unit}")


if __name__ == "__main__":
    main()
