#!/usr/bin/env python3
"""The PyTorch peer of mtc's GPT examples, for the CPU training-throughput benchmark.

Builds the model of `examples/gpt-tiny.mtl` / `examples/gpt2-small.mtl` (GPT-2: learned
positions, pre-norm blocks, biases optional, tied embeddings) from a plan's `plan.json`, loads
the initial weights that `mtrun PLAN --steps 0 --export-safetensors FILE` writes, and trains
it with the plan's `train {}` settings, timing every optimizer step:

    python bench/torch_gpt.py --plan P.plan --weights W.safetensors --steps 6 --threads 2

prints one JSON object (tokens_per_s: median over the steps after --warmup; step_ms: mean of
the same steps). See bench/README.md.

What is the same as mtc's training step (docs/dsl.md, compiler/optimizer/OptimizerStep.cpp):
  - layer_norm eps 1e-5 (biased variance), gelu with the tanh approximation, attention with the
    causal mask and scale 1/sqrt(head_dim), q/k/v = contract(h, w, over = hidden) + b with
    w [hidden, heads, head_dim], output contract over (heads, head_dim) with wo
    [heads, head_dim, hidden], logits = contract(layer_norm(x), wte, over = hidden), mean
    cross-entropy over every token of the micro-batch;
  - dropout(p) after the embedding sum and on both residual branches (inverted scaling,
    torch's RNG, so masks differ from mtc's Philox masks; --no-dropout turns it off);
  - global_batch / micro_batch micro-batches per step, the gradient being the mean of the
    micro-batch gradients (loss / micro_batches per backward);
  - AdamW: m, v with betas, bias corrections with the 1-based step, eps, decoupled weight
    decay lr * wd * p only on the parameters whose plan entry has "weight_decay": true;
  - the global gradient norm over all gradients, clipped with coef = min(1, clip / (norm +
    1e-6)) (torch.nn.utils.clip_grad_norm_ is exactly that);
  - lr(step), step counting from 0: lr * (step + 1) / warmup while step < warmup, then
    min + (lr - min) * 0.5 * (1 + cos(pi * progress)) (cosine) or (1 - progress) (linear),
    progress = clamp((step - warmup) / (decay_steps - warmup), 0, 1), decay_steps defaulting
    to train { steps }.

What differs, on purpose, and changes nothing mathematically: q, k and v of a layer are one
[hidden, 3 * heads * head_dim] parameter (one GEMM, as nanoGPT writes it) and every layer has
its own tensors instead of one tensor stacked over `layers`; AdamW and the norm are
elementwise / whole-model, so the update is the same. `plan_state_dict()` gives the weights
back in the plan's names and shapes.

Data: by default mtrun's synthetic task (docs/runtime.md, runtime/data/SyntheticTask.cpp),
re-implemented here with a vectorised Philox4x32-10: step n uses samples [0, global_batch),
micro-batch m samples [m * micro_batch, (m + 1) * micro_batch). --data random draws uniform
tokens and labels instead. All batches are made before the timed loop.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np

# torch is imported in main() after the thread settings are known (OMP reads its environment
# once, at load time).
torch = None
F = None


# ----------------------------------------------------------------------------------------
# Philox4x32-10 and the synthetic task (runtime/support/Philox.h, runtime/data/SyntheticTask.cpp)

MASK32 = 0xFFFFFFFF
SYNTHETIC_CHAIN_TENSOR_ID = 0xFFFF0001
SYNTHETIC_SAMPLE_TENSOR_ID = 0xFFFF0002


def philox4x32_10(c0, c1, c2, c3, key0, key1):
    """Philox4x32-10 on arrays of counters (uint32 arrays or ints) and a scalar key."""
    shape = np.broadcast(c0, c1, c2, c3).shape
    x = [np.broadcast_to(np.asarray(c, dtype=np.uint64), shape).copy() for c in (c0, c1, c2, c3)]
    k0, k1 = key0 & MASK32, key1 & MASK32
    m0, m1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    low = np.uint64(MASK32)
    s32 = np.uint64(32)
    for r in range(10):
        if r:
            k0 = (k0 + 0x9E3779B9) & MASK32
            k1 = (k1 + 0xBB67AE85) & MASK32
        p0 = m0 * x[0]
        p1 = m1 * x[2]
        x = [(p1 >> s32) ^ x[1] ^ np.uint64(k0), p1 & low, (p0 >> s32) ^ x[3] ^ np.uint64(k1),
             p0 & low]
    return [v.astype(np.uint32) for v in x]


def philox_words(seed, tensor_id, index, step=0):
    """The four words of global elements `index` (uint64 array) of a stream (Philox.h keying)."""
    index = np.asarray(index, dtype=np.uint64)
    return philox4x32_10(index & np.uint64(MASK32), index >> np.uint64(32), tensor_id,
                         step & MASK32, seed & MASK32, (seed >> 32) & MASK32)


assert [int(w) for w in philox4x32_10(0, 0, 0, 0, 0, 0)] == \
    [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]  # Random123's known answer


def _below(word, n):
    """A uniform integer in [0, n) from 32-bit words (multiply-high)."""
    return ((np.asarray(word, dtype=np.uint64) * np.uint64(n)) >> np.uint64(32)).astype(np.int64)


class SyntheticTask:
    """mtrun's built-in data: a sparse random Markov chain (runtime/data/SyntheticTask.h)."""

    PROBABILITIES = (0.4, 0.3, 0.2, 0.1)

    def __init__(self, vocab, seed):
        self.vocab, self.seed = int(vocab), int(seed)
        ns = min(4, self.vocab)
        self.ns = ns
        total = 0.0
        for k in range(ns):
            total += self.PROBABILITIES[k]
        thresholds, cumulative = [], 0.0
        for k in range(ns):
            cumulative += self.PROBABILITIES[k] / total
            thresholds.append(1 << 32 if k + 1 == ns else math.floor(cumulative * 4294967296.0 + 0.5))
        self.thresholds = np.array(thresholds, dtype=np.uint64)
        v = self.vocab
        a = np.arange(v, dtype=np.uint64)
        w0 = philox_words(self.seed, SYNTHETIC_CHAIN_TENSOR_ID, 2 * a)
        w1 = philox_words(self.seed, SYNTHETIC_CHAIN_TENSOR_ID, 2 * a + np.uint64(1))
        words = np.stack(w0 + w1, axis=1)  # [v, 8]
        succ = np.zeros((v, ns), dtype=np.int64)
        for n, j in enumerate(range(v - ns, v)):  # Floyd's sampling of ns distinct tokens
            t = _below(words[:, n], j + 1)
            if n:
                t = np.where((succ[:, :n] == t[:, None]).any(axis=1), j, t)
            succ[:, n] = t
        rows = np.arange(v)
        for i in range(ns - 1, 0, -1):  # Fisher-Yates shuffle of the probability ranks
            r = _below(words[:, 4 + (ns - 1 - i)], i + 1)
            tmp = succ[rows, i].copy()
            succ[rows, i] = succ[rows, r]
            succ[rows, r] = tmp
        self.successors = succ

    def entropy_rate(self):
        lo, h = 0, 0.0
        for k in range(self.ns):
            p = (int(self.thresholds[k]) - lo) / 4294967296.0
            lo = int(self.thresholds[k])
            if p > 0:
                h -= p * math.log(p)
        return h

    def batch(self, step, sample_begin, count, seq_len):
        """tokens, labels: int64 [count, seq_len] for samples [sample_begin, +count) of `step`."""
        samples = (np.arange(sample_begin, sample_begin + count, dtype=np.uint64)
                   & np.uint64(MASK32))
        t = np.arange(seq_len + 1, dtype=np.uint64)
        index = (samples[:, None] << np.uint64(32)) | t[None, :]
        word = philox_words(self.seed, SYNTHETIC_SAMPLE_TENSOR_ID, index, step & MASK32)[0]
        word = word.astype(np.uint64)
        x = np.empty((count, seq_len + 1), dtype=np.int64)
        x[:, 0] = _below(word[:, 0], self.vocab)
        inner = self.thresholds[: self.ns - 1]
        for p in range(1, seq_len + 1):
            k = (word[:, p, None] >= inner[None, :]).sum(axis=1)
            x[:, p] = self.successors[x[:, p - 1], k]
        return x[:, :seq_len].copy(), x[:, 1:].copy()


