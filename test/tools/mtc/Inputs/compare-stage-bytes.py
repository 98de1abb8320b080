"""Compares what `mtc explore --evaluate` composes for one pipeline stage with the plan's
prediction for that stage, for the schedule of the plan's micro-batches per step:

    compare-stage-bytes.py PLAN COMPOSED.txt STAGE WHAT TOLERANCE

WHAT is `activations` (the saved activations the stage holds at once: the plan's
pipeline.schedules[].stages[].activation_bytes against "activations held, per stage") or
`memory` (the stage's peak per rank: its peak_bytes against "memory, per stage").

Prints "stage S WHAT within TOLERANCE", or both figures.
"""
import json
import re
import sys

plan_dir, composed_path, stage, what, tolerance = sys.argv[1:6]
stage = int(stage)
plan = json.load(open(plan_dir + "/plan.json"))
micro_batches = plan["train"]["global_batch"] // plan["train"]["micro_batch"]
schedule = next(s for s in plan["pipeline"]["schedules"] if s["micro_batches"] == micro_batches)
field, line = {"activations": ("activation_bytes", "activations held"),
               "memory": ("peak_bytes", "memory")}[what]
planned = schedule["stages"][stage][field]
held = re.search(line + r", per stage:([\d ]+) bytes", open(composed_path).read())
composed = int(held.group(1).split()[stage])
error = composed / planned - 1
if abs(error) <= float(tolerance):
    print(f"stage {stage} {what} within {tolerance}")
else:
    print(f"stage {stage} {what}: composed {composed}, planned {planned}: {100 * error:+.1f}%")
