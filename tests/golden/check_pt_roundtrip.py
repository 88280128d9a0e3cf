#!/usr/bin/python3
"""Checks that PyTorch reads what ctorch's ct_save_pt writes.

Usage: check_pt_roundtrip.py TEST_PT_BINARY  (the test_pt program of a build)
It runs `test_pt --write-roundtrip DIR`, then loads every file with
torch.load(weights_only=True) and compares values. Exits 77 (skipped) when
/usr/bin/python3 cannot import torch. Not part of CI.
"""
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("torch is not importable: skipped")
    sys.exit(77)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def load(path, need_floats=False):
    try:
        return torch.load(path, weights_only=True)
    except Exception as e:  # PyTorch 1.13's weights-only unpickler lacks BINFLOAT/_codecs
        if need_floats and torch.__version__ < "2":
            print(f"note: {path}: weights_only=True fails on torch {torch.__version__} ({e}); "
                  "checking with weights_only=False")
            return torch.load(path, weights_only=False)
        raise


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([binary, "--write-roundtrip", d], check=True)

        sd = load(f"{d}/rt_dtypes.pt")
        a = torch.arange(6)
        want = {
            "bool": (a % 2 == 0), "uint8": (a * 40).to(torch.uint8), "int8": (a - 3).to(torch.int8),
            "int16": ((a - 3) * 1000).to(torch.int16), "int32": ((a - 3) * 100000).to(torch.int32),
            "int64": (a - 3) * 10**12,
        }
        for name, dt in [("float16", torch.float16), ("bfloat16", torch.bfloat16), ("float32", torch.float32),
                         ("float64", torch.float64)]:
            want[name] = ((a.double() - 2.5) * 0.5).to(dt)
        check(list(sd.keys()) == list(want.keys()), f"dtype keys {list(sd.keys())}")
        for k, v in want.items():
            t = sd[k]
            check(t.dtype == v.dtype and torch.equal(t, v.reshape(2, 3)), f"dtypes[{k}] = {t}")

        sh = load(f"{d}/rt_shared.pt")
        base = torch.arange(24, dtype=torch.float32)
        check(torch.equal(sh["base"], base), "shared base")
        check(torch.equal(sh["view"], base[4:16].view(3, 4)), "shared view")
        check(torch.equal(sh["t"], base[4:16].view(3, 4).t()) and sh["t"].stride() == (1, 4), "shared t")
        check(torch.equal(sh["strided"], base[1::3]) and sh["strided"].storage_offset() == 1, "shared strided")
        ptr = sh["base"].storage().data_ptr()
        check(all(sh[k].storage().data_ptr() == ptr for k in ("view", "t", "strided")), "storage shared")
        sh["base"][4] = 100
        check(sh["view"][0, 0].item() == 100, "write through base shows in view")

        ck = load(f"{d}/rt_checkpoint.pt")
        check(ck["epoch"] == 7, "epoch")
        check(list(ck["state"].keys()) == [0, 7], f"int keys {list(ck['state'].keys())}")
        check(ck["state"][0]["step"].dim() == 0 and ck["state"][0]["step"].item() == 3.0, "0-d step")
        check(torch.equal(ck["state"][0]["exp_avg"], torch.tensor([0.25, -0.5])), "exp_avg")
        check(ck["state"][7] == [], "empty list")
        check(ck["list"] == [1, -70000, 2**40, -2**63, "x\u00e9", None, True, (0, 1, 2, 3, 4)], f"list {ck['list']}")
        check(ck["w"].requires_grad and torch.equal(ck["w"].detach(), torch.tensor([1.5, -2.0])), "requires_grad")
        check(ck["empty"].shape == (0, 3), "empty tensor")

        fb = load(f"{d}/rt_floats.pt", need_floats=True)
        check(fb == {"lr": 0.001, "neg": -2.5e-300, "blob": b"\x00\xffab\x80"}, f"floats/bytes {fb}")

        if hasattr(torch, "uint16"):
            u = load(f"{d}/rt_uint.pt")
            check(u["u16"].dtype == torch.uint16 and u["u16"].tolist() == [1, 65535], "uint16")
            check(u["u32"].dtype == torch.uint32 and u["u32"].tolist() == [2, 4294967295], "uint32")
            check(u["u64"].dtype == torch.uint64, "uint64")
        else:
            print(f"note: torch {torch.__version__} has no uint16/32/64: rt_uint.pt not checked")

    print(f"torch {torch.__version__}: {'OK' if not failures else f'{len(failures)} failures'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
