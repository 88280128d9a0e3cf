"""Records what PyTorch gives for the indexing ops (scatter family, index_copy/fill,
advanced indexing and index_put, masked_select/scatter, take, kthvalue, unique, pad,
meshgrid, einsum), inputs included, so tests/test_indexing.c can replay every case.

Run with PyTorch 1.13:
    /usr/bin/python3 tests/golden/gen_indexing.py > tests/data/indexing_golden.txt

One case per line, fields separated by '|':
    op|params|input...|=>|output...        (outputs in the op's order)
    op|params|input...|=>|!message         (the first line of the error PyTorch raised)
A tensor is  dtype[shape]=v v v  (row-major values; bools as 0/1; '_' is None).
params are space-separated words; see each op's case builder below for their order.
"""
import math

import torch
import torch.nn.functional as F
from golden_common import DTYPE_NAMES, number


def fmt(t):
    if t is None:
        return "_"
    vals = t.detach().reshape(-1)
    if t.dtype in (torch.float16, torch.bfloat16):
        vals = vals.double()
    vals = vals.tolist()
    return "%s[%s]=%s" % (DTYPE_NAMES[t.dtype], ",".join(str(s) for s in t.shape), " ".join(number(v) for v in vals))


def emit(op, params, inputs, fn):
    head = "%s|%s|%s" % (op, " ".join(str(p) for p in params), "|".join(fmt(t) for t in inputs))
    try:
        r = fn()
    except Exception as e:  # the message is part of the record
        print("%s|=>|!%s" % (head, str(e).split("\n")[0]))
        return
    if isinstance(r, torch.Tensor):
        r = [r]
    print("%s|=>|%s" % (head, "|".join(fmt(x) for x in r)))


def ar(*shape, dtype=torch.float32, start=0):
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n) + start).to(dtype).reshape(shape)


L = lambda *v: torch.tensor(v, dtype=torch.int64)


def scatter_cases():
    x = ar(3, 4)
    idx = torch.tensor([[0, 1, 2, 0], [2, 0, 1, 1]])
    src = ar(2, 4, start=100)
    for dt in (torch.float32, torch.float64, torch.int64, torch.int32, torch.int16, torch.int8,
               torch.uint8, torch.bool, torch.float16, torch.bfloat16):
        a, s = x.to(dt), src.to(dt)
        emit("scatter", [0], [a, idx, s], lambda: a.scatter(0, idx, s))
    emit("scatter", [1], [x, torch.tensor([[3, 0], [-1, 1], [2, 2]]), src.reshape(4, 2)[:3]],
         lambda: x.scatter(1, torch.tensor([[3, 0], [-1, 1], [2, 2]]), src.reshape(4, 2)[:3]))
    emit("scatter", [-1], [x, torch.empty(3, 0, dtype=torch.long), ar(3, 0)],
         lambda: x.scatter(-1, torch.empty(3, 0, dtype=torch.long), ar(3, 0)))
    emit("scatter", [0], [torch.tensor(5.), torch.tensor(0), torch.tensor(7.)],
         lambda: torch.tensor(5.).scatter(0, torch.tensor(0), torch.tensor(7.)))
    # errors
    emit("scatter", [0], [x, idx.int(), src], lambda: x.scatter(0, idx.int(), src))
    emit("scatter", [0], [x, idx, src.double()], lambda: x.scatter(0, idx, src.double()))
    emit("scatter", [0], [x, L(0, 1), src], lambda: x.scatter(0, L(0, 1), src))
    emit("scatter", [0], [x, torch.zeros(2, 3, dtype=torch.long), torch.ones(1, 3)],
         lambda: x.scatter(0, torch.zeros(2, 3, dtype=torch.long), torch.ones(1, 3)))
    emit("scatter", [0], [x, torch.tensor([[5]]), torch.ones(1, 1)], lambda: x.scatter(0, torch.tensor([[5]]), torch.ones(1, 1)))
    emit("scatter", [2], [x, idx, src], lambda: x.scatter(2, idx, src))
    # scalar value
    emit("scatter_value", [1, "2.5"], [x, torch.tensor([[0], [3], [-2]])], lambda: x.scatter(1, torch.tensor([[0], [3], [-2]]), 2.5))
    emit("scatter_value", [0, "7"], [x.long(), idx], lambda: x.long().scatter(0, idx, 7))
    emit("scatter_value", [0, "1"], [x.bool(), idx[:, :2]], lambda: x.bool().scatter(0, idx[:, :2], True))
    emit("scatter_value", [0, "1.0"], [x, torch.zeros(4, 5, dtype=torch.long)],
         lambda: x.scatter(0, torch.zeros(4, 5, dtype=torch.long), 1.0))
    # scatter_reduce: duplicates, include_self both ways, every reduction, several dtypes
    ridx = torch.tensor([[0, 0, 2, 2], [0, 1, 2, 0], [1, 1, 1, 1]])
    rsrc = torch.tensor([[2., -3., 4., 1.], [5., 6., -1., 2.], [-2., 3., 3., 8.]])
    for red in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            for dt in (torch.float32, torch.float64, torch.int64, torch.int32, torch.float16):
                a, s = x.to(dt), rsrc.to(dt)
                emit("scatter_reduce", [0, red, int(inc)], [a, ridx, s],
                     lambda: a.scatter_reduce(0, ridx, s, red, include_self=inc))
    mi = torch.tensor([[0, 0, 1], [2, 2, 2]])
    ms = torch.tensor([[-3, 4, 5], [-7, 2, 1]])
    for inc in (True, False):
        emit("scatter_reduce", [1, "mean", int(inc)], [ar(2, 3, dtype=torch.int64), mi, ms],
             lambda: ar(2, 3, dtype=torch.int64).scatter_reduce(1, mi, ms, "mean", include_self=inc))
    nx = torch.tensor([1., float("nan"), 3.])
    emit("scatter_reduce", [0, "amax", 1], [nx, L(0, 2, 2), torch.tensor([5., 1., float("nan")])],
         lambda: nx.scatter_reduce(0, L(0, 2, 2), torch.tensor([5., 1., float("nan")]), "amax"))
    emit("scatter_reduce", [0, "sum", 1], [x, idx.int(), src], lambda: x.scatter_reduce(0, idx.int(), src, "sum"))


