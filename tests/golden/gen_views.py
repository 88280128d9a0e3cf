"""Records the metadata and values torch gives for chains of view operations, so that
ctorch's shapes, strides, storage offsets, storage sharing and element values can be
compared case by case.

Run with PyTorch (the committed file: 2.11):  python3 tests/golden/gen_views.py > tests/data/views_golden.txt

The op language is gen_reshape.py's, plus
    narrow d start length     unfold d size step      diag offset d1 d2
    sq                        sqd d                   flat start end
    unflat d S...             mv src dst              t
    view S...                 rs S...                 as n S(n) strides(n) offset
Output lines:
    ops|shape|strides|offset|shares|values      (values row-major, "-" when empty)
    ops|err|message
"""
import torch

from gen_reshape import build, fmt, ints  # the shared op language


def as_strided(x, a):
    n = a[0]
    return x.as_strided(a[1:1 + n], a[1 + n:1 + 2 * n], a[1 + 2 * n])


EXTRA = {
    "narrow": lambda x, a: x.narrow(*a),
    "unfold": lambda x, a: x.unfold(*a),
    "diag": lambda x, a: x.diagonal(*a),
    "sq": lambda x, a: x.squeeze(),
    "sqd": lambda x, a: x.squeeze(*a),
    "flat": lambda x, a: x.flatten(*a),
    "unflat": lambda x, a: x.unflatten(a[0], a[1:]),
    "mv": lambda x, a: x.movedim(*a),
    "t": lambda x, a: x.t(),
    "view": lambda x, a: x.view(a),
    "rs": lambda x, a: x.reshape(a),
    "as": as_strided,
}

CASES = [
    # transpose / permute / movedim / t
    "base 2 3 4;tr 0 2",
    "base 2 3 4;tr -1 1",
    "base 3;tr 0 -1",
    "base;tr 0 -1",
    "base 2 3 4;perm 1 2 0",
    "base 2 3 4;sl 2 1 4 2;perm 2 0 1",
    "base;perm",
    "base 2 3 4;mv 0 2",
    "base 2 3 4;mv -1 0",
    "base 2 3 4;mv 1 1",
    "base;mv 0 -1",
    "base 2 3;t",
    "base 4;t",
    "base;t",
    "base 2 3 4;t",
    # expand
    "base 3 1;ex 2 3 4",
    "base 3 1;ex -1 5",
    "base 2 3;ex 1 2 3",
    "base 2 3;ex 1 1 2 3",
    "base;ex 2 2",
    "base;ex 1",
    "base 2 1;ex 2 0",
    "base 2 3;ex 2 4",
    "base 2 3;ex -1 -1 3",
    "base 2 3;ex 4",
    # squeeze / unsqueeze
    "base 1 3 1 2;sq",
    "base 1 3 1 2;tr 1 3;sq",
    "base 1 3 1 2;sqd 2",
    "base 1 3 1 2;sqd 1",
    "base 1 3 1 2;sqd -4",
    "base;sqd 0",
    "base;sqd -1",
    "base 1 1;sq",
    "base 2 3;tr 0 1;us 0",
    "base 2 3;tr 0 1;us 1",
    "base 2 3;tr 0 1;us 2",
    "base 2 3;us -1",
    "base;us 0",
    "base 0 3;us 1",
    "base 2 3;us 3",
    # flatten / unflatten
    "base 2 3 4;flat 1 2",
    "base 2 3 4;tr 0 1;flat 0 1",
    "base 2 3 4;tr 0 1;flat 1 2",
    "base 2 3 4;flat 1 1",
    "base;flat 0 -1",
    "base 2 0 3;flat 0 1",
    "base 2 3;flat 1 0",
    "base 2 12;unflat 1 3 -1",
    "base 2 3 4;tr 0 2;unflat 0 2 2",
    "base 2 3 4;tr 0 2;unflat 1 3 1",
    "base 2 3;unflat 1 2 2",
    "base 2 3;unflat 0",
    # narrow / slice / select
    "base 4 5;narrow 1 1 3",
    "base 4 5;narrow -1 -2 2",
    "base 4 5;narrow 0 4 0",
    "base 4 5;tr 0 1;narrow 1 2 2",
    "base 4 5;narrow 0 3 2",
    "base 4 5;narrow 0 5 0",
    "base 3 0;narrow 1 -1 0",
    "base 4 5;sl 1 -3 100 2",
    "base 4 5;sl 0 -100 -1 1",
    "base 4 5;sl 1 4 1 1",
    "base 4 5;tr 0 1;sl 0 1 5 3",
    "base 4 5;sl 1 0 5 7",
    "base 4 5;sel 1 -1",
    "base 4 5;tr 0 1;sel 0 2",
    "base 4;sel 0 3",
    "base 4 5;sel 0 4",
    # unfold
    "base 2 7;unfold 1 3 2",
    "base 2 7;unfold 0 2 1",
    "base 2 7;tr 0 1;unfold 0 3 3",
    "base 2 7;unfold -1 7 1",
    "base 2 7;unfold 1 0 2",
    "base;unfold 0 1 1",
    "base;unfold -1 0 1",
    "base 2 7;unfold 1 8 1",
    "base 2 7;unfold 1 2 0",
    # diagonal
    "base 3 4;diag 0 0 1",
    "base 3 4;diag 1 0 1",
    "base 3 4;diag 3 0 1",
    "base 3 4;diag 4 0 1",
    "base 3 4;diag -2 0 1",
    "base 3 4;diag -3 0 1",
    "base 3 4;diag 2 1 0",
    "base 2 3 4;diag 1 2 0",
    "base 2 3 4;diag -1 -1 0",
    "base 2 3 4;tr 0 1;diag 0 0 2",
    "base 3 4;diag 0 1 1",
    # view / reshape after other views
    "base 2 3 4;sl 2 0 4 2;view 12",
    "base 4 6;sl 1 1 5 1;view 4 2 2",
    "base 2 3;ex 4 2 3;view 2 2 6",
    "base 2 3;tr 0 1;rs 6",
    "base 2 3;tr 0 1;view 6",
    # as_strided
    "base 2 3;as 2 2 2 1 2 1",
    "base 2 3;as 2 3 3 1 1 0",
    "base 2 3;sl 1 1 3 1;as 1 2 3 1",
    "base 2 3;as 0 5",
    "base 2 3;as 1 0 1 100",
    "base 2 3;as 1 2 1 5",
    "base 2 3;as 2 3 3 3 1 0",
]


def step(x, op):
    name, *rest = op.split(" ", 1)
    args = ints(rest[0]) if rest else []
    if name in EXTRA:
        return EXTRA[name](x, args)
    if name == "tr":
        return x.transpose(*args)
    if name == "perm":
        return x.permute(args)
    if name == "sl":
        d, a, b, st = args
        return x[(slice(None),) * d + (slice(a, b, st),)]
    if name == "sel":
        return x.select(*args)
    if name == "ex":
        return x.expand(args)
    if name == "us":
        return x.unsqueeze(*args)
    raise ValueError(name)


def main():
    for ops in CASES:
        steps = ops.split(";")
        x = build(steps[0])
        root = x._base if x._base is not None else x
        try:
            for op in steps[1:]:
                x = step(x, op)
        except (RuntimeError, IndexError) as e:
            print(f"{ops}|err|{str(e).splitlines()[0]}")
            continue
        shares = x is root or x._base is root
        vals = fmt([int(v) for v in x.flatten().tolist()])
        print(f"{ops}|{fmt(x.shape)}|{fmt(x.stride())}|{x.storage_offset()}|{int(shares)}|{vals}")


if __name__ == "__main__":
    main()
