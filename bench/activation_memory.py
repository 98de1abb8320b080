#!/usr/bin/env python3
"""Activation memory per layer: mtc against Korthikanti et al. (bench/README.md, "Activation
memory per layer").

  bench/activation_memory.py [--mtc build/bin/mtc] [--tp 2] [--sizes 64x64x4,32x96x6]
                             [--models activation-gpt,gpt-tiny] [--check]

For each of the five cases of "Reducing Activation Recomputation in Large Transformer Models"
(Korthikanti et al., 2022, arXiv:2205.05198: no parallelism; tensor parallel; tensor +
sequence parallel; that with selective recomputation; full recomputation), compiles a model
with `mtc compile --stats --saved-activations --target=none` and prints the paper's bytes per
layer (16-bit activations, 1-byte dropout masks), what one layer instance keeps on one rank in
mtc, and the difference term by term. Sizes are SEQxHIDDENxHEADS (`--dim` overrides; the
micro-batch b is the model's, 8 for both). With --check it exits 1 unless every term mtc keeps is the
paper's term adjusted by the documented differences (`mtc_term_bytes`), and the terms add up to
the paper's closed formulas.

The models: bench/activation-gpt.mtl writes attention out as the paper counts it (softmax,
dropout on the probabilities, product with V); examples/gpt-tiny.mtl uses mtc's fused
attention(), which keeps no probabilities.
"""
import argparse
from fractions import Fraction
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {
    "activation-gpt": os.path.join(ROOT, "bench", "activation-gpt.mtl"),
    "gpt-tiny": os.path.join(ROOT, "examples", "gpt-tiny.mtl"),
}
ELEMENT_BYTES = {"fp32": 4, "bf16": 2}  # train { precision }: what mtc's activations take


class Term:
    """One tensor of the paper's count: its elements without parallelism (in units of s*b*h,
    or of a*s*s*b for the attention matrices), whether tensor parallelism splits it (sharded
    over heads or ffn) or only sequence parallelism does, whether it is a 1-byte mask, and
    which statement of the models computes it: `match(var, call, line)` with the variable the
    statement binds, the builtin at the tensor's source column and the line's text. mtc
    reports tensors after decomposition (a layer norm is the `mt.add` of its bias), so the
    source position, not the op, names them."""

    def __init__(self, key, what, sbh, as2b, tp, mask, match):
        self.key, self.what, self.sbh, self.as2b = key, what, sbh, as2b
        self.tp, self.mask, self.match = tp, mask, match

    def elements(self, d, t, sp):
        n = self.sbh * d["s"] * d["b"] * d["h"] + self.as2b * d["a"] * d["s"] ** 2 * d["b"]
        # Split over t by tensor parallelism (heads, ffn), or by sequence parallelism (seq).
        return n // t if (self.tp or sp) else n


def line_var(line):
    m = re.match(r"\s*(\w+)\s*=", line)
    return m.group(1) if m else ""


def call_at(line, column):
    m = re.match(r"(\w+)\(", line[column - 1:])
    return m.group(1) if m else ""


# The paper's Section 4.1 count for one layer: attention block 11sbh + 5as^2b, MLP 19sbh,
# the two layer norms 4sbh (16-bit bytes; masks 1 byte per element).
TERMS = [
    Term("ln1_in", "LayerNorm 1 input (the layer input)", 1, 0, False, False,
         lambda v, c, l: v == "argument"),
    Term("qkv_in", "QKV input (LayerNorm 1 output)", 1, 0, False, False,
         lambda v, c, l: v == "h" and "ln1" in l),
    Term("q", "Q (input of QK^T)", 1, 0, True, False, lambda v, c, l: v == "q"),
    Term("k", "K (input of QK^T)", 1, 0, True, False, lambda v, c, l: v == "k"),
    Term("softmax", "softmax output", 0, 1, True, False,
         lambda v, c, l: v == "p" and c == "softmax"),
    Term("attn_mask", "attention-probability dropout mask", 0, 1, True, True,
         lambda v, c, l: False),
    Term("attn_drop", "dropped probabilities (input of x V)", 0, 1, True, False,
         lambda v, c, l: v == "p" and c == "dropout"),
    Term("v", "V", 1, 0, True, False, lambda v, c, l: v == "v"),
    Term("proj_in", "attention output (output projection input)", 1, 0, True, False,
         lambda v, c, l: v == "a"),
    Term("proj_mask", "attention dropout mask", 1, 0, False, True, lambda v, c, l: False),
    Term("ln2_in", "LayerNorm 2 input", 1, 0, False, False, lambda v, c, l: v == "x"),
    Term("mlp_in", "MLP input (LayerNorm 2 output)", 1, 0, False, False,
         lambda v, c, l: v == "h" and "ln2" in l),
    Term("gelu_in", "GELU input", 4, 0, True, False, lambda v, c, l: v == "f" and c != "gelu"),
    Term("gelu_out", "GELU output (second linear input)", 4, 0, True, False,
         lambda v, c, l: v == "f" and c == "gelu"),
    Term("mlp_mask", "MLP dropout mask", 1, 0, False, True, lambda v, c, l: False),
]
ATTENTION_CORE = {"softmax", "attn_mask", "attn_drop"}

