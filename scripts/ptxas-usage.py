#!/usr/bin/env python3
"""Summarises the resources of every kernel of a plan's PTX, as `ptxas -v` reports them.

    scripts/ptxas-usage.py PLAN [PTXAS]

For each kernels/<chip>.ptx of the plan (written by `mtc compile --target=cuda`): the number
of kernels, the largest and median registers per thread, the largest shared memory per
block, and the kernels that spill (none expected). PTXAS defaults to the toolkit's ptxas
under $CUDA_ROOT, /usr/local/cuda, or the one on PATH. Exits 1 when a kernel spills or
ptxas fails.
"""
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys

ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
USAGE = re.compile(r"Used (\d+) registers.*?(?:, (\d+) bytes smem)?")
SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def find_ptxas():
    root = os.environ.get("CUDA_ROOT") or os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    candidate = os.path.join(root, "bin", "ptxas")
    return candidate if os.access(candidate, os.X_OK) else shutil.which("ptxas")


def summarise(ptxas, path, chip):
    run = subprocess.run([ptxas, "-v", "-arch=" + chip, path, "-o", os.devnull],
                         capture_output=True, text=True)
    if run.returncode != 0:
        print(f"{path}: ptxas failed:\n{run.stderr}", file=sys.stderr)
        return False
    registers, shared, spills, kernel = [], [], [], None
    for line in run.stderr.splitlines():
        if m := ENTRY.search(line):
            kernel = m.group(1)
        elif kernel and (m := SPILL.search(line)) and (m.group(1) != "0" or m.group(2) != "0"):
            spills.append(kernel)
        elif kernel and "Used" in line and (m := USAGE.search(line)):
            registers.append(int(m.group(1)))
            smem = re.search(r"(\d+) bytes smem", line)
            shared.append(int(smem.group(1)) if smem else 0)
            kernel = None
    print(f"{path}: {len(registers)} kernels; registers max {max(registers, default=0)}, "
          f"median {statistics.median_low(registers) if registers else 0}; shared memory max "
          f"{max(shared, default=0)} bytes; {len(spills)} spilling{': ' if spills else ''}"
          f"{', '.join(spills)}")
    return not spills


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    ptxas = sys.argv[2] if len(sys.argv) == 3 else find_ptxas()
    if not ptxas:
        sys.exit("ptxas-usage.py: no ptxas found (install the CUDA toolkit or give its path)")
    files = sorted(glob.glob(os.path.join(sys.argv[1], "kernels", "sm_*.ptx")))
    if not files:
        sys.exit(f"ptxas-usage.py: {sys.argv[1]} has no kernels/sm_*.ptx")
    ok = True
    for path in files:
        ok &= summarise(ptxas, path, os.path.basename(path)[:-len(".ptx")])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
