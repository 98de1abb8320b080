#!/usr/bin/env python3
"""Checks the runtime's measured peak bytes against the compiler's prediction.

  check-memory.py RUN.jsonl PLAN_DIR [--rtol R]

Every record of RUN (`mtrun --metrics`) has `peak_bytes` (the trainer's buffers plus the
kernels' high-water mark of temporaries) within relative tolerance R (default 0.1) of the
plan's `predictions.memory_bytes.peak`, and no record exceeds the last (a high-water mark).
"""
import argparse
import json
import os
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("plan")
    parser.add_argument("--rtol", type=float, default=0.1)
    args = parser.parse_args()
    with open(os.path.join(args.plan, "plan.json")) as f:
        memory = json.load(f)["predictions"]["memory_bytes"]
    if "peak" not in memory:
        sys.exit(f"{args.plan}: no predicted peak (a plan without kernels?)")
    predicted = memory["peak"]
    with open(args.run) as f:
        measured = [json.loads(line)["peak_bytes"] for line in f]
    if not measured:
        sys.exit(f"{args.run}: no records")
    if measured != sorted(measured):
        sys.exit(f"{args.run}: the peak bytes fall: {measured}")
    gap = (measured[-1] - predicted) / predicted
    if abs(gap) > args.rtol:
        sys.exit(f"measured peak {measured[-1]} bytes, predicted {predicted}: "
                 f"{gap:+.1%} (tolerance {args.rtol:.0%})")
    print(f"peak within {args.rtol:.0%}: measured {measured[-1]}, predicted {predicted} ({gap:+.2%})")


if __name__ == "__main__":
    main()
