"""Writes tests/data/rnn_golden.txt: nn.RNN, nn.LSTM and nn.GRU forward values and
gradients, computed by PyTorch in float64 (the committed file: PyTorch 2.15), for
tests/test_nn_rnn.c.

Run:  torchpy tests/golden/gen_rnn.py   (or python3 with torch installed)

Format: that of tests/data/nn_golden.txt (tests/nn_golden.h reads both): "case NAME"
starts a case; each following line is one tensor, NAME NDIM SIZE... VALUE...
Each case holds
  cfg      kind (0 RNN tanh, 1 RNN relu, 2 LSTM, 3 GRU), input_size, hidden_size,
           num_layers, bias, batch_first, bidirectional, proj_size
  the module's state dict, keys and order as PyTorch's (weight_ih_l0, ...)
  x, and h0 / c0 / lengths where the case has them
  y, hn, cn       the output sequence and the final states
  gy, ghn, gcn    random gradients of those
  gx, gh0, gc0, g<parameter>   the gradients they give
With lengths, the module runs on pack_padded_sequence(x, lengths,
enforce_sorted=False) and y is pad_packed_sequence(..., total_length=T).
"""
import sys

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
out = open(sys.argv[1] if len(sys.argv) > 1 else "tests/data/rnn_golden.txt", "w")

KINDS = {"tanh": 0, "relu": 1, "lstm": 2, "gru": 3}


def emit(name, t):
    t = torch.as_tensor(t).detach()
    vals = t.double().reshape(-1).tolist()
    out.write("%s %d %s %s\n" % (name, t.dim(), " ".join(str(s) for s in t.shape),
                                 " ".join("%.17g" % v for v in vals)))


def case(name, kind, input_size, hidden_size, x_shape, num_layers=1, bias=True, batch_first=False,
         bidirectional=False, proj_size=0, h0=False, lengths=None):
    if kind == "lstm":
        m = torch.nn.LSTM(input_size, hidden_size, num_layers, bias=bias, batch_first=batch_first,
                          bidirectional=bidirectional, proj_size=proj_size)
    elif kind == "gru":
        m = torch.nn.GRU(input_size, hidden_size, num_layers, bias=bias, batch_first=batch_first,
                         bidirectional=bidirectional)
    else:
        m = torch.nn.RNN(input_size, hidden_size, num_layers, nonlinearity=kind, bias=bias,
                         batch_first=batch_first, bidirectional=bidirectional)
    out.write("case %s\n" % name)
    emit("cfg", torch.tensor([KINDS[kind], input_size, hidden_size, num_layers, int(bias), int(batch_first),
                              int(bidirectional), proj_size], dtype=torch.float64))
    for k, v in m.state_dict().items():
        emit(k, v)
    x = torch.randn(*x_shape, requires_grad=True)
    emit("x", x)
    batched = len(x_shape) == 3
    dirs = 2 if bidirectional else 1
    batch = (x_shape[0] if batch_first else x_shape[1]) if batched else None
    state = (num_layers * dirs,) + ((batch,) if batched else ())
    leaves = [x]
    hx = None
    if h0:
        h = torch.randn(*state, proj_size or hidden_size, requires_grad=True)
        emit("h0", h)
        leaves.append(h)
        hx = h
        if kind == "lstm":
            c = torch.randn(*state, hidden_size, requires_grad=True)
            emit("c0", c)
            leaves.append(c)
            hx = (h, c)
    if lengths is not None:
        lengths = torch.tensor(lengths)
        emit("lengths", lengths)
        packed = pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=False)
        y, hn = m(packed, hx)
        steps = x_shape[1] if batch_first else x_shape[0]
        y, _ = pad_packed_sequence(y, batch_first=batch_first, total_length=steps)
    else:
        y, hn = m(x, hx)
    outs = [("y", y)]
    if kind == "lstm":
        outs += [("hn", hn[0]), ("cn", hn[1])]
    else:
        outs += [("hn", hn)]
    for k, v in outs:
        emit(k, v)
    grads_out = []
    for k, v in outs:
        g = torch.randn_like(v)
        emit("g" + k, g)
        grads_out.append(g)
    params = list(m.parameters())
    names = ["x"] + (["h0"] if h0 else []) + (["c0"] if h0 and kind == "lstm" else [])
    grads = torch.autograd.grad([v for _, v in outs], leaves + params, grads_out, allow_unused=True)
    for k, g in zip(names, grads[:len(leaves)]):
        emit("g" + k, g)
    for (k, p), g in zip(m.named_parameters(), grads[len(leaves):]):
        emit("g" + k, g if g is not None else torch.zeros_like(p))


# LSTM: 2 layers, bidirectional, batch_first, dropout 0, with initial states
case("lstm_2l_bidir_bf", "lstm", 3, 4, (2, 5, 3), num_layers=2, batch_first=True, bidirectional=True, h0=True)
# LSTM without initial states, no biases
case("lstm_nobias", "lstm", 3, 4, (4, 2, 3), bias=False)
# LSTM with projections, 2 layers, bidirectional
case("lstm_proj", "lstm", 3, 5, (4, 2, 3), num_layers=2, bidirectional=True, proj_size=2, h0=True)
# GRU: one layer with h0
case("gru_h0", "gru", 3, 5, (4, 3, 3), h0=True)
# GRU: 2 layers, bidirectional, batch_first, no h0
case("gru_2l_bidir_bf", "gru", 2, 3, (2, 4, 2), num_layers=2, batch_first=True, bidirectional=True)
# RNN relu, 2 layers; RNN tanh bidirectional without biases
case("rnn_relu", "relu", 3, 4, (4, 2, 3), num_layers=2, h0=True)
case("rnn_tanh_bidir_nobias", "tanh", 3, 4, (3, 2, 3), bidirectional=True, bias=False)
# Unbatched (T, input_size) input
case("lstm_unbatched", "lstm", 3, 4, (5, 3), num_layers=2, h0=True)
case("gru_unbatched", "gru", 3, 4, (5, 3), bidirectional=True)
case("rnn_unbatched_bf", "tanh", 3, 4, (4, 3), batch_first=True, h0=True)
# Lengths (unsorted, padding past them)
case("lstm_lengths", "lstm", 3, 4, (5, 3, 3), num_layers=2, bidirectional=True, h0=True, lengths=[5, 2, 4])
case("gru_lengths_bf", "gru", 3, 4, (3, 6, 3), batch_first=True, bidirectional=True, h0=True, lengths=[3, 6, 1])
case("rnn_lengths", "relu", 2, 3, (4, 2, 2), lengths=[2, 4])
case("lstm_proj_lengths", "lstm", 3, 4, (4, 3, 3), bidirectional=True, proj_size=3, lengths=[1, 4, 3])
out.close()
