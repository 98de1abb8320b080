#!/usr/bin/env python3
"""Checks the loss scaling an fp16 run's JSONL metrics (`mtrun --metrics FILE`) record.

  check-loss-scale.py RUN.jsonl [--initial S] [--window N] [--hysteresis H] [--minimum M]
                                [--fixed S] [--same-as OTHER.jsonl [--from K]]

Every step record has `loss_scale` (the scale its backward started from), `skipped` (whether
a gradient overflowed, so that the optimizer step was not taken) and `skipped_steps` (the
run's count so far); a step is skipped exactly when its gradient norm is not finite (null in
JSON). Replaying Megatron's DynamicGradScaler from the options (mtrun's flags, with its
defaults) over the recorded overflows must give every recorded scale and count: the scale
halves once `hysteresis` overflows have been seen since the last growth, never below the
minimum, and doubles after `window` steps in a row without one. --fixed: the scale never
changes, overflows are still skipped. --same-as: OTHER (a parallel run, or a resumed one from
step K with --from) has the same steps with the same scales and skips.

Prints `same loss scales: M steps` (with --same-as: the steps compared), then RUN's
`loss scale: N steps, K skipped, first S0, last S1, lowered L times, raised R times`.
"""
import argparse
import json
import sys


def steps_of(path):
    with open(path) as f:
        return [r for r in map(json.loads, f) if "validation_loss" not in r]


def fail(message):
    print("check-loss-scale.py: " + message, file=sys.stderr)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("--initial", type=float, default=2.0**32)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--hysteresis", type=int, default=2)
    parser.add_argument("--minimum", type=float, default=1.0)
    parser.add_argument("--fixed", type=float)
    parser.add_argument("--same-as")
    parser.add_argument("--from", dest="first", type=int, default=1)
    args = parser.parse_args()

    records = steps_of(args.run)
    if not records:
        fail(f"{args.run} has no step records")
    for r in records:
        for field in ("loss_scale", "skipped", "skipped_steps"):
            if field not in r:
                fail(f"step {r['step']} has no '{field}'")
        if r["skipped"] != (r["grad_norm"] is None):
            fail(f"step {r['step']}: skipped is {r['skipped']} but the gradient norm is "
                 f"{r['grad_norm']}")

    if args.same_as:
        others = {r["step"]: r for r in steps_of(args.same_as)}
        compared = 0
        for r in records:
            if r["step"] < args.first:
                continue
            compared += 1
            o = others.get(r["step"])
            if o is None:
                fail(f"{args.same_as} has no step {r['step']}")
            for field in ("loss_scale", "skipped", "skipped_steps"):
                if o.get(field) != r[field]:
                    fail(f"step {r['step']}: {field} {r[field]} here, {o.get(field)} in "
                         f"{args.same_as}")
        print(f"same loss scales: {compared} steps")
    elif args.first != 1:
        fail("--from goes with --same-as")
    else:
        scale, growth, hysteresis, skipped = args.initial, 0, args.hysteresis, 0
        if args.fixed is not None:
            scale = args.fixed
        for r in records:
            if r["loss_scale"] != scale:
                fail(f"step {r['step']} ran with loss scale {r['loss_scale']}, Megatron's rule "
                     f"gives {scale}")
            overflow = r["skipped"]
            skipped += overflow
            if r["skipped_steps"] != skipped:
                fail(f"step {r['step']}: {r['skipped_steps']} skipped steps recorded, "
                     f"{skipped} counted")
            if args.fixed is not None:
                continue
            if overflow:
                growth = 0
                hysteresis -= 1
                if hysteresis <= 0:
                    scale = max(scale / 2, args.minimum)
            else:
                growth += 1
                if growth == args.window:
                    growth, hysteresis = 0, args.hysteresis
                    scale *= 2

    scales = [r["loss_scale"] for r in records]
    lowered = sum(b < a for a, b in zip(scales, scales[1:]))
    raised = sum(b > a for a, b in zip(scales, scales[1:]))
    print(f"loss scale: {len(records)} steps, {records[-1]['skipped_steps']} skipped, "
          f"first {scales[0]:g}, last {scales[-1]:g}, lowered {lowered} times, "
          f"raised {raised} times")


if __name__ == "__main__":
    main()
