#!/usr/bin/env python3
"""Prints the loss curve of an `mtrun --metrics FILE` run as a text chart, and writes it as
an SVG when given a second argument:  plot-loss.py metrics.jsonl [curve.svg]"""
import json
import sys


def main():
    records = [json.loads(line) for line in open(sys.argv[1])]
    steps = [r["step"] for r in records]
    losses = [r["loss"] for r in records]
    lo, hi = min(losses), max(losses)
    rows, cols = 12, min(60, len(losses))
    # One column per bucket of steps (its mean loss).
    buckets = [losses[i * len(losses) // cols:(i + 1) * len(losses) // cols] for i in range(cols)]
    means = [sum(b) / len(b) for b in buckets]
    for row in range(rows):
        level = hi - (hi - lo) * row / (rows - 1)
        label = f"{level:7.3f} |" if row % 3 == 0 or row == rows - 1 else "        |"
        line = "".join("*" if abs(m - level) <= (hi - lo) / (2 * (rows - 1)) else " " for m in means)
        print(label + line)
    print("        +" + "-" * cols)
    print(f"         step {steps[0]}{' ' * max(1, cols - 12 - len(str(steps[-1])))}step {steps[-1]}")
    if len(sys.argv) > 2:
        width, height, pad = 480, 240, 40
        def xy(i, loss):
            x = pad + (width - 2 * pad) * (steps[i] - steps[0]) / max(1, steps[-1] - steps[0])
            y = pad + (height - 2 * pad) * (hi - loss) / max(1e-12, hi - lo)
            return f"{x:.1f},{y:.1f}"
        points = " ".join(xy(i, l) for i, l in enumerate(losses))
        with open(sys.argv[2], "w") as f:
            f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
                    f'<rect width="100%" height="100%" fill="white"/>'
                    f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{points}"/>'
                    f'<text x="{pad}" y="{pad - 10}" font-size="12">loss {hi:.3f}</text>'
                    f'<text x="{pad}" y="{height - 10}" font-size="12">loss {lo:.3f}, steps '
                    f'{steps[0]}-{steps[-1]}</text></svg>\n')


if __name__ == "__main__":
    main()