# ----------------------------------------------------------------------------------------
# The plan


def dims_of(entry_dims):
    """[{"name", "size"}] -> [(name, size)]."""
    return [(d["name"], int(d["size"])) for d in entry_dims]


class Plan:
    def __init__(self, plan_dir):
        with open(os.path.join(plan_dir, "plan.json"), "rb") as f:
            self.json = json.load(f)
        j = self.json
        dims = j["dims"]
        self.dims = ({d["name"]: int(d["size"]) for d in dims} if isinstance(dims, list)
                     else {k: int(v) for k, v in dims.items()})
        self.train = j.get("train", {}) or {}
        self.seed = int(j.get("seed", 1234))
        self.model = j.get("model", "?")
        self.params = {p["name"]: p for p in j["params"]}
        self.param_order = [p["name"] for p in j["params"]]

    def dim(self, name):
        if name not in self.dims:
            sys.exit(f"torch_gpt: the plan has no dimension '{name}'")
        return self.dims[name]

    def num_parameters(self):
        return sum(math.prod(s for _, s in dims_of(p["dims"])) for p in self.params.values())


def _number(d, key, default):
    if not isinstance(d, dict) or d.get(key) is None:
        return default
    return float(d[key])


class TrainSettings:
    """The optimizer, schedule and clipping of plan.json's `train` (OptimizerStep.cpp)."""

    def __init__(self, train):
        opt = train.get("optimizer", {})
        if isinstance(opt, str):
            opt = {"kind": opt}
        self.kind = opt.get("kind", "adamw")
        if self.kind != "adamw":
            sys.exit(f"torch_gpt: optimizer '{self.kind}' is not supported (adamw only)")
        self.lr = _number(opt, "lr", 1e-3)
        self.eps = _number(opt, "eps", 1e-8)
        self.weight_decay = _number(opt, "weight_decay", 0.01)
        betas = opt.get("betas", [0.9, 0.999])
        self.betas = (float(betas[0]), float(betas[1]))
        sched = train.get("lr", {})
        if isinstance(sched, str):
            sched = {"kind": sched}
        self.schedule = sched.get("kind", "constant") if isinstance(sched, dict) else "constant"
        self.warmup = _number(sched, "warmup", 0.0)
        self.min_lr = _number(sched, "min", 0.0)
        self.decay_steps = _number(sched, "decay_steps", _number(train, "steps", 0.0))
        self.clip_grad = _number(train, "clip_grad", 0.0)
        self.dropout = str(train.get("dropout", "on")) not in ("off", "false", "False")

    def lr_at(self, step):
        """Learning rate of optimizer step `step` (0-based), as OptimizerPass::learningRate."""
        decayed = self.lr
        if self.schedule in ("cosine", "linear"):
            progress = (step - self.warmup) / (self.decay_steps - self.warmup)
            progress = min(max(progress, 0.0), 1.0)
            fraction = (0.5 * (1.0 + math.cos(math.pi * progress)) if self.schedule == "cosine"
                        else 1.0 - progress)
            decayed = self.min_lr + (self.lr - self.min_lr) * fraction
        if self.warmup <= 0:
            return decayed
        return self.lr * (step + 1.0) / self.warmup if step < self.warmup else decayed


