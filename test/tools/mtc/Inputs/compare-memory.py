"""Compares `mtc explore --evaluate`'s composed memory per rank with the exact peak a plan
compiled with its x86 kernels predicts (predictions.memory_bytes.peak: the runtime's buffers
and the kernels' planned workspace).

    compare-memory.py PLAN COMPOSED.txt [TOLERANCE]

Within TOLERANCE (a fraction, 0.05 when not given) prints "within 5%" (the tolerance in
percent).
"""
import json
import re
import sys

peak = json.load(open(sys.argv[1] + "/plan.json"))["predictions"]["memory_bytes"]["peak"]
composed = int(re.search(r"memory:.*\((\d+) bytes", open(sys.argv[2]).read()).group(1))
tolerance = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05
error = composed / peak - 1
if abs(error) <= tolerance:
    print(f"within {100 * tolerance:g}%")
else:
    print(f"composed {composed}, planned {peak}: {100 * error:+.1f}%")
