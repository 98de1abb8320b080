#!/usr/bin/env python3
"""Checks mtrun's communication line against a prediction that is an upper bound.

  check-communication.py LOG --below F

LOG holds `communication: X MiB sent by rank 0 per step (...); predicted at most Y MiB`:
X must not exceed Y (the plan's figure counts every expert slot as filled), and must be
below F * Y (the filled slots alone really travel: the bytes shrank against the static
all-to-all, which moves Y).
"""
import argparse
import re
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("--below", type=float, required=True)
    args = parser.parse_args()
    with open(args.log) as f:
        text = f.read()
    match = re.search(r"communication: ([0-9.]+) MiB sent by rank 0 per step .*; "
                      r"predicted at most ([0-9.]+) MiB", text)
    if not match:
        sys.exit(f"{args.log}: no communication line with an upper bound")
    counted, bound = float(match.group(1)), float(match.group(2))
    if counted > bound:
        sys.exit(f"counted {counted} MiB exceeds the predicted bound {bound} MiB")
    if counted >= args.below * bound:
        sys.exit(f"counted {counted} MiB is not below {args.below} of the bound {bound} MiB")
    print(f"communication within the bound: {counted} MiB <= {bound} MiB, "
          f"below {args.below} of it")


if __name__ == "__main__":
    main()