def index_copy_fill_cases():
    x = ar(4, 3)
    for dt in (torch.float32, torch.int64, torch.bool, torch.bfloat16, torch.uint8):
        a = x.to(dt)
        s = ar(2, 3, start=50).to(dt)
        emit("index_copy", [0], [a, L(3, 0), s], lambda: a.index_copy(0, L(3, 0), s))
    emit("index_copy", [1], [x, L(-1, 0), ar(4, 2, start=20)], lambda: x.index_copy(1, L(-1, 0), ar(4, 2, start=20)))
    emit("index_copy", [0], [x, torch.tensor(2), ar(1, 3, start=9)], lambda: x.index_copy(0, torch.tensor(2), ar(1, 3, start=9)))
    emit("index_copy", [0], [x, L(), ar(0, 3)], lambda: x.index_copy(0, L(), ar(0, 3)))
    emit("index_copy", [0], [x, L(0, 1), torch.ones(3, 3)], lambda: x.index_copy(0, L(0, 1), torch.ones(3, 3)))
    emit("index_copy", [0], [x, torch.tensor([[0, 1]]), torch.ones(2, 3)], lambda: x.index_copy(0, torch.tensor([[0, 1]]), torch.ones(2, 3)))
    emit("index_copy", [0], [x, L(0, 1), torch.ones(2, 4)], lambda: x.index_copy(0, L(0, 1), torch.ones(2, 4)))
    emit("index_copy", [0], [x, L(0, 1), torch.ones(2, 3).double()], lambda: x.index_copy(0, L(0, 1), torch.ones(2, 3).double()))
    emit("index_copy", [0], [x, L(0, 5), torch.ones(2, 3)], lambda: x.index_copy(0, L(0, 5), torch.ones(2, 3)))
    emit("index_copy", [0], [x, L(0, 1).int(), torch.ones(2, 3)], lambda: x.index_copy(0, L(0, 1).int(), torch.ones(2, 3)))
    for dt in (torch.float32, torch.int32, torch.bool, torch.float16):
        a = x.to(dt)
        emit("index_fill", [1, "1"], [a, L(0, -1)], lambda: a.index_fill(1, L(0, -1), 1))
    emit("index_fill", [0, "-2.5"], [x, L(1, 1, 3)], lambda: x.index_fill(0, L(1, 1, 3), -2.5))
    emit("index_fill", [0, "4"], [x, torch.tensor(2)], lambda: x.index_fill(0, torch.tensor(2), 4))
    emit("index_fill", [0, "4"], [x, L()], lambda: x.index_fill(0, L(), 4))
    emit("index_fill", [0, "1"], [x, L(0, 1).int()], lambda: x.index_fill(0, L(0, 1).int(), 1))
    emit("index_fill", [0, "1"], [x, torch.tensor([[0, 1]])], lambda: x.index_fill(0, torch.tensor([[0, 1]]), 1))
    emit("index_fill", [0, "1"], [x, L(0, 7)], lambda: x.index_fill(0, L(0, 7), 1))


