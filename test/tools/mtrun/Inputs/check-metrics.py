#!/usr/bin/env python3
"""Checks the JSONL metrics `mtrun --metrics FILE` wrote.

  check-metrics.py RUN.jsonl [--steps N] [--falls-by D] [--same-losses OTHER.jsonl]
                            [--close-losses OTHER.jsonl --rtol R] [--from S]
                            [--validation-steps S,S,...] [--validation-falls]
                            [--close-validation OTHER.jsonl --atol A | --validation-rtol R]
                            [--test-step S | --no-test]

--steps N: RUN has exactly the records of steps 1..N, in order, each with the fields mtrun
documents. --falls-by D: the last loss is below the first by more than D. --same-losses:
OTHER has the same steps with bit-identical losses, learning rates and gradient norms
(a resumed run against a straight one). --close-losses: OTHER has the same steps with losses
within relative tolerance R (a parallel run against a single-rank one). --from S: compare
only RUN's steps from S on (OTHER resumed at step S).

The evaluation records (`--eval-interval`: step, validation_loss, validation_ppl and, for the
one at the end of training, end_of_training) are apart from the step records: every option
above reads the step records only. --validation-steps: RUN's evaluation records are at these
steps in this order, the last at the end of training, each with a finite loss and its
perplexity exp(loss). --validation-falls: the last validation loss is below the first.
--close-validation: OTHER has the same evaluations with validation losses within absolute
tolerance A (0: bit-identical), or with --validation-rtol within relative tolerance R (a
parallel run's against a single-rank one's), and the same test evaluations (test_loss) within
the same tolerance. --from S applies to the evaluations too.

The test split's evaluation (step, test_loss, test_ppl, end_of_training) is a record of its
own too. --test-step S: RUN has exactly one, at step S, the last record of the file, with a
finite loss and its perplexity. --no-test: RUN has none.
"""
import argparse
import json
import math
import sys

FIELDS = ("step", "loss", "lr", "grad_norm", "tokens", "tokens_per_s", "step_ms", "peak_bytes",
          "peak_rss_bytes", "comm_bytes_sent")


def read_all(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def read_validation(path, key="validation_loss"):
    return [r for r in read_all(path) if key in r]


def read(path):
    records = [r for r in read_all(path) if "validation_loss" not in r and "test_loss" not in r]
    for r in records:
        missing = [k for k in FIELDS if k not in r]
        if missing:
            sys.exit(f"{path}: step {r.get('step')}: missing {missing}")
        if not math.isfinite(r["loss"]):
            sys.exit(f"{path}: step {r['step']}: loss {r['loss']}")
    return records


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--falls-by", type=float)
    parser.add_argument("--same-losses")
    parser.add_argument("--close-losses")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--from", dest="first", type=int, default=1)
    parser.add_argument("--validation-steps")
    parser.add_argument("--validation-falls", action="store_true")
    parser.add_argument("--close-validation")
    parser.add_argument("--atol", type=float, default=1e-6)
    parser.add_argument("--validation-rtol", type=float)
    parser.add_argument("--test-step", type=int)
    parser.add_argument("--no-test", action="store_true")
    args = parser.parse_args()
    check_validation(args)
    check_test(args)
    run = [r for r in read(args.run) if r["step"] >= args.first]
    if args.steps is not None:
        steps = [r["step"] for r in run]
        if steps != list(range(1, args.steps + 1)):
            sys.exit(f"{args.run}: steps {steps}, expected 1..{args.steps}")
    if args.falls_by is not None:
        first, last = run[0]["loss"], run[-1]["loss"]
        if not last < first - args.falls_by:
            sys.exit(f"{args.run}: loss {first} -> {last} did not fall by more than {args.falls_by}")
        print(f"loss falls: {first:.4f} -> {last:.4f}")
    if args.same_losses:
        other = read(args.same_losses)
        if len(other) != len(run):
            sys.exit(f"{len(run)} records against {len(other)}")
        for a, b in zip(run, other):
            for key in ("step", "loss", "lr", "grad_norm"):
                if a[key] != b[key]:
                    sys.exit(f"step {a['step']}: {key} {a[key]!r} != {b[key]!r}")
        print(f"same losses: {len(run)} steps")
    if args.close_losses:
        other = read(args.close_losses)
        if [r["step"] for r in other] != [r["step"] for r in run]:
            sys.exit(f"steps differ: {[r['step'] for r in run]} against {[r['step'] for r in other]}")
        worst = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(run, other))
        if worst > args.rtol:
            sys.exit(f"losses differ by {worst:.3g} relative (tolerance {args.rtol})")
        print(f"close losses: {len(run)} steps within {args.rtol}")


