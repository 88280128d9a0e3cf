#!/usr/bin/python3
"""Writes tests/data/module_api_golden.json: what PyTorch prints for modules and how it
walks a small module tree, for tests/test_nn_module_api.c.

Run with a Python that has PyTorch (the committed file: torchpy's PyTorch 2.15):
    python3 tests/golden/gen_module_api.py > tests/data/module_api_golden.json

The JSON object holds:
  "reprs":  name -> repr(module) of each built-in layer the C test builds the same way
            (the name says which; tests/test_nn_module_api.c builds them);
  "floats": [value, repr(value)] pairs, Python's float repr that extra_repr uses;
  "tree":   the walks of Tree (below, mirrored in C by make_tree): named_modules
            ([name, type]), _modules' keys of the root, named_parameters and
            named_buffers ([name, shape]), state_dict keys, apply's order (names), and
            repr(tree);
  "gpt":    repr of the character GPT of `ctorch train char-gpt` (vocab 65, block 64,
            2 layers, n_embd 128), whose ModuleList folds equal blocks.
"""
import json
import sys

import torch
import torch.nn as nn


class Attn(nn.Module):
    """Two inputs (x, mask), one output; a buffer beside its two layers."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(4, 4)
        self.kv = nn.Linear(4, 8)
        self.register_buffer("mask", torch.ones(3, 3))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attn()
        self.norm = nn.LayerNorm(4)


class Tree(nn.Module):
    """A shared submodule (a and b), a tied weight (head.weight is emb.weight), a
    parameter of the root registered among its children, an int64 buffer held under
    two names, a ModuleList of two equal blocks."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.register_parameter("scale", nn.Parameter(torch.ones(4)))
        self.blocks = nn.ModuleList([Block(), Block()])
        shared = nn.Linear(4, 4)
        self.a = shared
        self.b = shared
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight
        self.register_buffer("step", torch.zeros((), dtype=torch.long))
        self.register_buffer("step2", self.step)


class GPTBlock(nn.Module):
    """ctorch's ct_nn_gpt_block: its children, no extra_repr."""

    def __init__(self, d):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)


class GPT(nn.Module):
    def __init__(self, vocab=65, block=64, n_layer=2, d=128):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block, d)
        self.blocks = nn.ModuleList([GPTBlock(d) for _ in range(n_layer)])
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight


def main():
    reprs = {
        "linear": nn.Linear(4, 3),
        "linear_nobias": nn.Linear(4, 3, bias=False),
        "conv2d": nn.Conv2d(1, 32, 3),
        "conv2d_full": nn.Conv2d(6, 8, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(2, 2), groups=2,
                                 bias=False),
        "batchnorm2d": nn.BatchNorm2d(3),
        "batchnorm2d_plain": nn.BatchNorm2d(3, eps=1e-3, momentum=0.01, affine=False,
                                            track_running_stats=False),
        "layernorm": nn.LayerNorm(128),
        "layernorm_2d": nn.LayerNorm((4, 5), eps=1e-6, elementwise_affine=False),
        "rmsnorm": nn.RMSNorm(4),
        "rmsnorm_2d": nn.RMSNorm([4, 5], eps=1e-6),
        "embedding": nn.Embedding(65, 128),
        "embedding_pad": nn.Embedding(65, 128, padding_idx=-1),
        "dropout": nn.Dropout(0.1),
        "relu": nn.ReLU(),
        "tanh": nn.Tanh(),
        "gelu": nn.GELU(),
        "gelu_tanh": nn.GELU("tanh"),
        "flatten": nn.Flatten(),
        "flatten_02": nn.Flatten(0, 2),
        "maxpool": nn.MaxPool2d(2),
        "maxpool_rect": nn.MaxPool2d((2, 3), padding=(1, 0)),
        "sequential_empty": nn.Sequential(),
        "module_list_empty": nn.ModuleList(),
        "module_dict_empty": nn.ModuleDict(),
        "sequential": nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                    nn.Linear(36, 5)),
        "module_list": nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 2), nn.ReLU(),
                                      nn.Linear(2, 2)]),
        "module_dict": nn.ModuleDict({"act": nn.GELU("tanh"), "proj": nn.Linear(8, 8)}),
    }
    floats = [1e-05, 0.1, 1.0, 0.5, 1e-12, 1e16, 1e15, 123456789012345678.0, 0.0001, 0.00012345, 1.5e-07,
              100.0, 2.5, -0.001, 1 / 3, 1e300, 5e-324, 12345.678, -0.0, 0.0, 1e22, 9999999999999998.0]

    tree = Tree()
    first_name = {}
    for name, m in tree.named_modules():
        first_name[id(m)] = name
    applied = []
    tree.apply(lambda m: applied.append(first_name[id(m)]))
    out = {
        "reprs": {k: repr(v) for k, v in reprs.items()},
        "floats": [[f, repr(f)] for f in floats],
        "tree": {
            "named_modules": [[n, type(m).__name__] for n, m in tree.named_modules()],
            "children": list(tree._modules.keys()),
            "named_parameters": [[n, list(p.shape)] for n, p in tree.named_parameters()],
            "named_buffers": [[n, list(b.shape)] for n, b in tree.named_buffers()],
            "state_dict": list(tree.state_dict().keys()),
            "apply": applied,
            "num_parameters": sum(p.numel() for p in tree.parameters()),
            "repr": repr(tree),
        },
        "gpt": repr(GPT()),
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