def idx_args(idx):
    return list(idx)


def index_cases():
    x = ar(4, 5, 6)
    B = lambda *v: torch.tensor(v, dtype=torch.bool)
    cases = [
        (x, [L(0, 2, -1)]),
        (x, [L(0, 2), L(1, 4)]),
        (x, [None, L(0, 2), L(1, 4)]),            # adjacent after a slice: B stays in place
        (x, [L(0, 2), None, L(1, 4)]),            # separated: B goes first
        (x, [L(1), None, torch.tensor([[0, 5], [2, 3]])]),  # broadcasting (1) with (2, 2), separated
        (x, [None, torch.tensor([[0], [4]]), L(1, 2, 3)]),  # broadcasting (2, 1) with (3)
        (x, [B(True, False, True, True)]),        # a mask over dim 0
        (x, [None, B(False, True, False, False, True)]),
        (x, [x[:, :, 0] > 10.5]),                 # a 2-D mask covering two dims
        (x, [L(3, 3, 0), x[0] > 20]),             # index then a 2-D mask (broadcast against it)
        (x, [L()]),                               # empty index
        (x, [None, None, L(-1, -6)]),
        (x.transpose(0, 2), [L(1, 0), None, L(2, 2)]),  # strided input
        (ar(3), [torch.tensor([[0, 1], [2, 0]])]),
        (ar(3, dtype=torch.int64), [B(True, False, True)]),
        (ar(2, 3).bool(), [None, L(2, 0)]),
        (ar(2, 3, dtype=torch.float16), [L(1), L(2)]),
        (x, [x[:, :, 0] > 100]),                  # mask selecting nothing
        (x, [torch.tensor([[0, 1]], dtype=torch.uint8).bool().reshape(-1), None]),
    ]
    for t, idx in cases:
        emit("index", [len(idx)], [t] + idx_args(idx), lambda: t[tuple(slice(None) if i is None else i for i in idx)])
    errs = [
        (x, [L(0, 4)]),
        (x, [L(0, 1), L(0, 1, 2)]),
        (x, [L(0).int()]),
        (x, [torch.tensor([0.])]),
        (x, [B(True, False)]),
        (x, [None, None, None, L(0)]),
        (x, [None, None, L(-7)]),
    ]
    for t, idx in errs:
        emit("index", [len(idx)], [t] + idx_args(idx), lambda: t[tuple(slice(None) if i is None else i for i in idx)])
    y = ar(3, 4)
    puts = [
        (y, [L(0, 2)], ar(2, 4, start=100), False),
        (y, [L(0, 2)], torch.tensor(-1.), False),
        (y, [None, L(1, 3)], torch.tensor([7., 8.]), False),
        (y, [L(0, 0, 2), L(1, 1, 3)], torch.tensor([1., 2., 3.]), True),    # duplicates accumulate
        (y, [L(1, 1, 1)], ar(3, 4), True),
        (y, [y > 6.5], torch.tensor([-1., -2., -3., -4., -5.]), False),
        (y, [y > 6.5], torch.tensor(10.), True),
        (y.long(), [L(2), L(-1)], torch.tensor(5), True),
        (y.bool(), [L(0, 2), L(0, 0)], torch.tensor([False, True]), True),
        (y.int(), [None, L(0, 0, 3)], torch.tensor([[1], [2], [3]], dtype=torch.int32), True),
        (y.transpose(0, 1), [L(3, 1)], ar(2, 3, start=50), False),
        (y, [L()], ar(0, 4), True),
        # errors
        (y, [L(0)], torch.ones(1, 4).double(), False),
        (y, [L(0, 1)], torch.ones(3, 4), False),
        (y, [L(3)], torch.ones(4), True),
    ]
    for t, idx, v, acc in puts:
        emit("index_put", [len(idx), int(acc)], [t, v] + idx_args(idx),
             lambda: torch.ops.aten.index_put(t, idx, v, acc))


