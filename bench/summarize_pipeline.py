#!/usr/bin/env python3
"""The table of bench/pipeline.sh, from its output directory (bench/README.md, "Pipeline
schedules"): writes DIR/summary.json and DIR/summary.md and prints the table.

Per configuration (a directory of DIR named in DIR/configs) it reads the plan (model.plan/
plan.json: the schedule's theoretical bubble and predicted activations per stage), rank 0's
per-step metrics (metrics.jsonl), mtrun's log (its measured bubble and memory per stage)
and the timeline (trace.json), from which it measures the bubble again over the steps after
the first, with mtrun's definition (runtime/exec/ScheduleExecutor.h)."""

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys

MIB = 1024 * 1024

BATCH_RE = re.compile(r"^batch: (\d+) sequences of (\d+) tokens \((\d+) micro-batch(?:es)? of (\d+)\)")
BUBBLE_RE = re.compile(r"stage (\d+) ([0-9.]+) \(schedule ([0-9.]+)\)")
MEMORY_RE = re.compile(
    r"stage (\d+) peak ([0-9.]+) MiB(?: \(predicted ([0-9.]+) MiB\))?, "
    r"activations ([0-9.]+) MiB(?: \(predicted ([0-9.]+) MiB\))?")


def parse_log(path):
    """mtrun's batch line and, for a pipeline run, its bubble and memory lines."""
    found = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        if m := BATCH_RE.match(line):
            found["sequences"], found["seq"], found["micro_batches"], found["micro_batch"] = map(
                int, m.groups())
        elif line.startswith("pipeline bubble:"):
            found["bubble_all_steps"] = [float(m.group(2)) for m in BUBBLE_RE.finditer(line)]
        elif line.startswith("pipeline memory:"):
            found["memory"] = [{
                "peak_mib": float(m.group(2)),
                "peak_predicted_mib": float(m.group(3)) if m.group(3) else None,
                "activations_mib": float(m.group(4)),
            } for m in MEMORY_RE.finditer(line)]
    return found


def trace_bubbles(path, stages):
    """Each stage's bubble, 1 - busy / span, over the steps after the first and over all steps,
    and its busy milliseconds per step after the first.

    As mtrun measures it: a step's span is the longest of the stages' compute spans (from the
    stage's step start to the end of its last compute task); busy is the time in compute tasks.
    The trace's `step` span starts just before the executor's clock does (microseconds)."""
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    starts = {}  # (rank, step) -> the step span's start
    for e in events:
        if e.get("cat") == "step":
            starts[(e["pid"], e["args"]["step"])] = (e["ts"], e["ts"] + e["dur"])
    busy, span_end = {}, {}
    for e in events:
        if e.get("cat") != "compute":
            continue
        for (rank, step), (begin, end) in starts.items():
            if rank == e["pid"] and begin <= e["ts"] <= end:
                busy[(rank, step)] = busy.get((rank, step), 0.0) + e["dur"]
                span_end[(rank, step)] = max(span_end.get((rank, step), 0.0), e["ts"] + e["dur"])
                break
    steps = sorted({step for _, step in starts})

    def busy_us(rank, counted):
        return sum(busy.get((rank, s), 0.0) for s in counted)

    def fractions(counted):
        spans = [max(span_end.get((r, s), starts[(r, s)][0]) - starts[(r, s)][0]
                     for r in range(stages)) for s in counted]
        total = sum(spans)
        return [max(0.0, 1.0 - busy_us(r, counted) / total) if total else 0.0
                for r in range(stages)]

    counted = steps[1:]
    busy_ms = [busy_us(r, counted) / 1e3 / len(counted) for r in range(stages)]
    return fractions(counted), fractions(steps), busy_ms


