#!/usr/bin/env python3
"""Checks a Chrome trace written by `mtrun --trace` and summarises it for FileCheck.

  check-trace.py TRACE [--categories CAT,...]

Fails unless the file is JSON with a "traceEvents" list whose spans ("X" events) have a name,
a category, a rank (pid), a start and a non-negative duration, and every span of a step lies
within that rank's "step" span. Prints the ranks, then per rank the spans per step by name;
with --categories only the spans of those categories (a pipeline's "communication" spans of
waits for a peer come and go with the timing).
"""

import argparse
import collections
import json


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("--categories", help="count only the spans of these categories")
    args = parser.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    for e in spans:
        assert isinstance(e["name"], str) and isinstance(e["cat"], str), e
        assert e["dur"] >= 0 and e["ts"] >= 0, e
    ranks = sorted({e["pid"] for e in spans})
    print("ranks:", ", ".join(names[r] for r in ranks))
    for rank in ranks:
        mine = [e for e in spans if e["pid"] == rank]
        steps = [e for e in mine if e["name"] == "step"]
        per_step = collections.Counter()
        for e in mine:
            if e["name"] in ("step", "checkpoint", "export"):
                continue
            inside = [s for s in steps
                      if s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1e-3]
            assert len(inside) == 1, f"{e} is not within one step span"
            if args.categories is None or e["cat"] in args.categories.split(","):
                per_step[e["name"]] += 1
        counts = ", ".join(f"{name} {n / len(steps):g}" for name, n in sorted(per_step.items()))
        print(f"rank {rank}: {len(steps)} steps; per step: {counts}; "
              f"checkpoints {sum(e['name'] == 'checkpoint' for e in mine)}")


if __name__ == "__main__":
    main()