# The five cases: (name, mtc flags, tp, sp, recompute, the paper's closed formula in bytes).
CASES = [
    ("none", [], 1, False, "none",
     lambda s, b, h, a, t: s * b * h * (34 + 5 * a * s / h)),
    ("tp", ["--tp", "{t}"], None, False, "none",
     lambda s, b, h, a, t: s * b * h * (10 + 24 / t + 5 * a * s / (h * t))),
    ("tp+sp", ["--tp", "{t}", "--sp"], None, True, "none",
     lambda s, b, h, a, t: s * b * h / t * (34 + 5 * a * s / h)),
    ("tp+sp+selective", ["--tp", "{t}", "--sp", "--recompute=selective"], None, True, "selective",
     lambda s, b, h, a, t: 34 * s * b * h / t),
    ("full", ["--recompute=full"], 1, False, "full",
     lambda s, b, h, a, t: 2 * s * b * h),
]


def paper_term_bytes(term, d, t, sp, recompute):
    """What the paper counts for `term` in a case."""
    if recompute == "full":
        return 2 * d["s"] * d["b"] * d["h"] if term.key == "ln1_in" else 0
    if recompute == "selective" and term.key in ATTENTION_CORE:
        return 0
    return (1 if term.mask else 2) * term.elements(d, t, sp)


def mtc_term_bytes(term, fused, element, d, t, sp, recompute):
    """What mtc keeps for `term`, by the documented differences (docs/cost-model.md):
    `element` bytes per element (4 in f32, 2 in bf16 as the paper); no dropout masks
    (regenerated from the Philox key); the fused attention() (`fused`) keeps no
    probabilities, and under selective recomputation its output is recomputed with it;
    selective recomputation recomputes only the fused attention() op, so attention written
    out (activation-gpt) keeps under it what it keeps without."""
    if recompute == "full":
        return element * d["s"] * d["b"] * d["h"] if term.key == "ln1_in" else 0
    if term.mask:
        return 0
    if fused:
        if term.key in ATTENTION_CORE:
            return 0
        if recompute == "selective" and term.key == "proj_in":
            return 0
    return element * term.elements(d, t, sp)


SAVED_LINE = re.compile(r"^\s+(\d+) bytes\s+(\S+(?: \d+)?)\s+(\S*)\s+(\[.*\].*)$")
LAYER_LINE = re.compile(r"^\s+(\S+) \((\d+) instances\): (\d+) bytes$")


def model_file(model, precision, work):
    """The model's file, or a copy in `work` trained in `precision`."""
    path = MODELS[model]
    with open(path) as f:
        source = f.read()
    if re.search(rf"\bprecision {precision}\b", source):
        return path
    if not re.search(r"\bprecision \w+", source):
        sys.exit(f"{path}: no 'precision' in train {{}} to set to {precision}")
    copy = os.path.join(work, f"{os.path.basename(path)[:-4]}-{precision}.mtl")
    with open(copy, "w") as f:
        f.write(re.sub(r"\bprecision \w+", f"precision {precision}", source))
    return copy


def saved_activations(mtc, path, size, flags):
    s, h, a = size
    command = [mtc, "compile", path, "--stats", "--saved-activations", "--target=none",
               "--dim", f"seq={s}", "--dim", f"hidden={h}", "--dim", f"heads={a}"] + flags
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{run.stderr}")
    out = run.stdout
    lines = out[out.index("saved activations per layer"):].splitlines()[1:]
    layer = LAYER_LINE.match(lines[0])
    if not layer:
        sys.exit(f"unexpected output of {' '.join(command)}:\n{out}")
    saved = []
    for line in lines[1:]:
        m = SAVED_LINE.match(line)
        if not m:
            break
        saved.append((int(m.group(1)), m.group(2), m.group(3), m.group(4)))
    total = int(layer.group(3))
    assert total == sum(b for b, _, _, _ in saved), out
    return total, saved


