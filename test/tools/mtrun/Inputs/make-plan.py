#!/usr/bin/env python3
"""Writes a small plan directory (docs/plan-format.md, version 3) for mtrun's lit tests.

`mtc compile -o x.plan` writes real plans; this writes a hand-made one with a known parameter
table, and can break it in the ways mtrun must reject:

  make-plan.py DIR                         a valid plan (MANIFEST, plan.json, program.mlir)
  --seed N                                 plan.json's seed (default 1234)
  --manifest-version N                     MANIFEST's format line says `mtc-plan N`
  --json-version N                         plan.json's `version` (MANIFEST hashes still match)
  --init-kind PARAM=KIND                   set a parameter's init kind (MANIFEST still matches)
  --truncate FILE                          cut the last 10 bytes of FILE after hashing it
  --corrupt FILE                           flip one bit in the middle of FILE after hashing it
  --tamper                                 edit plan.json's seed after hashing (valid JSON,
                                           same size)
  --no-manifest                            leave MANIFEST out
  --remove FILE                            delete FILE after listing it
  --fifo FILE                              replace FILE by a FIFO (named pipe) after listing it
  --train-steps N                          plan.json's train.steps (default 10)
  --append-line TEXT                       append TEXT as a line to MANIFEST
  --mesh AXIS=SIZE                         add a mesh axis (repeatable, outermost first)
  --layout PARAM:DIM=AXIS[,AXIS]           split PARAM's DIM over the axes (repeatable)
  --data-parallel-axis AXIS                the mesh's data_parallel_axis (the distributed
                                           optimizer)
  --optimizer-layout PARAM:DIM=AXIS[,AXIS] PARAM's optimizer_layout: its layout plus DIM split
                                           over the axes (repeatable)
"""

import argparse
import hashlib
import json
import os
import shutil


def dims(*pairs):
    return [{"name": n, "size": s} for n, s in pairs]


def make_plan(seed, json_version):
    vocab, seq, hidden, ffn, layers = 64, 16, 32, 64, 2
    model_dims = {"batch": 4, "seq": seq, "vocab": vocab, "hidden": hidden, "ffn": ffn,
                  "layers": layers}
    params = []

    def param(name, d, kind, args=(), layer=None, decay=None):
        p = {"name": name, "tensor_id": len(params), "dims": d, "dtype": "f32",
             "init": {"kind": kind, "args": list(args)},
             "weight_decay": decay if decay is not None else
             len(d) - (1 if layer else 0) >= 2}
        if layer:
            p["layer"] = layer
            p["instances"] = layers
        else:
            p["instances"] = 1
        params.append(p)

    param("wte", dims(("vocab", vocab), ("hidden", hidden)), "normal", [0.02])
    param("wpe", dims(("seq", seq), ("hidden", hidden)), "normal", [0.5, 1.0])
    param("block.ln.g", dims(("layers", layers), ("hidden", hidden)), "ones", layer="block")
    param("block.ln.b", dims(("layers", layers), ("hidden", hidden)), "zeros", layer="block")
    param("block.w1", dims(("layers", layers), ("hidden", hidden), ("ffn", ffn)), "normal",
          [0.02], layer="block")
    param("block.w2", dims(("layers", layers), ("ffn", ffn), ("hidden", hidden)), "uniform",
          [-0.1, 0.1], layer="block")
    param("lnf.g", dims(("hidden", hidden)), "constant", [0.5])
    param("lnf.b", dims(("hidden", hidden)), "zeros")

    states = []
    for p in params:
        for suffix in ("exp_avg", "exp_avg_sq"):
            states.append({"name": p["name"] + "." + suffix, "of": p["name"], "dims": p["dims"],
                           "dtype": "f32"})
    numel = sum(_numel(p["dims"]) for p in params)
    tokens = dims(("batch", 4), ("seq", seq))
    return {
        "format": "mtc-plan",
        "version": json_version,
        "compiler": "make-plan.py (mtrun lit tests)",
        "model": "tiny",
        "source": {"path": "tiny.mtl", "sha256": hashlib.sha256(b"tiny").hexdigest()},
        "seed": seed,
        "dims": model_dims,
        "vocabulary": "vocab",
        "train": {"steps": 10, "lr": 0.001, "optimizer": "adamw"},
        "parallel": {},
        "inputs": [{"name": "tokens", "dtype": "i32", "dims": tokens},
                   {"name": "labels", "dtype": "i32", "dims": tokens}],
        "params": params,
        "states": states,
        "functions": ["forward", "forward_backward", "optimizer_step"],
        "predictions": {
            "parameters": numel,
            "flops_per_token": {"forward": 6 * numel, "backward": 12 * numel},
            "memory_bytes": {"parameters": 4 * numel, "gradients": 4 * numel,
                             "optimizer_state": 8 * numel, "saved_activations": 65536,
                             "total": 16 * numel + 65536},
        },
    }


