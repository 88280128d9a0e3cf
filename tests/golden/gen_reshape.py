"""Records what torch.reshape does for inputs of many layouts: view or copy, the
result's shape, strides and storage offset, or the error it raises.

Run with PyTorch (the committed file: 2.11):  python3 tests/golden/gen_reshape.py > tests/data/reshape_golden.txt

Each case is a chain of layout operations applied to arange(numel) of a base shape,
then the reshape target. Output lines:
    ops|target|view|shape|strides|offset     (view is 1 or 0)
    ops|target|err|message
where ops is ';'-separated "name args..." with names
    base S...            arange(prod(S), float64).reshape(S); no S: a 0-d tensor
    tr a b               transpose(a, b)
    perm d...            permute(d...)
    sl dim start end step  t[start:end:step] along dim
    sel dim index        select(dim, index)
    ex S...              expand(S...)
    us dim               unsqueeze(dim)
and "-" stands for an empty list (0-d shape). gen_views.py extends the same language
to every view op.
"""
import torch

CASES = [
    ("base 6", "2 3"),
    ("base 2 3", "-1"),
    ("base 2 3;tr 0 1", "-1"),
    ("base 2 3;tr 0 1", "3 2"),
    ("base 2 3;tr 0 1", "3 1 2"),
    ("base 2 3 4;perm 2 0 1", "4 6"),
    ("base 2 3 4;perm 2 0 1", "24"),
    ("base 2 3 4;perm 1 2 0", "12 2"),
    ("base 2 3 4;perm 0 2 1", "2 12"),
    ("base 2 3 4;perm 0 2 1", "2 4 3"),
    ("base 2 3 4;perm 0 2 1", "1 2 4 1 3 1"),
    ("base 4 6;sl 1 0 6 2", "-1"),
    ("base 4 6;sl 1 0 3 1", "-1"),
    ("base 4 6;sl 0 0 4 2", "2 2 3"),
    ("base 4 6;sl 1 1 5 1", "4 2 2"),
    ("base 4 6;sl 1 0 6 3;sl 0 0 4 2", "4"),
    ("base 4 6;sl 1 0 6 3;sl 0 0 4 2", "2 1 2"),
    ("base 8;sl 0 1 8 2", "2 2"),
    ("base 2 3 4;sel 1 1", "-1"),
    ("base 2 3 4;sel 2 0", "-1"),
    ("base 2 3 4;sl 2 0 4 2", "2 6"),
    ("base 3;ex 4 3", "-1"),
    ("base 3;ex 4 3", "4 3"),
    ("base 3;ex 4 3", "2 2 3"),
    ("base 1 3;ex 4 3", "12"),
    ("base 3 4;ex 2 3 4", "6 4"),
    ("base 3 4;ex 2 3 4", "2 12"),
    ("base 3 1;ex 3 5", "3 5 1"),
    ("base 2 1 3;tr 0 2", "6"),
    ("base 2 1 3;tr 0 2", "3 2"),
    ("base 6 1;tr 0 1", "2 3"),
    ("base 2 3;tr 0 1;us 0", "1 3 2"),
    ("base 2 3;tr 0 1;us 1", "6"),
    ("base 0", "0 3"),
    ("base 0", "-1 5"),
    ("base 2 0 3;tr 0 2", "3 0 2"),
    ("base 2 0 3;tr 0 2", "0 6"),
    ("base 0 4;tr 0 1", "-1"),
    ("base 1 2;ex 0 2", "-1"),
    ("base", "1 1"),
    ("base", "-"),
    ("base", "-1"),
    ("base 1", "-"),
    ("base 1 1 1;tr 0 2", "-"),
    ("base 5", "2 -1"),
    ("base 6", "-1 -1"),
    ("base 6", "2 -2"),
    ("base 3 0", "0 -1"),
    ("base 2 3;tr 0 1", "7"),
]


def ints(s):
    return [] if s.strip() in ("", "-") else [int(v) for v in s.split()]


def build(ops, extra=None):
    x = None
    for op in ops.split(";"):
        name, *rest = op.split(" ", 1)
        args = ints(rest[0]) if rest else []
        if extra is not None and name in extra:
            x = extra[name](x, args)
        elif name == "base":
            n = 1
            for s in args:
                n *= s
            x = torch.arange(n, dtype=torch.float64).reshape(args)
        elif name == "tr":
            x = x.transpose(*args)
        elif name == "perm":
            x = x.permute(*args)
        elif name == "sl":
            d, a, b, st = args
            x = x[(slice(None),) * d + (slice(a, b, st),)]
        elif name == "sel":
            x = x.select(*args)
        elif name == "ex":
            x = x.expand(*args)
        elif name == "us":
            x = x.unsqueeze(*args)
        else:
            raise ValueError(name)
    return x


def fmt(v):
    return " ".join(str(i) for i in v) if len(v) else "-"


def main():
    for ops, target in CASES:
        x = build(ops)
        root = x._base if x._base is not None else x
        try:
            y = x.reshape(ints(target))
        except RuntimeError as e:
            print(f"{ops}|{target}|err|{str(e).splitlines()[0]}")
            continue
        view = y._base is root
        assert torch.equal(y.flatten(), x.flatten())
        print(f"{ops}|{target}|{int(view)}|{fmt(y.shape)}|{fmt(y.stride())}|{y.storage_offset()}")


if __name__ == "__main__":
    main()
