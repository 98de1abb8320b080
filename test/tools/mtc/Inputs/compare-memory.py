"""Compares `mtc explore --evaluate`'s composed memory per rank with the exact peak a plan
compiled with its x86 kernels predicts (predictions.memory_bytes.peak: the runtime's buffers
and the kernels' planned workspace).

    compare-memory.py PLAN COMPOSED.txt
"""
import json
import re
import sys

peak = json.load(open(sys.argv[1] + "/plan.json"))["predictions"]["memory_bytes"]["peak"]
composed = int(re.search(r"memory:.*\((\d+) bytes", open(sys.argv[2]).read()).group(1))
error = composed / peak - 1
print("within 5%" if abs(error) <= 0.05 else f"composed {composed}, planned {peak}: {100 * error:+.1f}%")