def summarize_config(directory, name):
    entry = {"name": name}
    failed = os.path.join(directory, "failed")
    if os.path.exists(failed):
        entry["failed"] = open(failed).read().strip()
        return entry
    plan = json.load(open(os.path.join(directory, "model.plan", "plan.json")))
    entry.update(parse_log(os.path.join(directory, "mtrun.log")))
    steps = [json.loads(line) for line in open(os.path.join(directory, "metrics.jsonl"))]
    counted = steps[1:]
    entry["steps"] = len(steps)
    entry["step_ms_median"] = statistics.median(s["step_ms"] for s in counted)
    entry["step_ms_mean"] = statistics.mean(s["step_ms"] for s in counted)
    entry["tokens_per_s_median"] = statistics.median(s["tokens_per_s"] for s in counted)
    entry["first_loss"], entry["last_loss"] = steps[0]["loss"], steps[-1]["loss"]
    entry["rank0_peak_mib"] = max(s["peak_bytes"] for s in steps) / MIB
    pipeline = plan.get("pipeline")
    if not pipeline:
        entry["pp"] = 1
        return entry
    stages = pipeline["stages"]
    entry.update(pp=stages, schedule=pipeline["schedule"],
                 virtual_stages=pipeline["virtual_stages"])
    m = entry.get("micro_batches")
    theory = next((s for s in pipeline["schedules"] if s["micro_batches"] == m), None)
    if theory is None:
        entry["failed"] = f"the plan has no {pipeline['schedule']} schedule for {m} micro-batches"
        return entry
    entry["bubble_theory"] = [s["bubble_fraction"] for s in theory["stages"]]
    entry["bubble_measured"], entry["bubble_trace_all_steps"], entry["busy_ms"] = trace_bubbles(
        os.path.join(directory, "trace.json"), stages)
    for stage, memory in zip(theory["stages"], entry.get("memory", [])):
        memory["activations_predicted_mib"] = stage["activation_bytes"] / MIB
    return entry


def stages(values, fmt):
    return " / ".join(fmt.format(v) for v in values)


def markdown(entries, reference):
    rows = [
        "| config | ms/step | tokens/s | x one rank | compute ms/step per stage | bubble per stage "
        "| theory | peak MiB per stage | predicted | activations MiB | predicted |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        if "failed" in e:
            rows.append(f"| {e['name']} | failed: {e['failed']} | | | | | | | | | |")
            continue
        speedup = f"{reference / e['step_ms_median']:.2f}" if reference else ""
        if e["pp"] == 1:
            rows.append(f"| {e['name']} | {e['step_ms_median']:.0f} | {e['tokens_per_s_median']:.0f} "
                        f"| {speedup} | | | | {e['rank0_peak_mib']:.1f} | | | |")
            continue
        memory = e.get("memory", [])
        rows.append(
            f"| {e['name']} | {e['step_ms_median']:.0f} | {e['tokens_per_s_median']:.0f} | {speedup} "
            f"| {stages(e['busy_ms'], '{:.0f}')} | {stages(e['bubble_measured'], '{:.3f}')} | {stages(e['bubble_theory'], '{:.3f}')} "
            f"| {stages([s['peak_mib'] for s in memory], '{:.1f}')} "
            f"| {stages([s['peak_predicted_mib'] or 0 for s in memory], '{:.1f}')} "
            f"| {stages([s['activations_mib'] for s in memory], '{:.1f}')} "
            f"| {stages([s['activations_predicted_mib'] for s in memory], '{:.1f}')} |")
    return "\n".join(rows) + "\n"


def machine():
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {"cpu": cpu, "cores": os.cpu_count(), "load_average": os.getloadavg(), "commit": commit}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="bench/pipeline.sh's output directory")
    parser.add_argument("--threads", type=int, default=1, help="the ranks' threads (its reference)")
    args = parser.parse_args()
    try:
        names = open(os.path.join(args.dir, "configs")).read().split()
    except OSError as err:
        sys.exit(f"summarize_pipeline.py: {err}")
    entries = []
    for name in names:
        try:
            entries.append(summarize_config(os.path.join(args.dir, name), name))
        except (OSError, ValueError, KeyError, IndexError, statistics.StatisticsError) as err:
            entries.append({"name": name, "failed": f"unreadable output ({type(err).__name__}: {err})"})
    reference = next((e["step_ms_median"] for e in entries
                      if e["name"] == f"one-t{args.threads}" and "failed" not in e), None)
    table = markdown(entries, reference)
    with open(os.path.join(args.dir, "summary.json"), "w") as f:
        json.dump({"machine": machine(), "threads_per_rank": args.threads, "configs": entries}, f,
                  indent=1)
    with open(os.path.join(args.dir, "summary.md"), "w") as f:
        f.write(table)
    print(table, end="")
    print(f"(summary.json and summary.md in {args.dir})")


if __name__ == "__main__":
    main()
