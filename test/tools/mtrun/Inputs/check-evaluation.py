#!/usr/bin/env python3
"""Checks one evaluation record of the JSONL metrics `mtrun --metrics FILE` wrote.

  check-evaluation.py RUN.jsonl [--key K] [--record I] [--count N] [--fields F=V,...]
                      [--same OTHER.jsonl [--other-key K] [--other-record J] (--atol A | --rtol R)]

Selects the records of RUN that hold the key K (validation_loss by default, or test_loss),
and of them record I (Python's indexing: -1 is the last). --count N: RUN has exactly N such
records. --fields: the record has each field F with the JSON value V (true, 48, ...); F=-
says it has no field F. --same: OTHER's record J of those holding --other-key (default K;
default J: -1) has K's value within absolute tolerance A (0: identical) or relative tolerance R.
Prints what it checked, for FileCheck.
"""
import argparse
import json
import math
import sys


def records(path, key):
    with open(path) as f:
        return [r for r in (json.loads(line) for line in f) if key in r]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("--key", default="validation_loss")
    parser.add_argument("--record", type=int, default=-1)
    parser.add_argument("--count", type=int)
    parser.add_argument("--fields")
    parser.add_argument("--same")
    parser.add_argument("--other-key")
    parser.add_argument("--other-record", type=int, default=-1)
    parser.add_argument("--atol", type=float)
    parser.add_argument("--rtol", type=float)
    args = parser.parse_args()
    found = records(args.run, args.key)
    if args.count is not None and len(found) != args.count:
        sys.exit(f"{args.run}: {len(found)} records with {args.key}, expected {args.count}")
    if not found:
        sys.exit(f"{args.run}: no record with {args.key}")
    record = found[args.record]
    value = record[args.key]
    if not isinstance(value, float) or not math.isfinite(value):
        sys.exit(f"{args.run}: {args.key} {value!r}")
    for field in (args.fields.split(",") if args.fields else []):
        name, expected = field.split("=", 1)
        if expected == "-":
            if name in record:
                sys.exit(f"{args.run}: {name} {record[name]!r}, expected none")
            continue
        if record.get(name) != json.loads(expected):
            sys.exit(f"{args.run}: {name} {record.get(name)!r}, expected {expected}")
    print(f"{args.key} {value:.6f} at step {record['step']}" +
          (f": {args.fields}" if args.fields else ""))
    if args.same:
        other = records(args.same, args.other_key or args.key)[args.other_record]
        theirs = other[args.other_key or args.key]
        if args.rtol is not None:
            diff, tolerance, kind = abs(value - theirs) / abs(theirs), args.rtol, "relative"
        else:
            diff, tolerance, kind = abs(value - theirs), args.atol or 0.0, "absolute"
        if diff > tolerance:
            sys.exit(f"{args.key} {value!r} against {theirs!r}: {diff:.3g} {kind} "
                     f"(tolerance {tolerance})")
        print(f"same {args.key} within {tolerance} {kind}")


if __name__ == "__main__":
    main()
