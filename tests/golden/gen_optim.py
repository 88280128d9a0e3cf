#!/usr/bin/python3
"""Generates tests/data/optim_golden.txt: torch.optim updates over 20 steps, float64.

Run with a Python that has PyTorch (the committed file: 2.11; 1.13 agrees):
    python3 tests/golden/gen_optim.py > tests/data/optim_golden.txt

Every number is written with float.hex() (exact). Lines:
  case NAME KIND                 KIND is SGD, Adam, AdamW, RMSprop or Adagrad
  group N key=value ...          a param group of the next N params (options as the C
                                 ct_optim_options field names; bools as 0/1)
  param NDIM d0 .. dk v0 ..      a parameter's shape and initial values
  step                           one optimizer step; then, for each param in order:
  grad v0 ..   or   grad none    the gradient fed before the step (none: no .grad)
  expect v0 ..                   the parameter after the step
  end

The gradients are drawn here (torch.randn, seeded per case) and stored, so the C test
feeds exactly the same numbers. foreach=False: the single-tensor code path.
"""
import torch

STEPS = 20


def hx(t):
    return " ".join(float(x).hex() for x in t.reshape(-1).tolist())


def torch_kwargs(kind, o):
    k = {"lr": o["lr"]}
    for key in ("weight_decay", "maximize"):
        if key in o:
            k[key] = bool(o[key]) if key == "maximize" else o[key]
    if kind == "SGD":
        for key in ("momentum", "dampening"):
            if key in o:
                k[key] = o[key]
        if "nesterov" in o:
            k["nesterov"] = bool(o["nesterov"])
    if kind in ("Adam", "AdamW"):
        if "beta1" in o or "beta2" in o:
            k["betas"] = (o.get("beta1", 0.9), o.get("beta2", 0.999))
        for key in ("eps",):
            if key in o:
                k[key] = o[key]
        if "amsgrad" in o:
            k["amsgrad"] = bool(o["amsgrad"])
    if kind == "RMSprop":
        for key in ("momentum", "alpha", "eps"):
            if key in o:
                k[key] = o[key]
        if "centered" in o:
            k["centered"] = bool(o["centered"])
    if kind == "Adagrad":
        for key in ("lr_decay", "eps", "initial_accumulator_value"):
            if key in o:
                k[key] = o[key]
    return k


def run_case(out, name, kind, groups, seed, none_at=None):
    """groups: list of (options dict, list of shapes)."""
    g = torch.Generator().manual_seed(seed)
    out.append("case %s %s" % (name, kind))
    params, torch_groups = [], []
    for opts, shapes in groups:
        out.append("group %d %s" % (len(shapes), " ".join(
            "%s=%s" % (k, (int(v) if isinstance(v, bool) else repr(v))) for k, v in opts.items())))
        ps = []
        for shape in shapes:
            p = torch.randn(*shape, generator=g, dtype=torch.float64)
            out.append("param %d %s %s" % (len(shape), " ".join(str(s) for s in shape), hx(p)))
            p.requires_grad_(True)
            ps.append(p)
        params += ps
        d = torch_kwargs(kind, opts)
        d["params"] = ps
        torch_groups.append(d)
    cls = getattr(torch.optim, kind)
    first = dict(torch_groups[0])
    del first["params"]
    # The first group's options are also the constructor's defaults, as with
    # ct_optimizer_new (Adagrad reads initial_accumulator_value from them).
    opt = cls(torch_groups, foreach=False, **first)
    for step in range(STEPS):
        out.append("step")
        for i, p in enumerate(params):
            if none_at is not None and (step, i) in none_at:
                p.grad = None
                out.append("grad none")
            else:
                gr = torch.randn(p.shape, generator=g, dtype=torch.float64)
                p.grad = gr
                out.append("grad " + hx(gr))
        opt.step()
        for p in params:
            out.append("expect " + hx(p.detach()))
    out.append("end")


def main():
    out = []
    shapes = [(3,), (2, 2)]
    cases = [
        ("sgd_plain", "SGD", [({"lr": 0.1}, shapes)]),
        ("sgd_momentum", "SGD", [({"lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}, shapes)]),
        ("sgd_nesterov", "SGD", [({"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1,
                                   "maximize": True}, shapes)]),
        ("sgd_groups", "SGD", [({"lr": 0.1, "momentum": 0.5}, [(3,)]),
                               ({"lr": 0.01, "momentum": 0.9, "weight_decay": 0.2}, [(2, 2)])]),
        ("adam_default", "Adam", [({"lr": 0.01}, shapes)]),
        ("adam_amsgrad", "Adam", [({"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}, shapes)]),
        ("adam_betas", "Adam", [({"lr": 0.02, "beta1": 0.8, "beta2": 0.9, "eps": 1e-6, "maximize": True}, shapes)]),
        ("adamw_default", "AdamW", [({"lr": 0.01}, shapes)]),
        ("adamw_amsgrad", "AdamW", [({"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}, shapes)]),
        ("adamw_groups", "AdamW", [({"lr": 0.01}, [(3,)]), ({"lr": 0.05, "weight_decay": 0.5}, [(2, 2)])]),
        ("rmsprop_default", "RMSprop", [({"lr": 0.01}, shapes)]),
        ("rmsprop_centered", "RMSprop", [({"lr": 0.01, "centered": True, "momentum": 0.9, "weight_decay": 0.1},
                                          shapes)]),
        ("rmsprop_momentum", "RMSprop", [({"lr": 0.01, "momentum": 0.5, "alpha": 0.9, "maximize": True}, shapes)]),
        ("adagrad_default", "Adagrad", [({"lr": 0.1}, shapes)]),
        ("adagrad_decay", "Adagrad", [({"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.1,
                                        "initial_accumulator_value": 0.5}, shapes)]),
        ("adagrad_maximize", "Adagrad", [({"lr": 0.1, "eps": 1e-6, "maximize": True}, shapes)]),
    ]
    for i, (name, kind, groups) in enumerate(cases):
        run_case(out, name, kind, groups, seed=1000 + i)
    # Parameters without a gradient at some steps are skipped (their state too).
    run_case(out, "adam_missing_grads", "Adam", [({"lr": 0.01}, shapes)], seed=99,
             none_at={(0, 1), (1, 1), (5, 0), (6, 0), (7, 1)})
    print("\n".join(out))


if __name__ == "__main__":
    main()
