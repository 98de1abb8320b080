#!/usr/bin/env python3
"""Prints the table of a bench/run.sh run from its output directory (and writes summary.json).

    python3 bench/summarize.py OUT_DIR MODEL...

For each MODEL, OUT_DIR/MODEL/ holds mtrun.jsonl (mtrun --metrics: one JSON object per step
with at least "step", "loss", "tokens_per_s", "step_ms"), torch.json (torch_gpt.py's
result, eager) and, when it ran, torch-compile.json (torch_gpt.py --compile). mtc's figure is the median tokens_per_s over the steps after the first; torch's is
computed the same way by torch_gpt.py (--warmup 1). Standard library only.
"""

import json
import os
import statistics
import sys


def read_mtrun(path):
    """(tokens/s median, step_ms mean, first loss, steps) over the records after the first."""
    if not os.path.exists(path):
        return None
    records = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"summarize: {path}:{n}: not JSON ({e})", file=sys.stderr)
                continue
            if isinstance(rec, dict) and "step" in rec and rec.get("tokens_per_s") is not None:
                records.append(rec)
    if not records:
        return None
    records.sort(key=lambda r: r["step"])
    timed = records[1:] or records
    step_ms = [r["step_ms"] for r in timed if r.get("step_ms") is not None]
    return {
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in timed),
        "step_ms": statistics.fmean(step_ms) if step_ms else None,
        "initial_loss": records[0].get("loss"),
        "final_loss": records[-1].get("loss"),
        "steps": len(records),
    }


def read_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, models = sys.argv[1], sys.argv[2:]
    rows, summary = [], {}
    for model in models:
        d = os.path.join(out, model)
        mtc = read_mtrun(os.path.join(d, "mtrun.jsonl"))
        torch = read_json(os.path.join(d, "torch.json"))
        compiled = read_json(os.path.join(d, "torch-compile.json"))
        ratio = (mtc["tokens_per_s"] / torch["tokens_per_s"]) if mtc and torch else None
        ratio_compiled = ((mtc["tokens_per_s"] / compiled["tokens_per_s"])
                          if mtc and compiled else None)
        summary[model] = {"mtc": mtc, "torch": torch, "torch_compile": compiled,
                          "ratio_mtc_over_torch": ratio,
                          "ratio_mtc_over_torch_compile": ratio_compiled}
        shape = (f"{torch['global_batch']}x{torch['seq']}" if torch else "-")
        rows.append([model, shape,
                     fmt(mtc and mtc["tokens_per_s"], ",.0f"),
                     fmt(torch and torch["tokens_per_s"], ",.0f"),
                     fmt(ratio, ".2f"),
                     fmt(compiled and compiled["tokens_per_s"], ",.0f"),
                     fmt(ratio_compiled, ".2f"),
                     fmt(mtc and mtc["step_ms"], ",.1f"),
                     fmt(torch and torch["step_ms"], ",.1f"),
                     f"{fmt(mtc and mtc['initial_loss'], '.3f')} / "
                     f"{fmt(torch and torch['initial_loss'], '.3f')}"])
    header = ["model", "tokens/step", "mtc tokens/s", "torch tokens/s", "mtc/torch",
              "torch.compile tokens/s", "mtc/compile",
              "mtc step ms", "torch step ms", "loss@0 mtc / torch"]
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
