#!/usr/bin/env python3
"""Removes compiled functions from a plan's calling convention and re-hashes plan.json in
MANIFEST, so the plan still loads: a plan that lacks what only some ranks need.

  drop-plan-function.py PLAN NAME [NAME ...]     e.g. stage1.grad_squares
"""

import hashlib
import json
import os
import sys


def rewrite_plan(plan, edit):
    """Applies `edit` to the plan's plan.json document and re-hashes it in MANIFEST."""
    path = os.path.join(plan, "plan.json")
    with open(path) as f:
        doc = json.load(f)
    edit(doc)
    text = json.dumps(doc, indent=1, sort_keys=True).encode()
    with open(path, "wb") as f:
        f.write(text)
    manifest = os.path.join(plan, "MANIFEST")
    with open(manifest) as f:
        lines = f.read().splitlines()
    out = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) == 3 and fields[2] == "plan.json":
            line = f"{hashlib.sha256(text).hexdigest()} {len(text)} plan.json"
        out.append(line)
    with open(manifest, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    plan, names = sys.argv[1], sys.argv[2:]

    def drop(doc):
        functions = doc["kernels"]["x86_64"]["functions"]
        for name in names:
            del functions[name]

    rewrite_plan(plan, drop)


if __name__ == "__main__":
    main()
