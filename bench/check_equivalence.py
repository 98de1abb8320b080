#!/usr/bin/env python3
"""Checks that bench/torch_gpt.py computes what mtc's compiled training step computes.

Calls the plan's own kernels (`mtc compile --kernels=x86`: kernels/x86_64.so, with the calling
convention of plan.json's "kernels" entry, docs/plan-format.md, and a null kernel context)
from Python through ctypes,
with dropout off (an `mtc_dropout_key` whose key is inactive: every element kept), and the PyTorch model with
--no-dropout, from the same initial weights and on the same synthetic batches:

  1. forward: the loss of step 0's first micro-batch;
  2. forward_backward: that loss and every gradient, in the plan's names;
  3. K optimizer steps of both (micro-batch gradients summed, optimizer_step with
     grad_scale = 1 / micro_batches, the step counting from 0): loss, gradient norm and
     learning rate per step, then every parameter.

    bench/.venv/bin/python bench/check_equivalence.py --plan P.plan --weights W.safetensors

Differences are relative to the largest magnitude of the compared tensor; fp32 arithmetic
in a different order gives ~1e-6 for one evaluation, growing slowly over optimizer steps
(Adam divides by sqrt(v), which amplifies tiny gradients' rounding). Exit status 1 when a
check exceeds its tolerance. Needs a C compiler (`cc`) for the dropout stub.
"""

import argparse
import ctypes
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_gpt as tg  # noqa: E402

DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32}

DROPOUT_STUB = r"""
#include <stdint.h>
#include <stdlib.h>
/* Every import takes the kernel context first (runtime/exec/KernelABI.h); this harness calls
   the kernels with a null one and its stubs ignore it. */
/* Dropout off: every key word 0, so "active" is 0 and every element is kept unscaled
   (docs/architecture.md, dropout contract). */
int64_t mtc_dropout_key(void *context, int64_t stream, int64_t word) {
  (void)context; (void)stream; (void)word;
  return 0;
}
void mtc_dropout_layer(void *context, int64_t instance) { (void)context; (void)instance; }
/* The kernels allocate their temporaries through the runtime (compiler/codegen/CPU/CPUCodegen.h);
   here straight from the C library, uncounted. */
void *mtc_kernel_alloc(void *context, size_t size) { (void)context; return malloc(size); }
void *mtc_kernel_calloc(void *context, size_t count, size_t size) {
  (void)context;
  return calloc(count, size);
}
void *mtc_kernel_aligned_alloc(void *context, size_t align, size_t size) {
  (void)context;
  return aligned_alloc(align, size);
}
void mtc_kernel_free(void *context, void *pointer) { (void)context; free(pointer); }
/* The batched matrix product the kernels import (runtime/exec/Gemm.h): c[i] += a[i] x b[i]
   on strided memref descriptors, here a plain loop accumulating in double. */
typedef struct { float *allocated, *aligned; int64_t offset, sizes[3], strides[3]; } MemRef3;
static float *at(MemRef3 *m, int64_t i, int64_t j, int64_t l) {
  return m->aligned + m->offset + i * m->strides[0] + j * m->strides[1] + l * m->strides[2];
}
void _mlir_ciface_mtc_batch_matmul_f32(void *context, MemRef3 *a, MemRef3 *b, MemRef3 *c) {
  (void)context;
  for (int64_t i = 0; i < c->sizes[0]; ++i)
    for (int64_t m = 0; m < c->sizes[1]; ++m)
      for (int64_t n = 0; n < c->sizes[2]; ++n) {
        double sum = *at(c, i, m, n);
        for (int64_t k = 0; k < a->sizes[2]; ++k)
          sum += (double)*at(a, i, m, k) * *at(b, i, k, n);
        *at(c, i, m, n) = (float)sum;
      }
}
"""


