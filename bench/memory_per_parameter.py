#!/usr/bin/env python3
"""Bytes of model state per parameter on one rank, for ZeRO stages 0-3 (bench/README.md,
"Memory per parameter").

  bench/memory_per_parameter.py [--mtc build/bin/mtc] [--model examples/gpt2-small.mtl]
                                [--dp 8] [--bf16 | --fp16] [--work /tmp/mtc-memory]

Compiles the model without kernels (`--kernels=none`: the plan's memory prediction is the
compiler's, which the runtime's measured peak equals exactly in the tests) once per stage:
stage 0 on one rank's tables, stages 1-3 with `--dp N --zero-stage S`, and prints per
parameter of the model: the parameters and the optimizer state (each held once: the
compiled optimizer step updates them in place), the gradients, ZeRO-2's shards and staging, and
their sum. The scratch gradient buffer a rank keeps when it runs several micro-batches
(another gradient-sized buffer; under ZeRO-2 only of the all-reduced gradients) is not in
the sum. With --bf16 (or --fp16, the same bytes) the plans are compiled in that mixed
precision: the model state is the
same f32 masters, gradients and optimizer state (mtc keeps no bf16 copy of the parameters:
each layer casts its weights where it reads them), and the last column, the saved
activations of the whole model per rank (the plan's `saved_activations`, one micro-batch),
halves.
"""
import argparse
import json
import os
import shutil
import subprocess


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mtc", default="build/bin/mtc")
    parser.add_argument("--model", default="examples/gpt2-small.mtl")
    parser.add_argument("--dp", type=int, default=8)
    precision = parser.add_mutually_exclusive_group()
    precision.add_argument("--bf16", action="store_true")
    precision.add_argument("--fp16", action="store_true")
    parser.add_argument("--work", default="/tmp/mtc-memory")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rows = []
    for stage in range(4):
        plan = os.path.join(args.work, f"zero{stage}.plan")
        shutil.rmtree(plan, ignore_errors=True)
        flags = [] if stage == 0 else ["--dp", str(args.dp), "--zero-stage", str(stage)]
        if args.bf16 or args.fp16:
            flags.append("--bf16" if args.bf16 else "--fp16")
        subprocess.run([args.mtc, "compile", args.model, "--kernels=none", "-o", plan] + flags,
                       check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(plan, "plan.json")) as f:
            predictions = json.load(f)["predictions"]
        n = predictions["parameters"]
        m = predictions["memory_bytes"]
        shards = m.get("gradient_shards", 0) + m.get("gradient_staging", 0)
        state = m["parameters"] + m["optimizer_state"] + m["gradients"] + shards
        rows.append((stage, m["parameters"] / n, m["optimizer_state"] / n,
                     m["gradients"] / n, shards / n, state / n, m["saved_activations"] / 2**20))
    precision = "bf16" if args.bf16 else "fp16" if args.fp16 else "fp32"
    print(f"{args.model}: {n:,} parameters, {precision}, dp {args.dp} for stages 1-3 "
          "(bytes per parameter)")
    print("| ZeRO stage | parameters | optimizer state | gradients | ZeRO-2 shards + staging | total | saved activations, one micro-batch (MiB) |")
    print("|---|---|---|---|---|---|---|")
    for stage, p, o, g, s, t, a in rows:
        print(f"| {stage} | {p:.2f} | {o:.2f} | {g:.2f} | {s:.2f} | {t:.2f} | {a:.1f} |")


if __name__ == "__main__":
    main()
