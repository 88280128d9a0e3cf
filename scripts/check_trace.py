#!/usr/bin/env python3
"""Validates a Chrome trace JSON file (what ct_profiler_stop / CT_PROFILE write).

    scripts/check_trace.py TRACE.json [--expect-span NAME]... [--min-spans N] [-q]

Checks the structure chrome://tracing and Perfetto read: the JSON object format
({"traceEvents": [...]}) or the bare array format; every event a dict with a known
"ph"; the fields each phase needs (ts/dur for "X", numeric args for "C", the
metadata names for "M", "s" scope for instant events); begin/end pairs balanced per
thread; complete events on one thread either nested or disjoint (a viewer cannot draw
partial overlap). Prints a summary; exits 0 when the trace is valid, 1 when not,
2 when the file cannot be read or parsed.
"""
import argparse
import collections
import json
import numbers
import sys

PHASES = set("XBEiIC" "M" "bnesftPOND" "()" "R" "cv")
METADATA = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index",
            "process_uptime_seconds", "num_cpus"}
EPS = 1e-6  # microseconds: decimal ts/dur parsed as floats


def is_num(x):
    return isinstance(x, numbers.Number) and not isinstance(x, bool)


def check(doc, expect_spans=(), min_spans=0):
    errors = []

    def err(i, msg):
        if len(errors) < 50:
            errors.append("event %d: %s" % (i, msg) if i is not None else msg)

    if isinstance(doc, dict):
        events = doc.get("traceEvents")
        if not isinstance(events, list):
            err(None, 'top level object has no "traceEvents" list')
            return errors, {}
        unit = doc.get("displayTimeUnit")
        if unit is not None and unit not in ("ms", "ns"):
            err(None, 'displayTimeUnit must be "ms" or "ns", got %r' % (unit,))
    elif isinstance(doc, list):
        events = doc
    else:
        err(None, "top level must be an object or an array")
        return errors, {}

    phases = collections.Counter()
    span_names = collections.Counter()
    spans = collections.defaultdict(list)  # (pid, tid) -> [(ts, dur, name, index)]
    open_be = collections.defaultdict(list)
    threads = set()
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            err(i, "not an object")
            continue
        ph = e.get("ph")
        if not isinstance(ph, str) or ph not in PHASES:
            err(i, "unknown phase %r" % (ph,))
            continue
        phases[ph] += 1
        if "name" in e and not isinstance(e["name"], str):
            err(i, "name is not a string")
        for k in ("pid", "tid"):
            if k in e and not isinstance(e[k], (int, str)):
                err(i, "%s must be an integer or a string" % k)
        if "args" in e and not isinstance(e["args"], dict):
            err(i, "args is not an object")
        if ph != "M" and not is_num(e.get("ts")):
            err(i, 'phase "%s" needs a numeric ts' % ph)
            continue
        key = (e.get("pid"), e.get("tid"))
        if ph == "X":
            threads.add(key)
            dur = e.get("dur")
            if not is_num(dur) or dur < 0:
                err(i, 'complete event needs a non-negative numeric "dur"')
                continue
            if not isinstance(e.get("name"), str):
                err(i, "complete event has no name")
                continue
            span_names[e["name"]] += 1
            spans[key].append((float(e["ts"]), float(dur), e["name"], i))
        elif ph == "B":
            threads.add(key)
            open_be[key].append((e.get("name"), i))
        elif ph == "E":
            if not open_be[key]:
                err(i, "end event without a begin on pid %r tid %r" % key)
            else:
                name, _ = open_be[key].pop()
                if "name" in e and name is not None and e["name"] != name:
                    err(i, "end event %r closes %r" % (e["name"], name))
        elif ph == "C":
            args = e.get("args")
            if not isinstance(e.get("name"), str):
                err(i, "counter event has no name")
            if not isinstance(args, dict) or not args or not all(is_num(v) for v in args.values()):
                err(i, "counter event needs args with numeric values")
        elif ph in "iI":
            if "s" in e and e["s"] not in ("g", "p", "t"):
                err(i, 'instant event scope "s" must be g, p or t')
        elif ph == "M":
            if e.get("name") not in METADATA:
                err(i, "unknown metadata event %r" % (e.get("name"),))
            elif e["name"] in ("process_name", "thread_name") and not isinstance((e.get("args") or {}).get("name"), str):
                err(i, "%s needs args.name" % e["name"])
    for key, stack in open_be.items():
        for name, i in stack:
            err(i, "begin event %r never ends" % (name,))

    # complete events: per thread, sorted by start (longer first), nested or disjoint
    max_depth = 0
    for key, lst in spans.items():
        lst.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for ts, dur, name, i in lst:
            while stack and ts >= stack[-1][0] + stack[-1][1] - EPS:
                stack.pop()
            if stack and ts + dur > stack[-1][0] + stack[-1][1] + EPS:
                err(i, "span %r [%.3f, %.3f] overlaps %r [%.3f, %.3f] on pid %r tid %r without nesting"
                    % (name, ts, ts + dur, stack[-1][2], stack[-1][0], stack[-1][0] + stack[-1][1], key[0], key[1]))
                continue
            stack.append((ts, dur, name))
            max_depth = max(max_depth, len(stack))
    for name in expect_spans:
        if name not in span_names:
            err(None, "no complete event named %r" % name)
    if sum(span_names.values()) < min_spans:
        err(None, "%d complete events, expected at least %d" % (sum(span_names.values()), min_spans))
    summary = {"events": len(events), "phases": dict(phases), "threads": len(threads), "max_depth": max_depth,
               "top_spans": span_names.most_common(10)}
    return errors, summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--expect-span", action="append", default=[], help="a complete event name that must appear")
    ap.add_argument("--min-spans", type=int, default=0)
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    try:
        with open(args.trace, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as ex:
        print("%s: cannot read as JSON: %s" % (args.trace, ex), file=sys.stderr)
        return 2
    errors, summary = check(doc, args.expect_span, args.min_spans)
    for e in errors:
        print("%s: %s" % (args.trace, e), file=sys.stderr)
    if not args.quiet:
        print("%s: %s" % (args.trace, "INVALID" if errors else "valid Chrome trace"))
        if summary:
            print("  events %d, threads with spans %d, deepest nesting %d" %
                  (summary["events"], summary["threads"], summary["max_depth"]))
            print("  by phase: %s" % ", ".join("%s=%d" % kv for kv in sorted(summary["phases"].items())))
            print("  most frequent spans: %s" % ", ".join("%s (%d)" % kv for kv in summary["top_spans"]))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
