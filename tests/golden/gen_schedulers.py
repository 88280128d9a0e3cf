#!/usr/bin/python3
"""Generates tests/data/sched_golden.txt: torch.optim.lr_scheduler LR sequences.

Run with a Python that has PyTorch (the committed file: 2.11; 1.13 agrees):
    python3 tests/golden/gen_schedulers.py > tests/data/sched_golden.txt

Each case builds an optimizer with two param groups (lr 0.1 and 0.05) and a scheduler
configured as the C test configures the case of the same name (test_lr_scheduler.c),
then steps it. Numbers are float.hex(). Lines:
  case NAME OPTIMIZER
  lr L0 L1 [M0 M1]       group lrs (and OneCycleLR's momentum or beta1) right after
                         construction, then after each step
  metric X               ReduceLROnPlateau: the metric given to the next step
  end
"""
import math
import warnings

import torch
from torch.optim import lr_scheduler as S

warnings.filterwarnings("ignore")
STEPS = 30


def make_opt(kind):
    a = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    groups = [{"params": [a], "lr": 0.1}, {"params": [b], "lr": 0.05}]
    if kind == "SGD":
        return torch.optim.SGD(groups, lr=0.1, momentum=0.9)
    return torch.optim.Adam(groups, lr=0.1)


def momentum_of(opt, g):
    grp = opt.param_groups[g]
    return grp["betas"][0] if "betas" in grp else grp["momentum"]


def cases():
    yield "steplr", "SGD", lambda o: S.StepLR(o, step_size=3, gamma=0.5), False
    yield "multisteplr", "SGD", lambda o: S.MultiStepLR(o, milestones=[9, 2, 5, 5], gamma=0.3), False
    yield "exponentiallr", "SGD", lambda o: S.ExponentialLR(o, gamma=0.9), False
    yield "cosine", "SGD", lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001), False
    yield "linearlr", "SGD", lambda o: S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=8), False
    yield "linearlr_down", "SGD", lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=5), False
    yield "lambdalr", "SGD", lambda o: S.LambdaLR(o, lambda e: 0.95 ** e), False
    yield "sequential", "SGD", lambda o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.1, total_iters=5), S.CosineAnnealingLR(o, T_max=20)], milestones=[5]), False
    yield "sequential3", "SGD", lambda o: S.SequentialLR(
        o, [S.ExponentialLR(o, gamma=0.9), S.StepLR(o, step_size=4, gamma=0.5),
            S.MultiStepLR(o, milestones=[14, 16], gamma=0.5)], milestones=[6, 12]), False
    yield "onecycle_cos", "SGD", lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=30), True
    yield "onecycle_linear3", "SGD", lambda o: S.OneCycleLR(
        o, max_lr=0.4, total_steps=30, pct_start=0.25, anneal_strategy="linear", three_phase=True), True
    yield "onecycle_adam", "Adam", lambda o: S.OneCycleLR(
        o, max_lr=0.01, total_steps=30, base_momentum=0.8, max_momentum=0.9, div_factor=10.0,
        final_div_factor=100.0), True


def plateau_cases():
    # min/rel: improves, then stalls; cooldown 1
    m1 = [1.0, 0.9, 0.8, 0.8, 0.8, 0.8, 0.79, 0.795, 0.8, 0.8, 0.8, 0.5, 0.5, 0.5, 0.5, 0.5,
          0.4999, 0.5, 0.5, 0.5, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]
    yield "plateau_min", lambda o: S.ReduceLROnPlateau(o, mode="min", factor=0.5, patience=2, threshold=0.01,
                                                       cooldown=1, min_lr=0.01), m1
    m2 = [0.1, 0.2, 0.25, 0.31, 0.3, 0.35, 0.36, 0.5, 0.5, 0.55, 0.7, 0.7, 0.7, 0.7, 0.81, 0.8,
          0.8, 0.8, 0.95, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]
    yield "plateau_max_abs", lambda o: S.ReduceLROnPlateau(o, mode="max", threshold_mode="abs", threshold=0.1,
                                                           patience=1, factor=0.3, eps=1e-3), m2


def main():
    out = []
    for name, kind, make, mom in cases():
        opt = make_opt(kind)
        sched = make(opt)
        out.append("case %s %s" % (name, kind))

        def record():
            vals = [g["lr"] for g in opt.param_groups]
            if mom:
                vals += [momentum_of(opt, g) for g in range(2)]
            out.append("lr " + " ".join(float(v).hex() for v in vals))
        record()
        for _ in range(STEPS):
            opt.step()
            sched.step()
            record()
        out.append("end")
    for name, make, metrics in plateau_cases():
        opt = make_opt("SGD")
        sched = make(opt)
        out.append("case %s SGD" % name)
        out.append("lr " + " ".join(float(g["lr"]).hex() for g in opt.param_groups))
        for m in metrics:
            out.append("metric " + float(m).hex())
            opt.step()
            sched.step(m)
            out.append("lr " + " ".join(float(g["lr"]).hex() for g in opt.param_groups))
        out.append("end")
    print("\n".join(out))


if __name__ == "__main__":
    main()