def masked_take_cases():
    x = ar(3, 4)
    m = torch.tensor([[True, False, True, False], [False, False, False, False], [True, True, True, True]])
    for dt in (torch.float32, torch.int64, torch.bool, torch.float64, torch.int8):
        a = x.to(dt)
        emit("masked_select", [], [a, m], lambda: a.masked_select(m))
    emit("masked_select", [], [x, torch.tensor([True, False, False, True])], lambda: x.masked_select(torch.tensor([True, False, False, True])))
    emit("masked_select", [], [ar(3, 1), m], lambda: ar(3, 1).masked_select(m))
    emit("masked_select", [], [x.t(), torch.tensor([[True], [False], [True], [False]])],
         lambda: x.t().masked_select(torch.tensor([[True], [False], [True], [False]])))
    emit("masked_select", [], [x, torch.tensor([1, 0, 1, 0])], lambda: x.masked_select(torch.tensor([1, 0, 1, 0])))
    emit("masked_select", [], [x, torch.tensor([True, False])], lambda: x.masked_select(torch.tensor([True, False])))
    for dt in (torch.float32, torch.int32, torch.bool):
        a = x.to(dt)
        s = ar(8, start=100).to(dt)
        emit("masked_scatter", [], [a, m, s], lambda: a.masked_scatter(m, s))
    emit("masked_scatter", [], [x, torch.tensor([False, True, True, False]), ar(2, 3, start=-6)],
         lambda: x.masked_scatter(torch.tensor([False, True, True, False]), ar(2, 3, start=-6)))
    emit("masked_scatter", [], [x, m, torch.ones(5)], lambda: x.masked_scatter(m, torch.ones(5)))
    for dt in (torch.float32, torch.int64, torch.bool, torch.uint8, torch.float16):
        a = x.to(dt)
        emit("take", [], [a, torch.tensor([[0, -1], [5, 5]])], lambda: a.take(torch.tensor([[0, -1], [5, 5]])))
    emit("take", [], [x.t(), L(1, 2, 3)], lambda: x.t().take(L(1, 2, 3)))
    emit("take", [], [x, L()], lambda: x.take(L()))
    emit("take", [], [torch.tensor(3.), torch.tensor(0)], lambda: torch.tensor(3.).take(torch.tensor(0)))
    emit("take", [], [x, L(12)], lambda: x.take(L(12)))
    emit("take", [], [x, L(-13)], lambda: x.take(L(-13)))
    emit("take", [], [x, L(1).int()], lambda: x.take(L(1).int()))
    emit("take", [], [torch.empty(0), L(0)], lambda: torch.empty(0).take(L(0)))