# ----------------------------------------------------------------------------------------
# The model

BLOCK_PARAMS = ("ln1.g", "ln1.b", "wq", "wk", "wv", "bq", "bk", "bv", "wo", "bo",
                "ln2.g", "ln2.b", "w1", "b1", "w2", "b2")
REQUIRED_BLOCK = ("ln1.g", "ln1.b", "wq", "wk", "wv", "wo", "ln2.g", "ln2.b", "w1", "w2")
MODEL_PARAMS = ("wte", "wpe", "lnf.g", "lnf.b")


def build_model_class():
    nn = torch.nn

    class GPT(nn.Module):
        """GPT-2 as examples/gpt-tiny.mtl writes it, from the plan's parameter table."""

        def __init__(self, plan, dropout_p=0.1, dtype=None):
            super().__init__()
            dtype = dtype or torch.float32
            self.plan = plan
            d = plan.dims
            self.vocab, self.seq, self.hidden = plan.dim("vocab"), plan.dim("seq"), plan.dim("hidden")
            self.heads, self.head_dim, self.ffn = plan.dim("heads"), plan.dim("head_dim"), plan.dim("ffn")
            self.dropout_p = dropout_p
            self.eps = 1e-5
            layer_names = {p.get("layer") for p in plan.params.values() if p.get("layer")}
            if len(layer_names) != 1:
                sys.exit(f"torch_gpt: expected one repeated layer, the plan has {sorted(layer_names)}")
            self.layer = layer_names.pop()
            self.layers = d.get("layers") or next(
                p["instances"] for p in plan.params.values() if p.get("layer"))
            expected = set(MODEL_PARAMS) | {f"{self.layer}.{n}" for n in BLOCK_PARAMS}
            required = set(MODEL_PARAMS) | {f"{self.layer}.{n}" for n in REQUIRED_BLOCK}
            names = set(plan.params)
            if not required <= names or not names <= expected:
                sys.exit("torch_gpt: the plan is not the GPT of examples/gpt-tiny.mtl: "
                         f"missing {sorted(required - names)}, unknown {sorted(names - expected)}")
            self.has = {n: f"{self.layer}.{n}" in names for n in BLOCK_PARAMS}
            for a, b in (("bq", "bk"), ("bq", "bv")):
                if self.has[a] != self.has[b]:
                    sys.exit("torch_gpt: bq, bk and bv must all be present or all absent")
            # Expected shapes, checked against the plan (and later the weights).
            H, nh, hd, Fd, V, S, L = (self.hidden, self.heads, self.head_dim, self.ffn, self.vocab,
                                      self.seq, self.layers)
            shapes = {"wte": [V, H], "wpe": [S, H], "lnf.g": [H], "lnf.b": [H]}
            blk = {"ln1.g": [H], "ln1.b": [H], "wq": [H, nh, hd], "wk": [H, nh, hd],
                   "wv": [H, nh, hd], "bq": [nh, hd], "bk": [nh, hd], "bv": [nh, hd],
                   "wo": [nh, hd, H], "bo": [H], "ln2.g": [H], "ln2.b": [H], "w1": [H, Fd],
                   "b1": [Fd], "w2": [Fd, H], "b2": [H]}
            for n, s in blk.items():
                if self.has[n]:
                    shapes[f"{self.layer}.{n}"] = [L] + s
            for name, shape in shapes.items():
                got = [s for _, s in dims_of(plan.params[name]["dims"])]
                if got != shape:
                    sys.exit(f"torch_gpt: plan parameter {name} has shape {got}, expected {shape}")
            self.plan_shapes = shapes

            def P(*shape):
                return nn.Parameter(torch.zeros(*shape, dtype=dtype))

            self.wte, self.wpe = P(V, H), P(S, H)
            self.lnf_g, self.lnf_b = P(H), P(H)
            self.blocks = nn.ModuleList()
            for _ in range(L):
                b = nn.Module()
                b.ln1_g, b.ln1_b = P(H), P(H)
                b.wqkv = P(H, 3 * nh * hd)  # [hidden, (q|k|v), heads, head_dim]
                b.bqkv = P(3 * nh * hd) if self.has["bq"] else None
                b.wo = P(nh * hd, H)  # [(heads, head_dim), hidden]
                b.bo = P(H) if self.has["bo"] else None
                b.ln2_g, b.ln2_b = P(H), P(H)
                b.w1 = P(H, Fd)
                b.b1 = P(Fd) if self.has["b1"] else None
                b.w2 = P(Fd, H)
                b.b2 = P(H) if self.has["b2"] else None
                self.blocks.append(b)

        # -- the plan's names <-> our tensors ---------------------------------------------

        def _pieces(self):
            """(plan name, layer or None, getter of our view of that piece)."""
            nh_hd = self.heads * self.head_dim
            out = [("wte", None, lambda m: m.wte), ("wpe", None, lambda m: m.wpe),
                   ("lnf.g", None, lambda m: m.lnf_g), ("lnf.b", None, lambda m: m.lnf_b)]
            per_layer = {
                "ln1.g": lambda b: b.ln1_g, "ln1.b": lambda b: b.ln1_b,
                "wq": lambda b: b.wqkv[:, 0 * nh_hd:1 * nh_hd],
                "wk": lambda b: b.wqkv[:, 1 * nh_hd:2 * nh_hd],
                "wv": lambda b: b.wqkv[:, 2 * nh_hd:3 * nh_hd],
                "bq": lambda b: b.bqkv[0 * nh_hd:1 * nh_hd],
                "bk": lambda b: b.bqkv[1 * nh_hd:2 * nh_hd],
                "bv": lambda b: b.bqkv[2 * nh_hd:3 * nh_hd],
                "wo": lambda b: b.wo, "bo": lambda b: b.bo,
                "ln2.g": lambda b: b.ln2_g, "ln2.b": lambda b: b.ln2_b,
                "w1": lambda b: b.w1, "b1": lambda b: b.b1, "w2": lambda b: b.w2,
                "b2": lambda b: b.b2}
            for n in BLOCK_PARAMS:
                if self.has[n]:
                    for i in range(self.layers):
                        out.append((f"{self.layer}.{n}", i,
                                    (lambda g, i: lambda m: g(m.blocks[i]))(per_layer[n], i)))
            return out

        @torch.no_grad()
        def load_plan_tensors(self, tensors):
            """Copies {plan name: tensor of the plan's stored shape} into the model."""
            for name, shape in self.plan_shapes.items():
                if name not in tensors:
                    sys.exit(f"torch_gpt: the weights have no tensor '{name}'")
                if list(tensors[name].shape) != shape:
                    sys.exit(f"torch_gpt: weights '{name}' have shape {list(tensors[name].shape)},"
                             f" the plan says {shape}")
            for name, layer, get in self._pieces():
                src = tensors[name] if layer is None else tensors[name][layer]
                dst = get(self)
                dst.copy_(src.reshape(dst.shape).to(dst.dtype))

        @torch.no_grad()
        def plan_state_dict(self, grads=False):
            """The weights (or with grads=True their gradients) in the plan's names and stored
            shapes, layer tensors stacked over `layers`."""
            parts = {}
            for name, layer, get in self._pieces():
                view = get(self)
                if grads:
                    base = view if view._base is None else view._base
                    if base.grad is None:
                        raise RuntimeError(f"{name} has no gradient")
                    view = base.grad.as_strided(view.size(), view.stride(),
                                                view.storage_offset() - base.storage_offset())
                parts.setdefault(name, []).append(view.detach().clone())
            out = {}
            for name, shape in self.plan_shapes.items():
                ts = parts[name]
                t = ts[0] if name in MODEL_PARAMS else torch.stack(ts)
                out[name] = t.reshape(shape).contiguous()
            return out

        @torch.no_grad()
        def init_from_plan(self, generator):
            """Initial values by the plan's init kinds with torch's RNG (not mtrun's values)."""
            tensors = {}
            for name, shape in self.plan_shapes.items():
                init = self.plan.params[name].get("init", {"kind": "zeros"})
                kind, args = init.get("kind", "zeros"), init.get("args", [])
                t = torch.empty(shape)
                if kind == "zeros":
                    t.zero_()
                elif kind == "ones":
                    t.fill_(1.0)
                elif kind == "constant":
                    t.fill_(float(args[0]))
                elif kind == "normal":
                    t.normal_(float(args[1]) if len(args) > 1 else 0.0, float(args[0]),
                              generator=generator)
                elif kind == "uniform":
                    t.uniform_(float(args[0]), float(args[1]), generator=generator)
                else:
                    sys.exit(f"torch_gpt: unknown init kind '{kind}' of {name}")
                tensors[name] = t
            self.load_plan_tensors(tensors)

        def param_groups(self, weight_decay):
            """AdamW groups: decayed where the plan entry says "weight_decay": true."""
            decay, no_decay = [], []
            seen = {}
            for name, layer, get in self._pieces():
                # Find the nn.Parameter that holds this piece (a slice of wqkv/bqkv or itself).
                holder = get(self)
                base = holder if isinstance(holder, nn.Parameter) else holder._base
                wd = bool(self.plan.params[name].get("weight_decay", False))
                key = id(base)
                if key in seen:
                    if seen[key][1] != wd:
                        sys.exit(f"torch_gpt: {name} shares a tensor with parameters of another "
                                 "weight-decay setting")
                    continue
                seen[key] = (base, wd)
                (decay if wd else no_decay).append(base)
            ours = {id(p) for p in self.parameters()}
            assert ours == set(seen), "every parameter belongs to exactly one plan entry"
            return [{"params": decay, "weight_decay": weight_decay},
                    {"params": no_decay, "weight_decay": 0.0}]

        # -- the computation ---------------------------------------------------------------

        def forward(self, tokens, labels, dropout=True):
            """Mean cross-entropy of the micro-batch tokens/labels (int64 [batch, seq])."""
            B, S = tokens.shape
            if S != self.seq:
                raise ValueError(f"sequence length {S}, the plan's seq is {self.seq}")
            p = self.dropout_p if (dropout and self.training) else 0.0
            H, nh, hd = self.hidden, self.heads, self.head_dim
            x = F.embedding(tokens, self.wte) + self.wpe
            if p:
                x = F.dropout(x, p)
            x = x.view(B * S, H)
            for b in self.blocks:
                h = F.layer_norm(x, (H,), b.ln1_g, b.ln1_b, self.eps)
                qkv = (torch.addmm(b.bqkv, h, b.wqkv) if b.bqkv is not None else h @ b.wqkv)
                q, k, v = qkv.view(B, S, 3, nh, hd).permute(2, 0, 3, 1, 4).unbind(0)  # [B, nh, S, hd]
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                   scale=1.0 / math.sqrt(hd))
                a = a.transpose(1, 2).reshape(B * S, nh * hd)
                o = torch.addmm(b.bo, a, b.wo) if b.bo is not None else a @ b.wo
                if p:
                    o = F.dropout(o, p)
                x = x + o
                h = F.layer_norm(x, (H,), b.ln2_g, b.ln2_b, self.eps)
                f = torch.addmm(b.b1, h, b.w1) if b.b1 is not None else h @ b.w1
                f = F.gelu(f, approximate="tanh")
                o = torch.addmm(b.b2, f, b.w2) if b.b2 is not None else f @ b.w2
                if p:
                    o = F.dropout(o, p)
                x = x + o
            h = F.layer_norm(x, (H,), self.lnf_g, self.lnf_b, self.eps)
            logits = h @ self.wte.t()  # tied embeddings: contract(.., wte, over = hidden)
            return F.cross_entropy(logits, labels.reshape(B * S))

    return GPT


