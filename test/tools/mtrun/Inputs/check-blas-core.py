"""Checks which OpenBLAS kernels an mtrun process ran (runtime/support/BlasCore.h).

    check-blas-core.py LOG [--user CORE]

LOG is what `OPENBLAS_VERBOSE=2 mtrun --version` printed: OpenBLAS's "Core: NAME" once per
load of the library. Without --user: when OpenBLAS first fell back on Prescott on a CPU
with AVX512 (F, BW, DQ, VL) or AVX2 + FMA, mtrun must have executed itself again with
SkylakeX or Haswell (a second line); otherwise OpenBLAS's one choice stands. With --user
CORE (OPENBLAS_CORETYPE was set): one load, CORE kept. Prints what it found.
"""

import argparse
import re
import sys


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def expected_fallback(flags):
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--user")
    args = ap.parse_args()
    cores = re.findall(r"^Core: (\S+)", open(args.log).read(), re.M)
    if args.user:
        ok = cores == [args.user]
    elif cores and cores[0].lower() == "prescott" and expected_fallback(cpu_flags()):
        ok = cores == [cores[0], expected_fallback(cpu_flags())]
    else:
        ok = len(cores) == 1
    print(("blas core ok: " if ok else "blas core WRONG: ") + " -> ".join(cores))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