def kth_unique_cases():
    x = torch.tensor([[3., 1., 4., 1.5], [5., 9., 2., 6.], [-5., 3.5, 5.5, 8.]])
    for dt in (torch.float32, torch.float64, torch.int64, torch.int16, torch.uint8, torch.bfloat16):
        a = x.to(dt) if dt != torch.uint8 else x.abs().to(dt)
        for k, d, keep in ((1, 1, False), (3, 1, True), (2, 0, False), (3, -2, True)):
            emit("kthvalue", [k, d, int(keep)], [a], lambda: a.kthvalue(k, d, keep))
    emit("kthvalue", [2, 0, 0], [torch.tensor([2., float("nan"), 1.])], lambda: torch.tensor([2., float("nan"), 1.]).kthvalue(2, 0))
    emit("kthvalue", [3, 0, 0], [torch.tensor([2., float("nan"), 1.])], lambda: torch.tensor([2., float("nan"), 1.]).kthvalue(3, 0))
    emit("kthvalue", [1, 0, 0], [torch.tensor(7.)], lambda: torch.tensor(7.).kthvalue(1, 0))
    emit("kthvalue", [1, 0, 1], [torch.tensor(7.)], lambda: torch.tensor(7.).kthvalue(1, 0, True))
    emit("kthvalue", [5, 1, 0], [x], lambda: x.kthvalue(5, 1))
    emit("kthvalue", [0, 1, 0], [x], lambda: x.kthvalue(0, 1))
    emit("kthvalue", [1, 2, 0], [x], lambda: x.kthvalue(1, 2))
    emit("kthvalue", [1, 0, 0], [torch.tensor([True])], lambda: torch.tensor([True]).kthvalue(1))
    u = torch.tensor([[3, 1, 3], [2, -1, 1], [1, 1, 7]])
    for dt in (torch.int64, torch.float32, torch.int8, torch.float64, torch.uint8):
        a = u.to(dt) if dt != torch.uint8 else u.abs().to(dt)
        emit("unique", [], [a], lambda: torch.unique(a, sorted=True, return_inverse=True, return_counts=True))
        emit("unique_consecutive", [], [a], lambda: torch.unique_consecutive(a, return_inverse=True, return_counts=True))
    for a in (torch.tensor([True, False, True, True]), torch.tensor([0., -0., 2., 2., 0.]), torch.empty(0),
              torch.tensor(4), ar(2, 3).t() % 2):
        emit("unique", [], [a], lambda: torch.unique(a, sorted=True, return_inverse=True, return_counts=True))
        emit("unique_consecutive", [], [a], lambda: torch.unique_consecutive(a, return_inverse=True, return_counts=True))


def pad_cases():
    x = ar(1, 3, 4)
    x4 = ar(1, 2, 3, 4)
    x5 = ar(1, 1, 2, 3, 3)
    cases = [
        (x, "constant", 0, (1, 2)),
        (x, "constant", -1.5, (1, 0, 2, 1)),
        (x, "constant", 0, (0, 0, 0, 0, 1, 1)),
        (x, "constant", 7, (-1, 1, 0, -2)),
        (x.long(), "constant", 3, (2, 2)),
        (x.bool(), "constant", 1, (1, 1)),
        (x.half(), "constant", 0.5, (1, 1)),
        (ar(4), "constant", 0, (3, -2)),
        (x.transpose(1, 2), "constant", 9, (1, 0, 0, 1)),
        (x, "reflect", 0, (2, 3)),
        (x, "reflect", 0, (3, 1)),
        (x4, "reflect", 0, (1, 2, 2, 1)),
        (x, "reflect", 0, (1, 2, 2, 1)),
        (x5, "reflect", 0, (1, 1, 1, 2, 1, 0)),
        (x.reshape(3, 4), "reflect", 0, (1, 1)),
        (x, "reflect", 0, (-1, 1)),
        (x, "replicate", 0, (2, 3)),
        (x4, "replicate", 0, (1, 2, 3, 0)),
        (x5, "replicate", 0, (2, 1, 0, 1, 1, 1)),
        (x, "circular", 0, (4, 1)),
        (x4, "circular", 0, (1, 2, 3, 1)),
        (x5, "circular", 0, (1, 1, 2, 0, 1, 1)),
        (x, "circular", 0, (-1, 2)),
        (x.double().transpose(1, 2), "replicate", 0, (1, 1)),
        # errors
        (x, "constant", 0, (1, 2, 3)),
        (x, "constant", 0, (1, 1, 1, 1, 1, 1, 1, 1)),
        (x, "reflect", 0, (4, 1)),
        (x, "circular", 0, (5, 1)),
        (x.reshape(12), "replicate", 0, (1, 1)),
        (x.reshape(3, 4), "replicate", 0, (1, 1, 1, 1)),
    ]
    for t, mode, val, p in cases:
        emit("pad", [mode, val] + list(p), [t], lambda: F.pad(t, p, mode=mode, value=val) if mode == "constant" else F.pad(t, p, mode=mode))


