#!/usr/bin/env python3
"""Sets plan.json's predictions.functions in a plan directory and rewrites its MANIFEST.

  set-functions.py PLAN FUNCTIONS_JSON

Compiled plans carry predictions.functions (docs/plan-format.md, "Predictions"); this puts a
hand-written one into a small plan (make-plan.py) for the tests of `mtc simulate`'s checks.
"""

import hashlib
import json
import os
import sys


def main():
    plan_dir, functions = sys.argv[1], json.loads(sys.argv[2])
    plan_json = os.path.join(plan_dir, "plan.json")
    with open(plan_json) as f:
        plan = json.load(f)
    plan["predictions"]["functions"] = functions
    with open(plan_json, "w") as f:
        json.dump(plan, f, indent=2)
        f.write("\n")
    manifest = os.path.join(plan_dir, "MANIFEST")
    with open(manifest) as f:
        lines = f.read().splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        name = line.split(" ", 2)[2]
        with open(os.path.join(plan_dir, name), "rb") as f:
            data = f.read()
        out.append(f"{hashlib.sha256(data).hexdigest()} {len(data)} {name}")
    with open(manifest, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
