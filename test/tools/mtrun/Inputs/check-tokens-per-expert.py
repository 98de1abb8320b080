#!/usr/bin/env python3
"""Checks the tokens per expert `mtrun --metrics FILE` logs for an MoE model.

  check-tokens-per-expert.py RUN.jsonl --layers L --experts E --choices C
                             [--same OTHER.jsonl ...] [--first K --at-step S]
  check-tokens-per-expert.py RUN.jsonl --absent

Every record's "tokens_per_expert" has L rows (MoE layers) of E non-negative integers that
add up to C (the step's tokens times k: counts come before any capacity drops a choice).
--same: each OTHER has the same steps with identical counts (a parallel run against the
run it must equal). --first K --at-step S: at step S every choice went to the first K experts
(a router that starts at zeros). --absent: no record has the key (a dense model).
"""
import argparse
import json
import sys


def read(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def counts(path, record):
    if "tokens_per_expert" not in record:
        sys.exit(f"{path}: step {record.get('step')}: no tokens_per_expert")
    return record["tokens_per_expert"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("--layers", type=int)
    parser.add_argument("--experts", type=int)
    parser.add_argument("--choices", type=int)
    parser.add_argument("--same", nargs="*", default=[])
    parser.add_argument("--first", type=int)
    parser.add_argument("--at-step", type=int, default=1)
    parser.add_argument("--absent", action="store_true")
    args = parser.parse_args()
    run = read(args.run)
    if not run:
        sys.exit(f"{args.run}: no records")
    if args.absent:
        for r in run:
            if "tokens_per_expert" in r:
                sys.exit(f"{args.run}: step {r['step']}: unexpected tokens_per_expert")
        print(f"no tokens_per_expert: {len(run)} steps")
        return
    for r in run:
        rows = counts(args.run, r)
        if len(rows) != args.layers:
            sys.exit(f"{args.run}: step {r['step']}: {len(rows)} layers, expected {args.layers}")
        for layer, row in enumerate(rows):
            if len(row) != args.experts or any(not isinstance(n, int) or n < 0 for n in row):
                sys.exit(f"{args.run}: step {r['step']} layer {layer}: {row} is not "
                         f"{args.experts} counts")
            if sum(row) != args.choices:
                sys.exit(f"{args.run}: step {r['step']} layer {layer}: {row} adds up to "
                         f"{sum(row)}, expected {args.choices}")
    print(f"tokens per expert: {len(run)} steps, {args.layers} layers adding up to {args.choices}")
    for other_path in args.same:
        other = read(other_path)
        if [r["step"] for r in other] != [r["step"] for r in run]:
            sys.exit(f"{other_path}: steps {[r['step'] for r in other]}, expected "
                     f"{[r['step'] for r in run]}")
        for a, b in zip(run, other):
            if counts(args.run, a) != counts(other_path, b):
                sys.exit(f"step {a['step']}: {counts(args.run, a)} in {args.run} but "
                         f"{counts(other_path, b)} in {other_path}")
    if args.same:
        print(f"same tokens per expert: {len(args.same)} runs")
    if args.first is not None:
        record = next((r for r in run if r["step"] == args.at_step), None)
        if record is None:
            sys.exit(f"{args.run}: no step {args.at_step}")
        for layer, row in enumerate(counts(args.run, record)):
            if any(row[args.first:]):
                sys.exit(f"step {args.at_step} layer {layer}: {row} routes past the first "
                         f"{args.first} experts")
        print(f"step {args.at_step}: every choice on the first {args.first} experts")


if __name__ == "__main__":
    main()
