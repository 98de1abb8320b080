#!/usr/bin/env python3
"""Checks a pipeline plan's predictions against its own tables.

  check-pipeline-predictions.py PLAN_DIR

- `predictions.communication_bytes` has a figure for every chunk and stage function of
  `kernels.x86_64.functions`, and no other pipeline entry;
- every stage of every schedule has `peak_bytes` = 3 x the bytes of its parameters (once,
  updated in place, and the gradient and scratch gradient buffers) + those of its optimizer
  state (the `param` and `state` inputs of `stage<s>.optimizer_step`) +
  `buffer_bytes` + the stage's arena (the largest `arena.bytes` of its chunks' and its
  `stage<s>.*` functions), and `buffer_bytes` at least `activation_bytes` (the messages come
  on top of the residuals and stash);
- the kernels have no whole-model step (`forward`, `forward_backward`, `optimizer_step`,
  `logits`): no pipeline rank calls them.
Prints one line per schedule with each stage's figures.
"""
import json
import math
import os
import sys

DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i32": 4, "i64": 8, "i8": 1, "i1": 1}


def words_bytes(buffer):
    elements = math.prod(d["size"] for d in buffer["dims"])
    return -(-elements * DTYPE_BYTES[buffer["dtype"]] // 4) * 4


def main():
    plan = json.load(open(os.path.join(sys.argv[1], "plan.json")))
    functions = plan["kernels"]["x86_64"]["functions"]
    pipeline_functions = {n for n in functions if n.startswith(("chunk", "stage"))}
    predicted = set(plan["predictions"]["communication_bytes"]) - {"forward_backward",
                                                                     "optimizer_step"}
    if predicted != pipeline_functions:
        sys.exit(f"communication_bytes: {sorted(predicted ^ pipeline_functions)} differ")
    whole = sorted({"forward", "forward_backward", "optimizer_step", "logits"} & set(functions))
    if whole:
        sys.exit(f"kernels.x86_64.functions: a pipeline plan compiled {whole}")
    chunk_stages = plan["pipeline"]["chunk_stages"]
    arenas = {}
    for f in functions.values():
        stage = chunk_stages[f["chunk"]] if "chunk" in f else f.get("stage")
        arenas[stage] = max(arenas.get(stage, 0), f["arena"]["bytes"])
    for schedule in plan["pipeline"]["schedules"]:
        line = []
        for s, stage in enumerate(schedule["stages"]):
            inputs = functions[f"stage{s}.optimizer_step"]["inputs"]
            params = sum(words_bytes(b) for b in inputs if b["kind"] == "param")
            states = sum(words_bytes(b) for b in inputs if b["kind"] == "state")
            expected = 3 * params + states + stage["buffer_bytes"] + arenas[s]
            if stage["peak_bytes"] != expected:
                sys.exit(f"m={schedule['micro_batches']} stage {s}: peak_bytes "
                         f"{stage['peak_bytes']}, expected {expected}")
            if stage["buffer_bytes"] < stage["activation_bytes"]:
                sys.exit(f"m={schedule['micro_batches']} stage {s}: buffer_bytes below "
                         "activation_bytes")
            line.append(f"stage {s} peak {stage['peak_bytes']} buffers {stage['buffer_bytes']}")
        print(f"m={schedule['micro_batches']}: " + "; ".join(line))
    print("consistent")


if __name__ == "__main__":
    main()
