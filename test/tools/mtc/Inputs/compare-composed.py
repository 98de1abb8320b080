"""Compares `mtc explore --evaluate`'s composed step with `mtc simulate`'s of the same layout
compiled whole (its --trace file holds the step time at full precision).

    compare-composed.py SIMULATED_TRACE.json COMPOSED.txt
"""
import json
import re
import sys

simulated = json.load(open(sys.argv[1]))["otherData"]["step_seconds"]
text = open(sys.argv[2]).read()
composed = float(re.search(r"step:\s+(\S+) s composed", text).group(1))
difference = abs(composed - simulated) / simulated
if difference < 1e-6:
    print("composed = simulated")
else:
    print(f"composed {composed:.9g} s, simulated {simulated:.9g} s: {100 * difference:.4f}% apart")