def loss_of(model, tokens, labels):
    """The loss of one micro-batch without dropout and without gradients: for equivalence
    checks against mtc's `forward` (tokens, labels: integer arrays [batch, seq])."""
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            return float(model(torch.as_tensor(tokens, dtype=torch.long),
                               torch.as_tensor(labels, dtype=torch.long), dropout=False))
    finally:
        model.train(was)


# ----------------------------------------------------------------------------------------
# Training


def make_optimizer(model, settings, impl):
    groups = model.param_groups(settings.weight_decay)
    kw = dict(lr=settings.lr_at(0), betas=settings.betas, eps=settings.eps)
    if impl == "fused":
        try:
            return torch.optim.AdamW(groups, fused=True, **kw), "fused"
        except (RuntimeError, TypeError, ValueError):
            impl = "foreach"
    if impl == "foreach":
        return torch.optim.AdamW(groups, foreach=True, **kw), "foreach"
    return torch.optim.AdamW(groups, foreach=False, **kw), "for-loop"


def make_batches(plan, args, steps, micro, global_batch, device="cpu"):
    """[(tokens, labels) per micro-batch] per step, int64 torch tensors on `device`."""
    seq, vocab = plan.dim("seq"), plan.dim("vocab")
    n_micro = global_batch // micro
    out = []
    if args.data == "synthetic":
        task = SyntheticTask(vocab, plan.seed)
        for step in range(steps):
            t, l = task.batch(step, 0, global_batch, seq)
            out.append([(torch.from_numpy(t[m * micro:(m + 1) * micro]).to(device),
                         torch.from_numpy(l[m * micro:(m + 1) * micro]).to(device))
                        for m in range(n_micro)])
    else:
        g = torch.Generator().manual_seed(plan.seed)
        for step in range(steps):
            out.append([(torch.randint(vocab, (micro, seq), generator=g).to(device),
                         torch.randint(vocab, (micro, seq), generator=g).to(device))
                        for _ in range(n_micro)])
    return out