class Kernels:
    """The plan's x86_64.so, each function callable with {name: numpy array} inputs."""

    def __init__(self, plan_dir, plan_json, workdir):
        kernels = plan_json.get("kernels", {}).get("x86_64")
        if not kernels:
            sys.exit(f"check_equivalence: {plan_dir} has no x86 kernels: compile it with "
                     "`mtc compile --kernels=x86`")
        stub_c = os.path.join(workdir, "dropout_stub.c")
        stub_so = os.path.join(workdir, "dropout_stub.so")
        with open(stub_c, "w") as f:
            f.write(DROPOUT_STUB)
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", stub_c, "-o", stub_so], check=True)
        self._stub = ctypes.CDLL(stub_so, mode=ctypes.RTLD_GLOBAL)
        self._lib = ctypes.CDLL(os.path.join(plan_dir, kernels["file"]))
        self.functions = kernels["functions"]

    @staticmethod
    def _descriptor(array):
        """An MLIR ranked memref descriptor of a C-contiguous array (kept alive by the caller)."""
        rank = array.ndim
        strides = [s // array.itemsize for s in array.strides]
        words = [array.ctypes.data, array.ctypes.data, 0] + list(array.shape) + strides
        return np.array(words if rank else words[:3], dtype=np.int64)

    def call(self, name, values):
        """values: {(kind, name): array} for the inputs; returns {(kind, name): array} for the
        outputs. Kinds and names are plan.json's (`("param", "wte")`, `("grad", "wte")`,
        `("input", "tokens")`); a scalar's name is its kind (`("step", "step")`)."""
        fn = self.functions[name]
        arrays, outputs = [], {}
        for b in fn["inputs"]:
            shape = [d["size"] for d in b["dims"]]
            a = np.array(values[(b["kind"], b.get("name", b["kind"]))], dtype=DTYPES[b["dtype"]],
                         order="C")
            if list(a.shape) != shape:
                raise ValueError(f"{name}: input {b.get('name')} has shape {list(a.shape)}, "
                                 f"expected {shape}")
            arrays.append(a)
        for b in fn["outputs"]:
            a = np.zeros([d["size"] for d in b["dims"]], dtype=DTYPES[b["dtype"]])
            arrays.append(a)
            key = b.get("name", b["kind"])
            outputs[(b["kind"], key)] = a
        descriptors = [self._descriptor(a) for a in arrays]
        pointers = (ctypes.c_void_p * len(descriptors))(*[d.ctypes.data for d in descriptors])
        # The kernel context first: none (docs/plan-format.md, "Kernels").
        getattr(self._lib, fn["symbol"])(None, pointers)
        return outputs


def tagged(kind, arrays):
    return {(kind, name): a for name, a in arrays.items()}


def rel_diff(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    scale = max(np.abs(a).max(initial=0.0), np.abs(b).max(initial=0.0), 1e-30)
    return float(np.abs(a - b).max(initial=0.0) / scale)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plan", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--steps", type=int, default=3, help="optimizer steps to compare (default 3)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tol", type=float, default=1e-4,
                    help="tolerance of one evaluation (loss, gradients; default 1e-4)")
    ap.add_argument("--step-tol", type=float, default=1e-3,
                    help="tolerance of the parameters after the optimizer steps (default 1e-3)")
    args = ap.parse_args()

    import torch
    tg.torch, tg.F = torch, torch.nn.functional
    torch.set_num_threads(args.threads)
    from safetensors.numpy import load_file

    plan = tg.Plan(args.plan)
    settings = tg.TrainSettings(plan.train)
    weights = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in load_file(args.weights).items()}
    GPT = tg.build_model_class()
    model = GPT(plan)
    model.load_plan_tensors({k: torch.from_numpy(v.copy()) for k, v in weights.items()})
    model.train()

    micro = plan.dims["batch"]
    global_batch = int(plan.train.get("global_batch", micro))
    n_micro = global_batch // micro
    seq, vocab = plan.dim("seq"), plan.dim("vocab")
    task = tg.SyntheticTask(vocab, plan.seed)
    failures = []

    def check(what, diff, tol):
        ok = diff <= tol
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {diff:.2e} (tolerance {tol:g})")
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="mtc-equiv-") as work:
        k = Kernels(args.plan, plan.json, work)
        params = dict(weights)
        tokens, labels = task.batch(0, 0, micro, seq)
        inputs = {("input", "tokens"): tokens.astype(np.int32),
                  ("input", "labels"): labels.astype(np.int32)}

        # 1. forward
        out = k.call("forward", {**inputs, **tagged("param", params)})
        mtc_loss = float(out[("loss", "loss")])
        torch_loss = tg.loss_of(model, tokens, labels)
        print(f"forward loss: mtc {mtc_loss:.6f}, torch {torch_loss:.6f}, ln(vocab) "
              f"{math.log(vocab):.6f}")
        check("forward loss", abs(mtc_loss - torch_loss) / abs(torch_loss), args.tol)

        # 2. forward_backward
        out = k.call("forward_backward", {**inputs, **tagged("param", params)})
        check("forward_backward loss",
              abs(float(out[("loss", "loss")]) - torch_loss) / abs(torch_loss), args.tol)
        model.zero_grad(set_to_none=True)
        model(torch.from_numpy(tokens), torch.from_numpy(labels), dropout=False).backward()
        torch_grads = {n: t.numpy() for n, t in model.plan_state_dict(grads=True).items()}
        # Relative to the largest gradient element of the model: some gradients are zero up
        # to rounding (a key bias shifts every score of a query equally: d loss / d bk = 0).
        scale = max(float(np.abs(g).max()) for g in torch_grads.values())
        worst = max((float(np.abs(out[("grad", n)].astype(np.float64) - torch_grads[n]).max())
                     / scale, n) for n in torch_grads)
        check(f"gradients, relative to the largest gradient {scale:.3g} (worst: {worst[1]})",
              worst[0], args.tol)
        # Tensors whose gradient is rounding noise (the key bias): Adam turns noise into
        # steps of about lr either way, so their values after a step are not comparable.
        noise = sorted(n for n, g in torch_grads.items() if np.abs(g).max() < 1e-5 * scale)
        per_tensor = sorted(((rel_diff(out[("grad", n)], torch_grads[n]), n) for n in torch_grads
                             if np.abs(torch_grads[n]).max() > 1e-3 * scale), reverse=True)
        print(f"     worst gradient relative to its own largest element: {per_tensor[0][0]:.2e} "
              f"({per_tensor[0][1]})")

        # 3. optimizer steps
        if args.steps > 0:
            states = {s["name"]: np.zeros([d["size"] for d in s["dims"]], dtype=np.float32)
                      for s in plan.json["states"]}
            opt, impl = tg.make_optimizer(model, settings, "foreach")
            for step in range(args.steps):
                batch = task.batch(step, 0, global_batch, seq)
                micro_batches = [(batch[0][m * micro:(m + 1) * micro],
                                  batch[1][m * micro:(m + 1) * micro]) for m in range(n_micro)]
                grads, losses = None, []
                for t, l in micro_batches:
                    out = k.call("forward_backward", {("input", "tokens"): t.astype(np.int32),
                                                      ("input", "labels"): l.astype(np.int32),
                                                      **tagged("param", params)})
                    losses.append(float(out[("loss", "loss")]))
                    g = {n: out[("grad", n)] for n in params}
                    grads = g if grads is None else {n: grads[n] + g[n] for n in grads}
                out = k.call("optimizer_step", {("step", "step"): np.float32(step),
                                                ("grad_scale", "grad_scale"):
                                                    np.float32(1.0 / n_micro),
                                                **tagged("grad", grads),
                                                **tagged("param", params),
                                                **tagged("state", states)})
                params = {n: out[("param", n)] for n in params}
                states = {n: out[("state", n)] for n in states}
                mtc_norm, mtc_lr = float(out[("grad_norm", "grad_norm")]), float(out[("lr", "lr")])
                mtc_step_loss = sum(losses) / n_micro

                torch_mb = [(torch.from_numpy(t), torch.from_numpy(l)) for t, l in micro_batches]
                t_loss, t_norm = tg.train_step(model, opt, settings, step, torch_mb, dropout=False)
                print(f"step {step}: loss mtc {mtc_step_loss:.6f} torch {t_loss:.6f}; grad norm "
                      f"mtc {mtc_norm:.6f} torch {t_norm:.6f}; lr mtc {mtc_lr:.6g} torch "
                      f"{settings.lr_at(step):.6g}")
                check(f"step {step} loss", abs(mtc_step_loss - t_loss) / abs(t_loss),
                      args.step_tol)
                check(f"step {step} grad norm", abs(mtc_norm - t_norm) / abs(t_norm), args.step_tol)
                check(f"step {step} lr", abs(mtc_lr - settings.lr_at(step)) / settings.lr_at(step),
                      1e-6)
            torch_params = {n: t.numpy() for n, t in model.plan_state_dict().items()}
            compared = [n for n in torch_params if n not in noise]
            worst = max(((rel_diff(params[n], torch_params[n]), n) for n in compared))
            check(f"parameters after {args.steps} steps (worst: {worst[1]})", worst[0],
                  args.step_tol)
            # Relative to each tensor's change (information only: Adam's first steps move an
            # element with a near-zero gradient by about +-lr whatever its sign, so rounding
            # alone makes a few elements' updates differ by a percent of the largest update).
            worst_update = max(((rel_diff(params[n] - weights[n], torch_params[n] - weights[n]), n)
                                for n in compared))
            print(f"     largest difference of the updates, relative to the tensor's largest "
                  f"update: {worst_update[0]:.2e} ({worst_update[1]})")
            if noise:
                bound = 2 * sum(settings.lr_at(s) for s in range(args.steps))
                far = max(float(np.abs(params[n] - torch_params[n]).max()) for n in noise)
                print(f"     {', '.join(noise)}: zero gradient up to rounding, so Adam moves "
                      f"them by noise; largest difference {far:.2e}")
                check("zero-gradient parameters stay within 2 * sum(lr)", far, bound)

    print("equivalence: " + ("FAILED: " + ", ".join(failures) if failures else "all checks pass"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
