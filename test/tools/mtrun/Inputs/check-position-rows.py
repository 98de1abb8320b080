#!/usr/bin/env python3
"""Checks which rows of a learned position table training read (Python standard library only):

  check-position-rows.py INIT.safetensors TRAINED.safetensors --table NAME --docs DOCS.jsonl

With Megatron's --reset-position-ids a token's position counts within its document, the end
of document keeping its document's position: no position reaches L = the longest document of
DOCS (its UTF-8 bytes, the bytes tokenizer's tokens) plus its end of document. The rows >= L
of the table then never get a gradient: Adam moves them by exactly 0, and only the decoupled
weight decay scales them, every element by the same factor. The rows below 8 are read by
every sample and move otherwise. Prints the factor and the deviations; fails where a row >= L
is not the common multiple of its start, or the first rows are."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from importlib import import_module

read = import_module("compare-safetensors").read


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("init")
    parser.add_argument("trained")
    parser.add_argument("--table", required=True)
    parser.add_argument("--docs", required=True)
    args = parser.parse_args()
    with open(args.docs) as f:
        longest = max(len(json.loads(line)["text"].encode()) for line in f if line.strip())
    unread = longest + 1
    (rows, width), before = read(args.init)[args.table]
    shape, after = read(args.trained)[args.table]
    if shape != [rows, width] or unread >= rows:
        sys.exit(f"{args.table}: shape {shape}, first unread row {unread}")

    def ratios(row):
        return [after[row * width + j] / before[row * width + j] for j in range(width)]

    factor = ratios(unread)[0]
    unread_dev = max(abs(r - factor) / factor for row in range(unread, rows) for r in ratios(row))
    read_dev = min(max(abs(r - factor) / factor for r in ratios(row)) for row in range(8))
    print(f"rows >= {unread}: scaled by {factor:.6f} within {unread_dev:.1e}; "
          f"rows < 8 differ from it by at least {read_dev:.1e}")
    if unread_dev > 1e-5:
        sys.exit(f"a row >= {unread} moved by more than the weight decay")
    if read_dev < 1e-3:
        sys.exit("a row < 8 moved by the weight decay alone: it was not read")


if __name__ == "__main__":
    main()