def train_step(model, opt, settings, step, micro_batches, dropout, bf16=False, device="cpu"):
    for group in opt.param_groups:
        group["lr"] = settings.lr_at(step)
    opt.zero_grad(set_to_none=True)
    n = len(micro_batches)
    total = 0.0
    for tokens, labels in micro_batches:
        # bf16: PyTorch's autocast (fp32 parameters and gradients, products in bf16 on
        # oneDNN or cuBLAS, softmax and norms in fp32), the recipe of mtc's `--bf16`.
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            loss = model(tokens, labels, dropout=dropout)
        (loss / n if n > 1 else loss).backward()
        total += loss.item()
    params = [p for g in opt.param_groups for p in g["params"]]
    if settings.clip_grad > 0:
        norm = torch.nn.utils.clip_grad_norm_(params, settings.clip_grad, foreach=True)
    else:
        norm = torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
    opt.step()
    if device == "cuda":
        torch.cuda.synchronize()  # the step's time includes its kernels
    return total / n, float(norm)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Prints one JSON object on stdout (see bench/README.md).")
    ap.add_argument("--plan", required=True, help="plan directory written by `mtc compile`")
    ap.add_argument("--weights", help="initial weights (`mtrun PLAN --steps 0 "
                    "--export-safetensors FILE`); "
                    "without it the plan's init kinds are drawn with torch's RNG")
    ap.add_argument("--steps", type=int, default=6,
                    help="optimizer steps; 0: only print the initial loss (no dropout) of step "
                    "0's first micro-batch")
    ap.add_argument("--warmup", type=int, default=1,
                    help="leading steps left out of the timing (default 1)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--micro-batch", type=int, help="default: the plan's batch")
    ap.add_argument("--global-batch", type=int, help="default: the plan's train { global_batch }")
    ap.add_argument("--no-dropout", action="store_true", help="train without dropout")
    ap.add_argument("--data", choices=["synthetic", "random"], default="synthetic",
                    help="mtrun's synthetic task (default) or uniform random tokens and labels")
    ap.add_argument("--adamw", choices=["fused", "foreach", "for-loop"], default="fused",
                    help="torch.optim.AdamW implementation (default fused, falling back to "
                    "foreach where this torch has no fused CPU AdamW)")
    ap.add_argument("--bf16", action="store_true",
                    help="bf16 mixed precision: the forward under torch.autocast(DEVICE, bfloat16)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where the model trains (cuda: the first GPU, TF32 off as in mtc's "
                    "fp32 GEMMs)")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the model (inductor; needs a C++ compiler)")
    ap.add_argument("--metrics", help="also write one JSON line per step here (like mtrun's)")
    ap.add_argument("--save-weights", help="write the trained weights, in the plan's names, to "
                    "this safetensors file")
    ap.add_argument("--json-out", help="also write the result object to this file")
    ap.add_argument("--quiet", action="store_true", help="no per-step lines on stderr")
    args = ap.parse_args(argv)

    if args.threads < 1:
        ap.error("--threads must be positive")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))

    global torch, F
    import torch as _torch
    import torch.nn.functional as _F
    torch, F = _torch, _F
    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("torch_gpt: --device cuda, but torch sees no GPU")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass

    plan = Plan(args.plan)
    settings = TrainSettings(plan.train)
    micro = args.micro_batch or plan.dims.get("batch") or int(plan.train.get("micro_batch", 1))
    global_batch = args.global_batch or int(plan.train.get("global_batch", micro))
    if global_batch % micro:
        ap.error(f"--global-batch {global_batch} is not a multiple of --micro-batch {micro}")
    dropout = settings.dropout and not args.no_dropout

    dtypes = {p.get("dtype", "f32") for p in plan.params.values()}
    if dtypes != {"f32"}:
        sys.exit(f"torch_gpt: only f32 plans are supported, this one has {sorted(dtypes)}")

    torch.manual_seed(plan.seed)
    GPT = build_model_class()
    model = GPT(plan)
    if args.weights:
        from safetensors.torch import load_file
        model.load_plan_tensors(load_file(args.weights))
    else:
        model.init_from_plan(torch.Generator().manual_seed(plan.seed))
    model.to(args.device)
    model.train()
    seq = plan.dim("seq")

    if args.steps == 0:
        (tokens, labels), = make_batches(plan, args, 1, micro, micro, args.device)[0]
        loss = loss_of(model, tokens, labels)
        result = {"model": plan.model, "loss": loss, "ln_vocab": math.log(plan.dim("vocab")),
                  "micro_batch": micro, "seq": seq, "data": args.data}
        print(json.dumps(result))
        return 0

    opt, impl = make_optimizer(model, settings, args.adamw)
    if args.compile:
        model.forward = torch.compile(model.forward, dynamic=False)

    batches = make_batches(plan, args, args.steps, micro, global_batch, args.device)
    tokens_per_step = global_batch * seq
    metrics = open(args.metrics, "w") if args.metrics else None
    records = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        loss, norm = train_step(model, opt, settings, step, batches[step], dropout, args.bf16,
                                args.device)
        dt = time.perf_counter() - t0
        rec = {"step": step, "loss": loss, "tokens_per_s": tokens_per_step / dt,
               "step_ms": dt * 1e3, "lr": settings.lr_at(step), "grad_norm": norm}
        records.append(rec)
        if metrics:
            metrics.write(json.dumps(rec) + "\n")
            metrics.flush()
        if not args.quiet:
            print(f"torch_gpt: step {step} loss {loss:.4f} {dt * 1e3:.1f} ms "
                  f"{tokens_per_step / dt:.0f} tokens/s", file=sys.stderr)
    if metrics:
        metrics.close()

    timed = records[args.warmup:] if len(records) > args.warmup else records[-1:]
    result = {
        "model": plan.model,
        "plan": os.path.abspath(args.plan),
        "parameters": plan.num_parameters(),
        "threads": args.threads,
        "micro_batch": micro,
        "global_batch": global_batch,
        "seq": seq,
        "tokens_per_step": tokens_per_step,
        "steps": args.steps,
        "timed_steps": len(timed),
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in timed),
        "step_ms": statistics.fmean(r["step_ms"] for r in timed),
        "step_ms_median": statistics.median(r["step_ms"] for r in timed),
        "initial_loss": records[0]["loss"],
        "final_loss": records[-1]["loss"],
        "losses": [r["loss"] for r in records],
        "dropout": dropout,
        "data": args.data,
        "adamw": impl,
        "compile": bool(args.compile),
        "bf16": bool(args.bf16),
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
    }
    if args.save_weights:
        from safetensors.torch import save_file
        save_file(model.plan_state_dict(), args.save_weights, metadata={"format": "torch_gpt"})
    text = json.dumps(result)
    if args.json_out:
        with open(args.json_out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
