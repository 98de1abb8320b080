"""Compares the saved activations `mtc explore --evaluate` composes for one pipeline stage
("activations held, per stage") with the plan's prediction for that stage
(pipeline.schedules[].stages[].activation_bytes, for the schedule of the plan's
micro-batches per step).

    compare-activations.py PLAN COMPOSED.txt STAGE TOLERANCE

Prints "stage S activations within TOLERANCE", or both figures.
"""
import json
import re
import sys

plan_dir, composed_path, stage, tolerance = sys.argv[1:5]
stage = int(stage)
plan = json.load(open(plan_dir + "/plan.json"))
micro_batches = plan["train"]["global_batch"] // plan["train"]["micro_batch"]
schedule = next(s for s in plan["pipeline"]["schedules"] if s["micro_batches"] == micro_batches)
planned = schedule["stages"][stage]["activation_bytes"]
held = re.search(r"activations held, per stage:([\d ]+) bytes", open(composed_path).read())
composed = int(held.group(1).split()[stage])
error = composed / planned - 1
if abs(error) <= float(tolerance):
    print(f"stage {stage} activations within {tolerance}")
else:
    print(f"stage {stage} activations: composed {composed}, planned {planned}: {100 * error:+.1f}%")