def meshgrid_cases():
    a, b, c = ar(3), ar(2, dtype=torch.float32, start=10), torch.tensor(7.)
    for ind in ("ij", "xy"):
        emit("meshgrid", [ind], [a, b], lambda: torch.meshgrid(a, b, indexing=ind))
        emit("meshgrid", [ind], [a, c, b], lambda: torch.meshgrid(a, c, b, indexing=ind))
        emit("meshgrid", [ind], [a], lambda: torch.meshgrid(a, indexing=ind))
    ai, bi = L(1, 2), L(5, 6, 7)
    emit("meshgrid", ["xy"], [ai, bi], lambda: torch.meshgrid(ai, bi, indexing="xy"))
    emit("meshgrid", ["ij"], [a, ar(0)], lambda: torch.meshgrid(a, ar(0), indexing="ij"))
    emit("meshgrid", ["ij"], [a, ai], lambda: torch.meshgrid(a, ai, indexing="ij"))
    emit("meshgrid", ["foo"], [a, b], lambda: torch.meshgrid(a, b, indexing="foo"))


def einsum_cases():
    A = ar(2, 3, start=-2)
    Bm = ar(3, 4, start=1)
    v3 = torch.tensor([1., -2., 3.])
    v4 = torch.tensor([2., 0., -1., 5.])
    S = ar(3, 3, start=-4)
    bA = ar(2, 2, 3, start=-5)
    bB = ar(2, 3, 4, start=-3)
    T = ar(2, 3, 4, start=-7)
    cases = [
        ("ij,jk->ik", [A, Bm]),            # matrix product
        ("ij,jk", [A, Bm]),                # implicit output
        ("bij,bjk->bik", [bA, bB]),        # batch matmul
        ("ij->ji", [A]),                   # transpose
        ("ji", [A]),                       # implicit transpose (output sorted: ij)
        ("ii->", [S]),                     # trace
        ("ii->i", [S]),                    # diagonal
        ("ii", [S]),                       # implicit trace
        ("i,j->ij", [v3, v4]),             # outer product
        ("i,i->", [v3, v3]),               # dot
        ("ij->", [A]),                     # total sum
        ("ij->j", [A]),                    # column sums
        ("ijk->ik", [T]),                  # sum over the middle
        ("ij,j->i", [Bm, v4]),             # matrix-vector
        ("ij,ij->ij", [A, A]),             # elementwise product
        ("ij,ij->", [A, A]),               # Frobenius inner product
        ("...ij->...ji", [T]),             # batched transpose
        ("...ij,...jk->...ik", [bA, bB]),  # ellipsis batch matmul
        ("b...,b...->b...", [T, T]),
        ("i...->...", [T]),                # sum over the leading dim
        ("...ij->ij", [T]),                # ellipsis summed away
        ("...j,j", [T, v4]),               # implicit output with an ellipsis
        ("bij,jk->bik", [bA, Bm]),
        ("ij,kj->ik", [A, A]),             # A @ A^T
        ("iij->ij", [ar(3, 3, 2)]),        # diagonal of a 3-D tensor
        ("i,i,i->i", [v3, v3, v3]),        # three operands
        ("ij,jk,kl->il", [A, Bm, ar(4, 2)]),
        ("bn,anm,bm->ba", [ar(2, 3), ar(4, 3, 5, start=-10), ar(2, 5, start=1)]),  # bilinear
        ("ij,j->ij", [Bm, ar(1)]),         # a size-1 dim broadcasts
        ("...ij,...jk", [ar(2, 1, 3, 4), ar(5, 4, 2)]),
        ("i j , j k -> i k", [A, Bm]),     # spaces
        ("Ab,bC->AC", [A, Bm]),            # upper-case letters
        ("ij,jk->ik", [A.long(), Bm.long()]),
        ("ij,jk->ik", [A.double(), Bm.double()]),
        ("ij,jk->ik", [ar(2, 0), ar(0, 3)]),   # empty contraction gives zeros
        # errors
        ("ij,jk->ik", [A]),
        ("ij->ik", [A]),
        ("ij->ii", [A]),
        ("i1->i", [A]),
        ("ijk->i", [A]),
        ("i.j->i", [A]),
        ("...i...->i", [A]),
        ("ii->i", [A]),
        ("ij,ij->", [A, torch.ones(2, 5)]),
        ("ij,jk->ik", [A, Bm, Bm]),
    ]
    for eq, ops in cases:
        emit("einsum", [eq.replace(" ", "_")], ops, lambda: torch.einsum(eq, *ops))


def main():
    torch.manual_seed(0)
    scatter_cases()
    index_copy_fill_cases()
    index_cases()
    masked_take_cases()
    kth_unique_cases()
    pad_cases()
    meshgrid_cases()
    einsum_cases()


if __name__ == "__main__":
    main()
