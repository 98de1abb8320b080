#!/usr/bin/env python3
"""The cost model against Megatron-LM's published GPT throughput (bench/README.md,
"The cost model against Megatron-LM").

Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM" (SC'21, arXiv:2104.04473), Table 1: GPT models of 1.7B to 1T parameters
(vocabulary 51200, sequence 2048) on 32 to 3072 A100s of NVIDIA's Selene, with their tensor
and pipeline degrees, batch sizes and achieved TFLOP/s per GPU.

For each row: the model (examples/gpt3-175b.mtl with --dim hidden/heads/layers, the row's
global batch) compiled for the published layout with --target=none, its step predicted by
`mtc simulate --cluster dgx-a100-80gb --dtype bf16`, converted to TFLOP/s per GPU by the
paper's own FLOP count (which counts the recomputed forward: 96 B s l h^2 (1 + s / 6h +
V / 16 l h)); then `mtc explore` on the same GPUs and batch, and whether the search predicts a
faster layout.

    bench/megatron.py [--build build] [--rows 1.7B,18.4B] [--no-search] [--out megatron.json]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name, heads, hidden, layers, tp, pp, GPUs, batch, published TFLOP/s per GPU (Table 1).
ROWS = [
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137),
    ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138),
    ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142),
    ("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135),
    ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138),
    ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140),
    ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148),
    ("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155),
    ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163),
    ("1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 163),
]
SEQ, VOCAB = 2048, 51200
A100_BF16 = 312e12


def paper_flops(batch, layers, hidden):
    """Narayanan et al.'s FLOPs per iteration (with activation recomputation)."""
    return 96 * batch * SEQ * layers * hidden ** 2 * (
        1 + SEQ / (6 * hidden) + VOCAB / (16 * layers * hidden))


def model_file(tmp, name, batch_per_rank):
    """examples/gpt3-175b.mtl with the global batch one data-parallel rank's share (so the
    plan's schedules are those of its micro-batch count) and `parallel auto` left out."""
    text = open(os.path.join(ROOT, "examples", "gpt3-175b.mtl")).read()
    text = re.sub(r"global_batch \d+", f"global_batch {batch_per_rank}", text)
    text = text.replace("parallel auto\n", "")
    path = os.path.join(tmp, f"gpt-{name}.mtl")
    open(path, "w").write(text)
    return path


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    ap.add_argument("--no-search", action="store_true", help="skip mtc explore")
    ap.add_argument("--recompute", default="full",
                    help="the published runs' recomputation (the paper recomputes activations)")
    ap.add_argument("--out", default="", help="also write the results as JSON")
    args = ap.parse_args()
    mtc = os.path.join(args.build, "bin", "mtc")
    wanted = set(filter(None, args.rows.split(",")))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, heads, hidden, layers, tp, pp, gpus, batch, published in ROWS:
            if wanted and name not in wanted:
                continue
            dp = gpus // (tp * pp)
            dims = ["--dim", f"hidden={hidden}", "--dim", f"heads={heads}",
                    "--dim", f"layers={layers}"]
            mtl = model_file(tmp, name, batch // dp)
            plan = os.path.join(tmp, f"gpt-{name}.plan")
            start = time.time()
            run([mtc, "compile", mtl, "--target=none", "-o", plan, "--tp", str(tp),
                 "--pp", str(pp), "--recompute", args.recompute] + dims)
            compiled = time.time() - start
            out = run([mtc, "simulate", plan, "--cluster", "dgx-a100-80gb",
                       "--nodes", str(gpus // 8), "--global-batch", str(batch),
                       "--dtype", "bf16"])
            step = float(re.search(r"step:\s+([0-9.]+) (s|ms)", out).group(1))
            if re.search(r"step:\s+[0-9.]+ ms", out):
                step /= 1e3
            predicted = paper_flops(batch, layers, hidden) / step / gpus / 1e12
            # The same layout composed by the search's model (it also counts the pipeline's
            # messages and the data-parallel reduction, which a --target=none pipeline plan
            # does not give mtc simulate: docs/cost-model.md, "Plans without kernels").
            full = model_file(tmp, name + "-full", batch)
            report = run([mtc, "explore", full, "--cluster", "dgx-a100-80gb", "--gpus",
                          str(gpus), "--evaluate",
                          f"tp={tp},pp={pp},dp={dp},mbs=1,recompute={args.recompute}"] + dims)
            composed = float(re.search(r"step:\s+(\S+) s composed", report).group(1))
            row = {"model": name, "gpus": gpus, "tp": tp, "pp": pp, "dp": dp, "batch": batch,
                   "published_tflops": published, "predicted_tflops": round(predicted, 1),
                   "error": round(predicted / published - 1, 3),
                   "predicted_step_s": step, "compile_s": round(compiled, 1),
                   "composed_tflops": round(paper_flops(batch, layers, hidden) / composed / gpus / 1e12, 1),
                   "composed_step_s": round(composed, 3)}
            row["composed_error"] = round(row["composed_tflops"] / published - 1, 3)
            if not args.no_search:
                start = time.time()
                report = run([mtc, "explore", full, "--cluster", "dgx-a100-80gb",
                              "--gpus", str(gpus), "--rows", "3"] + dims)
                row["search_s"] = round(time.time() - start, 1)
                chosen = re.search(r"chosen:\s+(.*): step ([0-9.]+) (s|ms)", report)
                best = float(chosen.group(2)) / (1e3 if chosen.group(3) == "ms" else 1)
                row["search_layout"] = chosen.group(1)
                row["search_step_s"] = best
                row["search_tflops"] = round(paper_flops(batch, layers, hidden) / best / gpus / 1e12, 1)
                row["search_faster"] = round(composed / best - 1, 3)  # both composed
                limit = re.search(r"bound by (.*)", report)
                row["search_bound_by"] = limit.group(1) if limit else ""
            results.append(row)
            print(json.dumps(row), flush=True)
    print()
    print("| model | GPUs | tp | pp | dp | batch | published TFLOP/s | simulated (plan) | error "
          "| composed | error | searched layout | its TFLOP/s | step faster by |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        search = (f"{r['search_layout']} | {r['search_tflops']} | {100 * r['search_faster']:+.0f}%"
                  if "search_layout" in r else "- | - | -")
        print(f"| {r['model']} | {r['gpus']} | {r['tp']} | {r['pp']} | {r['dp']} | {r['batch']} "
              f"| {r['published_tflops']} | {r['predicted_tflops']} | {100 * r['error']:+.0f}% "
              f"| {r['composed_tflops']} | {100 * r['composed_error']:+.0f}% | {search} |")
    if args.out:
        json.dump(results, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