def micro_batch(saved):
    """b, from the layer input's type (the model's train { micro_batch })."""
    for _, producer, _, type_ in saved:
        m = re.search(r"\bbatch=(\d+)", type_)
        if producer == "argument 0" and m:
            return int(m.group(1))
    sys.exit("the layer input is not among the saved tensors, or has no batch dimension")


def classify(source, saved):
    """The paper term of each saved tensor, by the statement of the model that computes it."""
    by_term, unmatched = {}, []
    for bytes_, producer, location, type_ in saved:
        var, call, line = "", "", ""
        if producer.startswith("argument"):
            var = "argument"
        elif location:
            _, row, column = location.rsplit(":", 2)
            line = source[int(row) - 1]
            var, call = line_var(line), call_at(line, int(column))
        term = next((t for t in TERMS if t.match(var, call, line)), None)
        if term is None:
            unmatched.append((bytes_, producer, location, type_))
        else:
            by_term.setdefault(term.key, []).append((bytes_, producer, location, type_))
    return by_term, unmatched


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mtc", default=os.path.join(ROOT, "build", "bin", "mtc"))
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--sizes", default="64x64x4,32x96x6",
                        help="SEQxHIDDENxHEADS,... (the micro-batch is the model's)")
    parser.add_argument("--models", default="activation-gpt,gpt-tiny",
                        help="known models or .mtl files written like them (same statement "
                             "names: h, q, k, v, p, a, x, f)")
    parser.add_argument("--precision", choices=sorted(ELEMENT_BYTES), default="fp32",
                        help="train the models in this precision (a copy with train "
                             "{ precision } changed)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless mtc keeps exactly the adjusted terms")
    parser.add_argument("--verbose", action="store_true", help="print every saved tensor")
    args = parser.parse_args()
    sizes = [tuple(int(x) for x in size.split("x")) for size in args.sizes.split(",")]
    element = ELEMENT_BYTES[args.precision]
    work = tempfile.mkdtemp(prefix="mtc-activation-memory-")
    failures = 0
    for model in args.models.split(","):
        if model not in MODELS and not os.path.isfile(model):
            sys.exit(f"--models: '{model}' is neither a known model ({', '.join(MODELS)}) "
                     "nor a .mtl file")
        MODELS.setdefault(model, model)
        path = model_file(model, args.precision, work)
        with open(path) as f:
            source = f.read()
        code = "\n".join(line.split("#")[0] for line in source.splitlines())
        fused = re.search(r"\battention\(", code) is not None
        for size in sizes:
            d = {"s": size[0], "h": size[1], "a": size[2]}
            for name, flags, t, sp, recompute, formula in CASES:
                t = args.tp if t is None else t
                total, saved = saved_activations(
                    args.mtc, path, size, [f.format(t=args.tp) for f in flags])
                if "b" not in d:  # the first case keeps the whole layer input
                    d["b"] = micro_batch(saved)
                    print(f"== {model}: s={d['s']} b={d['b']} h={d['h']} a={d['a']}, "
                          f"t={args.tp}, {args.precision}")
                by_term, unmatched = classify(source.splitlines(), saved)
                paper = formula(*(Fraction(x) for x in (d["s"], d["b"], d["h"], d["a"], t)))
                paper_terms = sum(paper_term_bytes(x, d, t, sp, recompute) for x in TERMS)
                expected = sum(mtc_term_bytes(x, fused, element, d, t, sp, recompute) for x in TERMS)
                ok = paper_terms == paper and total == expected and not unmatched
                rows = []
                for term in TERMS:
                    p = paper_term_bytes(term, d, t, sp, recompute)
                    e = mtc_term_bytes(term, fused, element, d, t, sp, recompute)
                    got = sum(b for b, _, _, _ in by_term.get(term.key, []))
                    ok = ok and got == e
                    if p or e or got:
                        rows.append(f"    {term.what:<46} paper {p:>9} mtc {got:>9} "
                                    f"expected {e:>9}{'' if got == e else '  MISMATCH'}")
                for bytes_, producer, location, type_ in unmatched:
                    rows.append(f"    not a paper term: {bytes_} bytes {producer} {location} "
                                f"{type_}  MISMATCH")
                print(f"  {name:<16} paper {float(paper):>10.0f} (terms {paper_terms})  mtc {total:>9}"
                      f"  expected {expected:>9}  {'ok' if ok else 'MISMATCH'}")
                if args.verbose or not ok:
                    print("\n".join(rows))
                failures += not ok
    shutil.rmtree(work)
    if args.check and failures:
        print(f"{failures} case(s) differ from the adjusted formulas")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
