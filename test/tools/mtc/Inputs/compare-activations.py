"""Compares the activations `mtc explore --evaluate` composes for one pipeline stage with the
plan's prediction for that stage (pipeline.schedules[].stages[].activation_bytes, for the
schedule of the plan's micro-batches per step).

    compare-activations.py PLAN COMPOSED.txt STAGE TOLERANCE

Prints "stage S within TOLERANCE", or both figures.
"""
import json
import re
import sys

plan = json.load(open(sys.argv[1] + "/plan.json"))
stage = int(sys.argv[3])
micro_batches = plan["train"]["global_batch"] // plan["train"]["micro_batch"]
schedule = next(s for s in plan["pipeline"]["schedules"] if s["micro_batches"] == micro_batches)
planned = schedule["stages"][stage]["activation_bytes"]
held = re.search(r"activations held, per stage:([\d ]+) bytes", open(sys.argv[2]).read())
composed = int(held.group(1).split()[stage])
error = composed / planned - 1
if abs(error) <= float(sys.argv[4]):
    print(f"stage {stage} within {sys.argv[4]}")
else:
    print(f"stage {stage}: composed {composed}, planned {planned}: {100 * error:+.1f}%")