def _numel(d):
    n = 1
    for x in d:
        n *= x["size"]
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--manifest-version", default="3")
    ap.add_argument("--json-version", type=int, default=3)
    ap.add_argument("--init-kind", action="append", default=[])
    ap.add_argument("--truncate")
    ap.add_argument("--corrupt")
    ap.add_argument("--tamper", action="store_true")
    ap.add_argument("--no-manifest", action="store_true")
    ap.add_argument("--remove")
    ap.add_argument("--fifo")
    ap.add_argument("--train-steps", type=int, default=10)
    ap.add_argument("--append-line", action="append", default=[])
    ap.add_argument("--mesh", action="append", default=[])
    ap.add_argument("--layout", action="append", default=[])
    ap.add_argument("--data-parallel-axis")
    ap.add_argument("--optimizer-layout", action="append", default=[])
    args = ap.parse_args()

    plan = make_plan(args.seed, args.json_version)
    plan["train"]["steps"] = args.train_steps
    if args.mesh:
        plan["mesh"] = {"axes": [{"name": a.split("=")[0], "size": int(a.split("=")[1])}
                                 for a in args.mesh]}
    for spec in args.layout:
        name, rest = spec.split(":", 1)
        dim, axes = rest.split("=", 1)
        for p in plan["params"]:
            if p["name"] == name:
                p.setdefault("layout", {"split": {}})["split"][dim] = axes.split(",")
    if args.data_parallel_axis:
        plan.setdefault("mesh", {"axes": []})["data_parallel_axis"] = args.data_parallel_axis
    for spec in args.optimizer_layout:
        name, rest = spec.split(":", 1)
        dim, axes = rest.split("=", 1)
        for p in plan["params"]:
            if p["name"] == name:
                if "optimizer_layout" not in p:
                    p["optimizer_layout"] = {
                        "split": dict(p.get("layout", {}).get("split", {}))}
                p["optimizer_layout"]["split"][dim] = axes.split(",")
    for spec in args.init_kind:
        name, kind = spec.split("=", 1)
        for p in plan["params"]:
            if p["name"] == name:
                p["init"]["kind"] = kind

    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    files = {
        "plan.json": (json.dumps(plan, indent=2) + "\n").encode(),
        "program.mlir": b"module {\n  // the training step arrives with mtc compile\n}\n",
    }
    manifest = "mtc-plan %s\n" % args.manifest_version
    for name, data in files.items():
        with open(os.path.join(args.dir, name), "wb") as f:
            f.write(data)
        manifest += "%s %d %s\n" % (hashlib.sha256(data).hexdigest(), len(data), name)
    for line in args.append_line:
        manifest += line + "\n"
    if not args.no_manifest:
        with open(os.path.join(args.dir, "MANIFEST"), "w") as f:
            f.write(manifest)

    def path(name):
        return os.path.join(args.dir, name)

    if args.truncate:
        data = files[args.truncate]
        with open(path(args.truncate), "wb") as f:
            f.write(data[:-10])
    if args.corrupt:
        data = bytearray(files[args.corrupt])
        data[len(data) // 2] ^= 0x01
        with open(path(args.corrupt), "wb") as f:
            f.write(bytes(data))
    if args.tamper:
        text = files["plan.json"].decode()
        old = '"seed": %d' % args.seed
        seed = args.seed + 1 if len(str(args.seed + 1)) == len(str(args.seed)) else args.seed - 1
        new = '"seed": %d' % seed
        assert old in text and len(old) == len(new) and old != new
        with open(path("plan.json"), "w") as f:
            f.write(text.replace(old, new))
    if args.remove:
        os.remove(path(args.remove))
    if args.fifo:
        os.remove(path(args.fifo))
        os.mkfifo(path(args.fifo))


if __name__ == "__main__":
    main()
