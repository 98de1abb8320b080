#!/usr/bin/env python3
"""mtc-hf against transformers: the same model gives the same loss on both sides.

For GPT-2 (examples/gpt-tiny.mtl), Llama (examples/llama-gqa-tiny.mtl) and Mixtral
(examples/mixtral-hf-tiny.mtl, dropless as transformers' Mixtral), each compiled
without its dropout sites so that a training step's loss is the plain forward:

 1. build a random transformers model whose config matches the plan (every weight, norms
    and biases included, perturbed so that no layout mistake can hide behind ones and
    zeros), save_pretrained(hf-in);
 2. `mtc-hf import plan --hf hf-in --save ckpt0`;
 3. `mtrun plan --load ckpt0 --steps S --data-path corpus --train-samples (S+1)*G --save
    ckptS`: its step-1 loss is the imported weights' mean cross-entropy on the first global
    batch, which `mtc-data samples` lists; transformers computes it on the same tokens;
 4. `mtc-hf export plan --load ckptS --out hf-out`, AutoModelForCausalLM.from_pretrained
    (hf-out), and the loss of step S+1 of `mtrun --load ckptS` (the trained weights on the
    next global batch) against transformers' on those tokens;
 5. `mtc-hf export` of ckpt0: every tensor of hf-in back bit for bit.

Usage (MTC_BENCH_TRANSFORMERS=1 bench/setup-venv.sh adds transformers to bench/.venv):

    bench/.venv/bin/python bench/hf_check.py [--build build] [--mtc build/bin/mtc] [--steps 3]

It exits non-zero when a loss differs by more than 1e-5 relative or the round trip is not
bit for bit.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers
from safetensors.numpy import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def losses(path):
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if "loss" in r and "step" in r:
                out[r["step"]] = r["loss"]
    return out


def hf_config(arch, dims, layers):
    if arch == "gpt2":
        return transformers.GPT2Config(
            vocab_size=dims["vocab"], n_positions=dims["seq"], n_embd=dims["hidden"],
            n_layer=layers, n_head=dims["heads"], n_inner=dims["ffn"],
            activation_function="gelu_new", layer_norm_epsilon=1e-5, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True)
    if arch == "mixtral":
        # examples/mixtral-hf-tiny.mtl: dropless top-k routing, theta 1e6, eps 1e-5.
        return transformers.MixtralConfig(
            vocab_size=dims["vocab"], hidden_size=dims["hidden"], intermediate_size=dims["ffn"],
            num_hidden_layers=layers, num_attention_heads=dims["heads"],
            num_key_value_heads=dims.get("kv_heads", dims["heads"]),
            head_dim=dims["head_dim"], max_position_embeddings=dims["seq"], rms_norm_eps=1e-5,
            rope_theta=1e6, num_local_experts=dims["experts"],
            num_experts_per_tok=dims["topk"], router_jitter_noise=0.0, sliding_window=None,
            attention_dropout=0.0, tie_word_embeddings=False)
    return transformers.LlamaConfig(
        vocab_size=dims["vocab"], hidden_size=dims["hidden"], intermediate_size=dims["ffn"],
        num_hidden_layers=layers, num_attention_heads=dims["heads"],
        num_key_value_heads=dims.get("kv_heads", dims["heads"]),
        max_position_embeddings=dims["seq"], rms_norm_eps=1e-6, rope_theta=10000.0,
        attention_dropout=0.0, tie_word_embeddings=False)


def hf_loss(model, samples):
    """Mean token cross-entropy over the samples (each L + 1 ids: tokens then labels)."""
    ids = torch.tensor(samples, dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=ids[:, :-1]).logits.double()
        return torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)).item()


def check(name, arch, args, work):
    out = os.path.join(work, name)
    os.makedirs(out)
    source = open(os.path.join(ROOT, "examples", name + ".mtl")).read()
    assert "train {" in source
    # Without its dropout sites (`train { dropout off }` leaves them in the plan's program).
    mtl = os.path.join(out, name + "-no-dropout.mtl")
    with open(mtl, "w") as f:
        f.write(re.sub(r"dropout\((.*), 0\.1\)", r"(\1)", source))
    plan = os.path.join(out, "model.plan")
    run([args.mtc, "compile", mtl, "-o", plan, "--kernels=x86"])
    pj = json.load(open(os.path.join(plan, "plan.json")))
    dims = pj["dims"]
    layers = next(p["instances"] for p in pj["params"] if p.get("layer"))
    G = pj["train"]["global_batch"]
    S = args.steps

    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(hf_config(arch, dims, layers))
    model = model.float().eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1 and ("ln" in pname or "norm" in pname) and pname.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.15 * torch.randn_like(p))
    hf_in = os.path.join(out, "hf-in")
    model.save_pretrained(hf_in, safe_serialization=True)

    ckpt0, ckpt = os.path.join(out, "ckpt0"), os.path.join(out, "ckpt")
    print(run([args.mtc_hf, "import", plan, "--hf", hf_in, "--save", ckpt0]), end="")
    corpus = os.path.join(work, "corpus")
    common = ["--data-path", corpus, "--train-samples", str((S + 1) * G), "--threads-per-rank", "1"]
    run([args.mtrun, plan, "--load", ckpt0, "--steps", str(S), "--save", ckpt,
         "--metrics", os.path.join(out, "run.jsonl")] + common)
    run([args.mtrun, plan, "--load", ckpt, "--steps", str(S + 1),
         "--metrics", os.path.join(out, "next.jsonl")] + common)
    mtc_losses = losses(os.path.join(out, "run.jsonl"))
    mtc_losses.update(losses(os.path.join(out, "next.jsonl")))
    listed = run([args.mtc_data, "samples", corpus, "--seq-len", str(dims["seq"]),
                  "--num-samples", str((S + 1) * G), "--seed", str(pj["seed"])])
    samples = [[int(t) for t in line.split(":")[1].split()]
               for line in listed.splitlines()[1:]]

    hf_out = os.path.join(out, "hf-out")
    run([args.mtc_hf, "export", plan, "--load", ckpt, "--out", hf_out])
    trained = transformers.AutoModelForCausalLM.from_pretrained(hf_out).float().eval()

    rows = []
    for label, m, step in (("imported", model, 1), (f"trained {S} steps, exported", trained, S + 1)):
        ref = hf_loss(m, samples[(step - 1) * G:step * G])
        got = mtc_losses[step]
        rows.append((label, step, got, ref, abs(got - ref) / abs(ref)))

    # Round trip: the imported checkpoint exported again gives hf-in's tensors bit for bit.
    back = os.path.join(out, "hf-back")
    run([args.mtc_hf, "export", plan, "--load", ckpt0, "--out", back])
    a = load_file(os.path.join(hf_in, "model.safetensors"))
    b = load_file(os.path.join(back, "model.safetensors"))
    same = sorted(a) == sorted(b) and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and
        a[k].tobytes() == b[k].tobytes() for k in a)
    return rows, same


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--mtc", help="default BUILD/bin/mtc")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--work", help="keep everything here (default: a temporary directory)")
    args = ap.parse_args()
    args.mtc = args.mtc or os.path.join(args.build, "bin", "mtc")
    args.mtrun = os.path.join(args.build, "bin", "mtrun")
    args.mtc_hf = os.path.join(args.build, "bin", "mtc-hf")
    args.mtc_data = os.path.join(args.build, "bin", "mtc-data")
    work = args.work or tempfile.mkdtemp(prefix="mtc-hf-check-")
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, in {work}")

    # A byte-level corpus: the repository's documentation, a document per line.
    text = os.path.join(work, "corpus.txt")
    with open(text, "w") as f:
        for doc in sorted(os.listdir(os.path.join(ROOT, "docs"))):
            if doc.endswith(".md"):
                f.write(open(os.path.join(ROOT, "docs", doc), errors="replace").read())
    run([args.mtc_data, "preprocess", "--input", text, "--output-prefix",
         os.path.join(work, "corpus"), "--split-lines", "--append-eod"])

    failed = False
    print(f"\n{'model':<16} {'weights':<28} {'step':>4} {'mtrun loss':>12} "
          f"{'transformers':>12} {'rel. diff':>10}")
    for name, arch in (("gpt-tiny", "gpt2"), ("llama-gqa-tiny", "llama"),
                       ("mixtral-hf-tiny", "mixtral")):
        rows, same = check(name, arch, args, work)
        for label, step, got, ref, rel in rows:
            print(f"{name:<16} {label:<28} {step:>4} {got:>12.7f} {ref:>12.7f} {rel:>10.2e}")
            failed |= rel > 1e-5
        print(f"{name:<16} import -> export round trip: {'bit for bit' if same else 'DIFFERS'}")
        failed |= not same
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
