#!/usr/bin/env python3
"""Checks a ctorch allocator snapshot with real tooling (optional; CI does not run it).

    python3 tests/golden/check_snapshot.py SNAPSHOT.pickle [SNAPSHOT.json]

1. Python's pickle module loads it.
2. Every opcode is one that PyTorch's memory viewer (MemoryViz.js) unpickles.
3. The structure is what torch.cuda.memory._snapshot() returns: blocks tile their
   segment, segments are sorted, trace actions are PyTorch's.
4. torch.cuda._memory_viz (whatever this torch provides: stats, segments, memory,
   compare; older versions take the segment list, newer ones the whole dict) accepts it.
5. The JSON snapshot, when given, holds the same data.
Exit status 0 when everything passes, 77 when torch is missing (only 1-3 and 5 ran).
"""
import json
import pickle
import pickletools
import sys

# The opcodes MemoryViz.js's unpickler implements (docs: specs/formats.md section 3).
MEMORYVIZ_OPS = {
    "PROTO", "FRAME", "MEMOIZE", "STOP", "BINUNICODE", "SHORT_BINUNICODE", "BININT", "BININT1",
    "BININT2", "LONG1", "BINFLOAT", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "MARK", "SETITEM",
    "SETITEMS", "APPEND", "APPENDS", "LIST", "DICT", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
    "NEWTRUE", "NEWFALSE", "NONE", "BINGET", "LONG_BINGET", "BINPUT", "LONG_BINPUT",
}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "snapshot", "oom"}
STATES = {"active_allocated", "active_pending_free", "inactive"}


def check_opcodes(data):
    for op, arg, pos in pickletools.genops(data):
        if op.name not in MEMORYVIZ_OPS:
            raise AssertionError(f"opcode {op.name} at {pos} is not read by MemoryViz")
        if op.name == "LONG1" and not -(2**63) <= arg < 2**64:
            raise AssertionError(f"LONG1 at {pos} needs more than 8 bytes")


def check_structure(snap):
    assert set(snap) >= {"segments", "device_traces"}, snap.keys()
    last = -1
    for seg in snap["segments"]:
        for k in ("device", "address", "total_size", "allocated_size", "active_size", "requested_size",
                  "stream", "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"):
            assert k in seg, k
        assert seg["address"] > last, "segments sorted by address"
        last = seg["address"]
        assert seg["segment_type"] in ("small", "large")
        assert isinstance(seg["segment_pool_id"], tuple)
        addr = seg["address"]
        allocated = active = 0
        for b in seg["blocks"]:
            assert b["address"] == addr, "blocks tile the segment"
            assert b["state"] in STATES, b["state"]
            for f in b["frames"]:
                assert set(f) == {"filename", "line", "name"}
            addr += b["size"]
            allocated += b["size"] if b["state"] == "active_allocated" else 0
            active += b["size"] if b["state"] != "inactive" else 0
        assert addr == seg["address"] + seg["total_size"]
        assert allocated == seg["allocated_size"] and active == seg["active_size"]
    for dev in snap["device_traces"]:
        t0 = 0
        for e in dev:
            assert e["action"] in ACTIONS, e["action"]
            assert ("device_free" if e["action"] == "oom" else "addr") in e
            assert e["time_us"] >= t0
            t0 = e["time_us"]


def check_memory_viz(snap):
    try:
        from torch.cuda import _memory_viz as mv
    except ImportError:
        return None
    import torch
    checked = []
    no_flamegraph = lambda lines: lines  # the functions hand their text to flamegraph.pl

    def call(name, *args):
        """Versions differ in what a function takes: 1.13's take the segment list, later
        ones the whole dict (compare always takes two segment lists)."""
        if not hasattr(mv, name):
            return
        kw = {"format_flamegraph": no_flamegraph} if name in ("segments", "memory", "compare") else {}
        errors = []
        for arg in (snap, snap["segments"]):
            try:
                out = getattr(mv, name)(*[arg] * len(args), **kw) if args else getattr(mv, name)(arg, **kw)
            except (TypeError, KeyError) as e:
                errors.append(repr(e))
                continue
            assert out is None or isinstance(out, (str, dict)), name
            summary = out if isinstance(out, dict) else f"{len(str(out).splitlines())} lines"
            checked.append(f"{name} -> {summary}")
            return
        raise AssertionError(f"torch {torch.__version__} _memory_viz.{name} rejected the snapshot: {errors}")

    for name in ("stats", "segments", "memory", "segsum", "trace", "trace_plot", "segment_plot"):
        call(name)
    call("compare", 0, 0)
    return f"torch {torch.__version__} _memory_viz: " + "; ".join(checked)


def untuple(x):
    if isinstance(x, (list, tuple)):
        return [untuple(v) for v in x]
    if isinstance(x, dict):
        return {k: untuple(v) for k, v in x.items()}
    return x


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    data = open(sys.argv[1], "rb").read()
    snap = pickle.loads(data)
    print(f"pickle.load: ok ({len(snap['segments'])} segments, "
          f"{sum(len(d) for d in snap['device_traces'])} trace entries)")
    check_opcodes(data)
    print("opcodes: all in MemoryViz's subset")
    check_structure(snap)
    print("structure: ok")
    if len(sys.argv) > 2:
        j = json.load(open(sys.argv[2]))
        # the two files come from separate snapshot calls: compare the segments only
        assert untuple(snap["segments"]) == j["segments"], "JSON and pickle segments differ"
        print("json: same segments as the pickle")
    result = check_memory_viz(snap)
    if result is None:
        print("torch not installed: _memory_viz not checked")
        return 77
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
