"""Prints whether a plan's CUDA host workspace (`kernels.cuda.host.workspace_bytes`, device
memory) stays within 1.1 times its x86 kernels' workspace (`predictions.memory_bytes.
workspace`) for FileCheck, with both figures:  workspaces.py PLAN

Both backends' temporaries are freed after their last uses and packed by the same
planner, so the two are close (equal for gpt-tiny); a host code that held its temporaries
to the end of each function was 3.2 times the x86 figure.
"""
import json
import os
import sys

plan = json.load(open(os.path.join(sys.argv[1], "plan.json")))
cuda = plan["kernels"]["cuda"]["host"]["workspace_bytes"]
x86 = plan["predictions"]["memory_bytes"]["workspace"]
print("cuda host workspace", cuda, "x86 workspace", x86)
print("cuda host workspace within 1.1 x the x86 workspace:", 0 < cuda <= 1.1 * x86)
