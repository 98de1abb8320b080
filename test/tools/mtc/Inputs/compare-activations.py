"""Compares the saved activations `mtc explore --evaluate` composes for one pipeline stage
("activations held, per stage") with the plan's prediction for that stage
(pipeline.schedules[].stages[].activation_bytes, for the schedule of the plan's
micro-batches per step and data-parallel rank); with `memory`, the stage's whole memory ("memory, per stage")
with the plan's peak_bytes.

    compare-activations.py PLAN COMPOSED.txt STAGE TOLERANCE [memory]

Prints "stage S activations within TOLERANCE" ("memory within"), or both figures.
"""
import json
import re
import sys

plan_dir, composed_path, stage, tolerance = sys.argv[1:5]
what = sys.argv[5] if len(sys.argv) > 5 else "activations"
stage = int(stage)
plan = json.load(open(plan_dir + "/plan.json"))
mesh = plan.get("mesh") or {}
data_parallel = next((a["size"] for a in mesh.get("axes", [])
                      if a["name"] == mesh.get("data_parallel_axis")), 1)
micro_batches = plan["train"]["global_batch"] // (plan["train"]["micro_batch"] * data_parallel)
schedule = next(s for s in plan["pipeline"]["schedules"] if s["micro_batches"] == micro_batches)
planned = schedule["stages"][stage]["peak_bytes" if what == "memory" else "activation_bytes"]
line = "memory, per stage" if what == "memory" else "activations held, per stage"
held = re.search(line + r":([\d ]+) bytes", open(composed_path).read())
composed = int(held.group(1).split()[stage])
error = composed / planned - 1
if abs(error) <= float(tolerance):
    print(f"stage {stage} {what} within {tolerance}")
else:
    print(f"stage {stage} {what}: composed {composed}, planned {planned}: {100 * error:+.1f}%")
