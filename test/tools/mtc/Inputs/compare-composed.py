"""Compares `mtc explore --evaluate`'s composed step with `mtc simulate`'s of the same layout
compiled whole (its --trace file holds the step time at full precision).

    compare-composed.py SIMULATED_TRACE.json COMPOSED.txt [TOLERANCE]

Equal (to 1e-6) prints "composed = simulated"; with TOLERANCE (a fraction), within it prints
"composed within TOLERANCE".
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
elif len(sys.argv) > 3 and difference <= float(sys.argv[3]):
    print(f"composed within {sys.argv[3]}")
else:
    print(f"composed {composed:.9g} s, simulated {simulated:.9g} s: {100 * difference:.4f}% apart")