def check_validation(args):
    if not (args.validation_steps or args.validation_falls or args.close_validation):
        return
    evals = [r for r in read_validation(args.run) if r["step"] >= args.first]
    if args.validation_steps:
        expected = [int(s) for s in args.validation_steps.split(",")]
        steps = [r["step"] for r in evals]
        if steps != expected:
            sys.exit(f"{args.run}: evaluations at steps {steps}, expected {expected}")
        ends = [bool(r.get("end_of_training")) for r in evals]
        if ends != [False] * (len(evals) - 1) + [True]:
            sys.exit(f"{args.run}: end_of_training {ends}: expected on the last record only")
        for r in evals:
            loss, ppl = r["validation_loss"], r["validation_ppl"]
            if loss is None or not math.isfinite(loss):
                sys.exit(f"{args.run}: step {r['step']}: validation loss {loss}")
            if not math.isclose(ppl, math.exp(min(20.0, loss)), rel_tol=1e-12):
                sys.exit(f"{args.run}: step {r['step']}: perplexity {ppl} is not exp({loss})")
        print(f"evaluations at steps {steps}")
    if args.validation_falls:
        first, last = evals[0]["validation_loss"], evals[-1]["validation_loss"]
        if not last < first:
            sys.exit(f"{args.run}: validation loss {first} -> {last} did not fall")
        print(f"validation loss falls: {first:.4f} -> {last:.4f}")
    if args.close_validation:
        other = [r for r in read_validation(args.close_validation) if r["step"] >= args.first]
        if [r["step"] for r in other] != [r["step"] for r in evals]:
            sys.exit(f"evaluations at steps {[r['step'] for r in evals]} against "
                     f"{[r['step'] for r in other]}")
        if not evals:
            sys.exit(f"{args.run}: no evaluations to compare")
        if args.validation_rtol is not None:
            worst = max(abs(a["validation_loss"] - b["validation_loss"]) / abs(b["validation_loss"])
                        for a, b in zip(evals, other))
            if worst > args.validation_rtol:
                sys.exit(f"validation losses differ by {worst:.3g} relative (tolerance "
                         f"{args.validation_rtol})")
            print(f"close validation losses: {len(evals)} evaluations within "
                  f"{args.validation_rtol} relative (at most {worst:.3g})")
            return
        worst = max(abs(a["validation_loss"] - b["validation_loss"]) for a, b in zip(evals, other))
        if worst > args.atol:
            sys.exit(f"validation losses differ by {worst:.3g} (tolerance {args.atol})")
        print(f"close validation losses: {len(evals)} evaluations within {args.atol}")


def close_tests(args):
    """--close-validation's comparison of the test records."""
    tests = [r for r in read_validation(args.run, "test_loss") if r["step"] >= args.first]
    other = [r for r in read_validation(args.close_validation, "test_loss")
             if r["step"] >= args.first]
    if [r["step"] for r in other] != [r["step"] for r in tests]:
        sys.exit(f"test evaluations at steps {[r['step'] for r in tests]} against "
                 f"{[r['step'] for r in other]}")
    if not tests:
        return
    if args.validation_rtol is not None:
        worst = max(abs(a["test_loss"] - b["test_loss"]) / abs(b["test_loss"])
                    for a, b in zip(tests, other))
        tolerance = args.validation_rtol
    else:
        worst = max(abs(a["test_loss"] - b["test_loss"]) for a, b in zip(tests, other))
        tolerance = args.atol
    if worst > tolerance:
        sys.exit(f"test losses differ by {worst:.3g} (tolerance {tolerance})")
    print(f"close test losses: {len(tests)} evaluations within {tolerance}")


def check_test(args):
    if args.close_validation:
        close_tests(args)
    if args.test_step is None and not args.no_test:
        return
    records = read_all(args.run)
    tests = [r for r in records if "test_loss" in r]
    if args.no_test:
        if tests:
            sys.exit(f"{args.run}: test evaluations at steps {[r['step'] for r in tests]}, "
                     "expected none")
        print("no test evaluation")
        return
    if len(tests) != 1 or tests[0]["step"] != args.test_step or records[-1] is not tests[0]:
        sys.exit(f"{args.run}: test evaluations at steps {[r['step'] for r in tests]}, expected "
                 f"one at step {args.test_step}, the last record")
    r = tests[0]
    loss, ppl = r["test_loss"], r["test_ppl"]
    if not r.get("end_of_training"):
        sys.exit(f"{args.run}: the test evaluation is not marked end_of_training")
    if loss is None or not math.isfinite(loss):
        sys.exit(f"{args.run}: test loss {loss}")
    if not math.isclose(ppl, math.exp(min(20.0, loss)), rel_tol=1e-12):
        sys.exit(f"{args.run}: test perplexity {ppl} is not exp({loss})")
    print(f"test evaluation at step {r['step']}: {loss:.4f}")


if __name__ == "__main__":
    main()
