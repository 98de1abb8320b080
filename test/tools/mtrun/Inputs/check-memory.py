#!/usr/bin/env python3
"""Checks the runtime's measured peak bytes against the compiler's prediction.

  check-memory.py RUN.jsonl PLAN_DIR [--rtol R] [--pipeline-micro-batches M]

Every record of RUN (`mtrun --metrics`) has `peak_bytes` (the trainer's buffers plus the
kernels' high-water mark of temporaries) within relative tolerance R (default 0.1) of the
plan's `predictions.memory_bytes.peak`, and no record exceeds the last (a high-water mark).
With --pipeline-micro-batches M (a pipeline plan, whose metrics are rank 0's: stage 0's), the
prediction is stage 0's `peak_bytes` in the plan's schedule for M micro-batches per
data-parallel rank.
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
    parser.add_argument("--pipeline-micro-batches", type=int)
    args = parser.parse_args()
    with open(os.path.join(args.plan, "plan.json")) as f:
        plan = json.load(f)
    if args.pipeline_micro_batches is None:
        memory = plan["predictions"]["memory_bytes"]
    else:
        schedules = [s for s in plan["pipeline"]["schedules"]
                     if s["micro_batches"] == args.pipeline_micro_batches]
        if not schedules:
            sys.exit(f"{args.plan}: no schedule for {args.pipeline_micro_batches} micro-batches")
        memory = {"peak": schedules[0]["stages"][0]["peak_bytes"]} \
            if "peak_bytes" in schedules[0]["stages"][0] else {}
    if "peak" not in memory:
        sys.exit(f"{args.plan}: no predicted peak (a plan without kernels?)")
    predicted = memory["peak"]
    with open(args.run) as f:
        # The step records (an evaluation's record has no peak).
        measured = [r["peak_bytes"] for r in map(json.loads, f) if "validation_loss" not in r]
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
