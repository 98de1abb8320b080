#!/usr/bin/env python3
"""Predicted against measured step time on this host's CPU ranks (bench/README.md,
"The cost model against mtrun").

For each layout: compile the model (`mtc compile --kernels=x86`), predict one step with
`mtc simulate PLAN --cluster CLUSTER --gpus-per-node W` (every rank on this one node), train
it with `mtrun PLAN --nodes W --steps N --metrics F`, and print the median measured step
time (steps after the first) beside the prediction and the error.

    bench/simulate.py [--cluster host | --calibrate] [--steps 8] [--layouts gpt,llama,mixtral]
                      [--build build] [--out DIR] [--repeat R] [--threads T]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name, model, compile flags, ranks[, sequences per step]: by default 32 (16 for
# mixtral-tiny), enough micro-batches of 8 for 4 data-parallel ranks; a pipeline keeps its
# plan's 16, for which the plan holds schedules.
LAYOUTS = {
    "gpt": [
        ("gpt one", "gpt-tiny", [], 1),
        ("gpt dp2", "gpt-tiny", [], 2),
        ("gpt tp2", "gpt-tiny", ["--tp", "2"], 2),
        ("gpt tp2+sp", "gpt-tiny", ["--tp", "2", "--sp"], 2),
        ("gpt pp2", "gpt-tiny", ["--pp", "2"], 2, 16),
        ("gpt dp4", "gpt-tiny", [], 4),
        ("gpt tp4", "gpt-tiny", ["--tp", "4"], 4),
        ("gpt tp2xdp2", "gpt-tiny", ["--tp", "2"], 4),
        ("gpt pp2xtp2", "gpt-tiny", ["--pp", "2", "--tp", "2"], 4, 16),
    ],
    "llama": [
        ("llama one", "llama-gqa-tiny", [], 1),
        ("llama tp2", "llama-gqa-tiny", ["--tp", "2"], 2),
        ("llama pp2", "llama-gqa-tiny", ["--pp", "2"], 2, 16),
        ("llama tp2xdp2+sp", "llama-gqa-tiny", ["--tp", "2", "--sp"], 4),
    ],
    "mixtral": [
        ("mixtral one", "mixtral-tiny", [], 1),
        ("mixtral ep2", "mixtral-tiny", ["--ep", "2"], 2),
        ("mixtral tp2+sp", "mixtral-tiny", ["--tp", "2", "--sp"], 2),
        ("mixtral ep4", "mixtral-tiny", ["--ep", "4"], 4),
    ],
}


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"bench/simulate.py: {' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cluster", default="host",
                        help="a preset or cluster file (default: the host preset)")
    parser.add_argument("--calibrate", action="store_true",
                        help="measure this host first with mtc calibrate and use that")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--layouts", default="gpt,llama,mixtral")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default=None)
    parser.add_argument("--repeat", type=int, default=1,
                        help="train every layout R times in a row and keep the run with the "
                             "lowest median step: the least disturbed by other processes")
    parser.add_argument("--threads", type=int, default=0,
                        help="threads per rank (default 1: the tiny models' kernels gain "
                             "nothing from a second thread)")
    args = parser.parse_args()
    mtc = os.path.join(args.build, "bin", "mtc")
    mtrun = os.path.join(args.build, "bin", "mtrun")
    for tool in (mtc, mtrun):
        if not os.access(tool, os.X_OK):
            sys.exit(f"bench/simulate.py: {tool} is missing: build the project first")
    out = args.out or tempfile.mkdtemp(prefix="mtc-simulate-")
    os.makedirs(out, exist_ok=True)
    cluster = args.cluster
    if args.calibrate:
        cluster = os.path.join(out, "host.json")
        subprocess.run([mtc, "calibrate", "--output", cluster], check=True,
                       stderr=open(os.path.join(out, "calibrate.log"), "w"))
        print(f"calibrated this host: {cluster} (log: {out}/calibrate.log)")
    with open("/proc/loadavg") as f:
        print(f"load average before the runs: {' '.join(f.read().split()[:3])} "
              f"on {os.cpu_count()} cores")
    rows = []
    compiled = set()
    print(f"{'layout':<20} {'ranks':>5} {'predicted ms':>12} {'measured ms':>11} {'error':>7}"
          f" {'fastest ms':>10} {'error':>7} {'load':>5}")
    for group in args.layouts.split(","):
        for name, model, flags, ranks, *sequences in LAYOUTS[group]:
            batch = sequences[0] if sequences else {"mixtral-tiny": 16}.get(model, 32)
            plan = os.path.join(out, model + "".join(flags).replace("-", "_") + ".plan")
            # A plan already in --out is reused (delete it to recompile).
            if plan not in compiled and not os.path.exists(os.path.join(plan, "MANIFEST")):
                run([mtc, "compile", os.path.join(ROOT, "examples", model + ".mtl"), "-o", plan,
                     "--kernels=x86", *flags])
                compiled.add(plan)
            report = run([mtc, "simulate", plan, "--cluster", cluster, "--gpus-per-node",
                          str(ranks), "--global-batch", str(batch)])
            value, unit = re.search(r"^step: +([0-9.]+) (s|ms|us)", report, re.M).groups()
            predicted = float(value) * {"s": 1e3, "ms": 1, "us": 1e-3}[unit]
            measured, fastest, load = None, None, None
            for attempt in range(args.repeat):
                metrics = os.path.join(out, f"{name.replace(' ', '_')}.{attempt}.jsonl")
                if os.path.exists(metrics):
                    os.remove(metrics)
                # Every rank on this host, on one thread by default.
                threads = args.threads or 1
                run([mtrun, plan, "--nodes", str(ranks), "--steps", str(args.steps),
                     "--global-batch", str(batch),
                     "--threads-per-rank", str(threads), "--metrics", metrics],
                    env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
                # What else ran meanwhile: the 1-minute load average (this run's ranks
                # included).
                with open("/proc/loadavg") as f:
                    run_load = float(f.read().split()[0])
                steps = [json.loads(line) for line in open(metrics)][1:]
                median = statistics.median(s["step_ms"] for s in steps)
                if measured is None or median < measured:
                    # The fastest step: the least disturbed by other processes.
                    measured, fastest = median, min(s["step_ms"] for s in steps)
                    load = run_load
            error = (predicted - measured) / measured
            rows.append({"layout": name, "ranks": ranks, "predicted_ms": predicted,
                         "measured_ms": measured, "fastest_ms": fastest, "error": error,
                         "error_fastest": (predicted - fastest) / fastest, "load": load})
            print(f"{name:<20} {ranks:>5} {predicted:>12.2f} {measured:>11.2f} {100 * error:>6.1f}%"
                  f" {fastest:>10.2f} {100 * rows[-1]['error_fastest']:>6.1f}% {load:>5.2f}",
                  flush=True)
    for key, what in (("error", "median"), ("error_fastest", "fastest")):
        errors = [abs(r[key]) for r in rows]
        print(f"against the {what} step: mean |error| {100 * statistics.mean(errors):.1f}%, "
              f"max {100 * max(errors):.1f}%, within 20%: {sum(e <= 0.2 for e in errors)} of "
              f"{len(errors)}")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(rows, f, indent=2)
    with open("/proc/loadavg") as f:
        print(f"load average after the runs: {' '.join(f.read().split()[:3])}")
    print(f"plans, metrics and summary.json in {out}")


if __name__ == "__main__":
    main()
