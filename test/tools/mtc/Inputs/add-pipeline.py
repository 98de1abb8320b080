#!/usr/bin/env python3
"""Sets plan.json's "pipeline" object in a plan directory and rewrites its MANIFEST.

  add-pipeline.py PLAN PIPELINE.json [--set KEY=JSON]...

Plans compiled with pipeline parallelism carry "pipeline" (docs/plan-format.md); this puts a
hand-written one into a small plan (make-plan.py) for the tests of `mtc inspect --schedule`
and of the loader's errors. `--set` replaces a top-level key of the pipeline object first.
"""

import argparse
import hashlib
import json
import os


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("plan")
    parser.add_argument("pipeline")
    parser.add_argument("--set", action="append", default=[])
    args = parser.parse_args()
    with open(args.pipeline) as f:
        pipeline = json.load(f)
    for item in args.set:
        key, value = item.split("=", 1)
        pipeline[key] = json.loads(value)
    plan_json = os.path.join(args.plan, "plan.json")
    with open(plan_json) as f:
        plan = json.load(f)
    plan["pipeline"] = pipeline
    with open(plan_json, "w") as f:
        json.dump(plan, f, indent=2)
        f.write("\n")
    manifest = os.path.join(args.plan, "MANIFEST")
    with open(manifest) as f:
        lines = f.read().splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        name = line.split(" ", 2)[2]
        with open(os.path.join(args.plan, name), "rb") as f:
            data = f.read()
        out.append(f"{hashlib.sha256(data).hexdigest()} {len(data)} {name}")
    with open(manifest, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
