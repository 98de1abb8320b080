"""Prints what a plan's plan.json says of its CUDA kernels (`kernels.cuda`), one fact a line,
for FileCheck:  cuda-kernels.py PLAN [FUNCTION...]

    block_size N
    binary CHIP PTX CUBIN|-
    functions F1 F2 ...
    FUNCTION calls C1 C2 ...      (for each FUNCTION given)
    FUNCTION launches N first KERNEL grid [..] block [..] args KIND,KIND,...
    host FILE workspace BYTES functions F1 F2 ...   (the host code, when the plan has it)
"""
import json
import os
import sys

cuda = json.load(open(os.path.join(sys.argv[1], "plan.json")))["kernels"]["cuda"]
print("block_size", cuda["block_size"])
for binary in cuda["binaries"]:
    print("binary", binary["chip"], binary["ptx"], binary.get("cubin", "-"))
functions = cuda["functions"]
print("functions", " ".join(sorted(functions)))
for name in sys.argv[2:]:
    function = functions[name]
    print(name, "calls", " ".join(function["calls"]))
    launches = function["launches"]
    if launches:
        first = launches[0]
        print(name, "launches", len(launches), "first", first["kernel"], "grid", first["grid"],
              "block", first["block"], "args", ",".join(a["kind"] for a in first["args"]))
    else:
        print(name, "launches 0")
host = cuda.get("host")
if host:
    print("host", host["file"], "workspace", host["workspace_bytes"], "functions",
          " ".join(sorted(host["functions"])))
