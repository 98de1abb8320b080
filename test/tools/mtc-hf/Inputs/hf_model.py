#!/usr/bin/env python3
"""Hugging Face model directories for the mtc-hf tests, with numpy alone (no torch).

  hf_model.py make PLAN OUT [--dtype F32|F16|BF16] [--shards N] [--drop NAME] [--add NAME]
                            [--reshape NAME] [--as-i64 NAME] [--config KEY=JSON | KEY=]
                            [--tied-head] [--bare-names]
      a random GPT2LMHeadModel or LlamaForCausalLM (from the plan's parameter names) whose
      config.json matches PLAN, in model.safetensors or N shards with the index
  hf_model.py same A B
      the model.safetensors of A and B hold the same tensors bit for bit
  hf_model.py check HF CKPT
      the layouts: every HF tensor of HF (F32) against the mtc checkpoint CKPT's parameters
      by the documented maps, Llama's q_proj and k_proj through the rotary permutation
"""

import json
import os
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def write_safetensors(path, tensors, metadata=None):
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, array) in tensors.items():
        if dtype == "BF16":
            data = (np.ascontiguousarray(array, np.float32).view(np.uint32) >> 16).astype("<u2")
        else:
            data = np.ascontiguousarray(array, DTYPES[dtype])
        raw = data.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        dtype = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8"}[t["dtype"]]
        out[name] = (t["dtype"], np.frombuffer(data[8 + n + b:8 + n + e], dtype)
                     .reshape(t["shape"]))
    return out


def plan_model(plan):
    pj = json.load(open(os.path.join(plan, "plan.json")))
    params = {p["name"]: p for p in pj["params"]}
    d = pj["dims"]
    layers = next(p["instances"] for p in pj["params"] if p.get("layer"))
    arch = ("gpt2" if "wte" in params else "mixtral" if "block.router" in params
            else "llama")
    return arch, d, layers, params


def make(args):
    plan, out = args[0], args[1]
    opts = {"dtype": "F32", "shards": 1, "drop": [], "add": [], "reshape": [], "as-i64": [],
            "config": [], "tied-head": False, "bare-names": False}
    i = 2
    while i < len(args):
        key = args[i][2:]
        if key in ("tied-head", "bare-names"):
            opts[key] = True
            i += 1
            continue
        value = args[i + 1]
        if isinstance(opts[key], list):
            opts[key].append(value)
        else:
            opts[key] = int(value) if key == "shards" else value
        i += 2
    arch, d, L, params = plan_model(plan)
    rng = np.random.default_rng(7)
    V, D, H, hd, F, S = d["vocab"], d["hidden"], d["heads"], d["head_dim"], d["ffn"], d["seq"]
    K = d.get("kv_heads", H)

    def w(*shape):
        return (0.1 * rng.standard_normal(shape)).astype(np.float32)

    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    t = {}
    if arch == "gpt2":
        config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V,
                  "n_positions": S, "n_embd": D, "n_layer": L, "n_head": H, "n_inner": None,
                  "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05,
                  "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1}
        t["transformer.wte.weight"] = w(V, D)
        t["transformer.wpe.weight"] = w(S, D)
        for l in range(L):
            h = f"transformer.h.{l}."
            t[h + "ln_1.weight"], t[h + "ln_1.bias"] = norm(D), w(D)
            t[h + "attn.c_attn.weight"], t[h + "attn.c_attn.bias"] = w(D, 3 * D), w(3 * D)
            t[h + "attn.c_proj.weight"], t[h + "attn.c_proj.bias"] = w(D, D), w(D)
            t[h + "ln_2.weight"], t[h + "ln_2.bias"] = norm(D), w(D)
            t[h + "mlp.c_fc.weight"], t[h + "mlp.c_fc.bias"] = w(D, F), w(F)
            t[h + "mlp.c_proj.weight"], t[h + "mlp.c_proj.bias"] = w(F, D), w(D)
        t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = norm(D), w(D)
        if opts["tied-head"]:
            t["lm_head.weight"] = t["transformer.wte.weight"].copy()
        if opts["bare-names"]:
            t = {k[len("transformer."):] if k.startswith("transformer.") else k: v
                 for k, v in t.items()}
    elif arch == "mixtral":
        E, k = d["experts"], d["topk"]
        config = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
                  "vocab_size": V, "hidden_size": D, "intermediate_size": F,
                  "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": K,
                  "max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
                  "rope_theta": 1000000.0, "hidden_act": "silu", "tie_word_embeddings": False,
                  "num_local_experts": E, "num_experts_per_tok": k, "sliding_window": None,
                  "router_jitter_noise": 0.0, "output_router_logits": False,
                  "router_aux_loss_coef": 0.02}
        t["model.embed_tokens.weight"] = w(V, D)
        for l in range(L):
            h = f"model.layers.{l}."
            t[h + "self_attn.q_proj.weight"] = w(H * hd, D)
            t[h + "self_attn.k_proj.weight"] = w(K * hd, D)
            t[h + "self_attn.v_proj.weight"] = w(K * hd, D)
            t[h + "self_attn.o_proj.weight"] = w(D, H * hd)
            t[h + "block_sparse_moe.gate.weight"] = w(E, D)
            for e in range(E):
                x = f"{h}block_sparse_moe.experts.{e}."
                t[x + "w1.weight"], t[x + "w2.weight"] = w(F, D), w(D, F)
                t[x + "w3.weight"] = w(F, D)
            t[h + "input_layernorm.weight"] = norm(D)
            t[h + "post_attention_layernorm.weight"] = norm(D)
        t["model.norm.weight"], t["lm_head.weight"] = norm(D), w(V, D)
    else:
        config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                  "vocab_size": V, "hidden_size": D, "intermediate_size": F,
                  "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": K,
                  "max_position_embeddings": 2048, "rms_norm_eps": 1e-06,
                  "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False}
        t["model.embed_tokens.weight"] = w(V, D)
        for l in range(L):
            h = f"model.layers.{l}."
            t[h + "self_attn.q_proj.weight"] = w(H * hd, D)
            t[h + "self_attn.k_proj.weight"] = w(K * hd, D)
            t[h + "self_attn.v_proj.weight"] = w(K * hd, D)
            t[h + "self_attn.o_proj.weight"] = w(D, H * hd)
            t[h + "mlp.gate_proj.weight"], t[h + "mlp.up_proj.weight"] = w(F, D), w(F, D)
            t[h + "mlp.down_proj.weight"] = w(D, F)
            t[h + "input_layernorm.weight"] = norm(D)
            t[h + "post_attention_layernorm.weight"] = norm(D)
        t["model.norm.weight"], t["lm_head.weight"] = norm(D), w(V, D)
    for name in opts["drop"]:
        del t[name]
    for name in opts["add"]:
        t[name] = w(4)
    for name in opts["reshape"]:
        t[name] = w(*[n + 1 for n in t[name].shape])
    for kv in opts["config"]:
        key, _, value = kv.partition("=")
        if value:
            config[key] = json.loads(value)
        else:
            del config[key]
    dtypes = {name: ("I64" if name in opts["as-i64"] else opts["dtype"]) for name in t}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    names = list(t)
    if opts["shards"] == 1:
        write_safetensors(os.path.join(out, "model.safetensors"),
                          {n: (dtypes[n], t[n]) for n in names}, {"format": "pt"})
        return
    n = opts["shards"]
    weight_map = {}
    for s in range(n):
        file = f"model-{s + 1:05d}-of-{n:05d}.safetensors"
        part = names[s::n]
        write_safetensors(os.path.join(out, file), {k: (dtypes[k], t[k]) for k in part},
                          {"format": "pt"})
        weight_map.update({k: file for k in part})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)


def same(a, b):
    ta = read_safetensors(os.path.join(a, "model.safetensors"))
    tb = read_safetensors(os.path.join(b, "model.safetensors"))
    if sorted(ta) != sorted(tb):
        sys.exit(f"different names: {sorted(set(ta) ^ set(tb))}")
    for k in ta:
        (da, xa), (db, xb) = ta[k], tb[k]
        if da != db or xa.shape != xb.shape or xa.tobytes() != xb.tobytes():
            sys.exit(f"{k}: {da} {xa.shape} vs {db} {xb.shape}, or different bytes")
    print(f"same: {len(ta)} tensors bit for bit")


def check(hf, ckpt):
    config = json.load(open(os.path.join(hf, "config.json")))
    t = {k: v for k, (_, v) in read_safetensors(os.path.join(hf, "model.safetensors")).items()}
    p = {k[len("param:"):]: v for k, (_, v) in
         read_safetensors(os.path.join(ckpt, "checkpoint.safetensors")).items()
         if k.startswith("param:")}
    checked = 0

    def eq(name, expected):
        nonlocal checked
        if t[name].shape != expected.shape or not np.array_equal(t[name], expected):
            sys.exit(f"{name} is not the checkpoint's parameter in the documented layout")
        checked += 1

    if config["model_type"] == "gpt2":
        L, D = config["n_layer"], config["n_embd"]
        eq("transformer.wte.weight", p["wte"])
        eq("transformer.wpe.weight", p["wpe"])
        for l in range(L):
            h = f"transformer.h.{l}."
            eq(h + "attn.c_attn.weight", np.concatenate(
                [p[f"block.{x}"][l].reshape(D, D) for x in ("wq", "wk", "wv")], axis=1))
            eq(h + "attn.c_attn.bias", np.concatenate(
                [p[f"block.{x}"][l].reshape(D) for x in ("bq", "bk", "bv")]))
            eq(h + "attn.c_proj.weight", p["block.wo"][l].reshape(D, D))
            eq(h + "mlp.c_fc.weight", p["block.w1"][l])
            eq(h + "mlp.c_proj.weight", p["block.w2"][l])
            eq(h + "ln_1.weight", p["block.ln1.g"][l])
            eq(h + "ln_2.bias", p["block.ln2.b"][l])
        eq("transformer.ln_f.weight", p["lnf.g"])
    else:
        L, D = config["num_hidden_layers"], config["hidden_size"]
        H, K = config["num_attention_heads"], config["num_key_value_heads"]
        hd = config.get("head_dim") or D // H
        # HF row h*hd + j*hd/2 + i of q_proj/k_proj is the plan's column (h, 2i + j).
        perm = np.array([2 * (r % (hd // 2)) + r // (hd // 2) for r in range(hd)])
        eq("model.embed_tokens.weight", p["embed"])
        for l in range(L):
            h = f"model.layers.{l}."
            eq(h + "self_attn.q_proj.weight",
               p["block.wq"][l][:, :, perm].reshape(D, H * hd).T)
            eq(h + "self_attn.k_proj.weight",
               p["block.wk"][l][:, :, perm].reshape(D, K * hd).T)
            eq(h + "self_attn.v_proj.weight", p["block.wv"][l].reshape(D, K * hd).T)
            eq(h + "self_attn.o_proj.weight", p["block.wo"][l].reshape(H * hd, D).T)
            if config["model_type"] == "mixtral":
                eq(h + "block_sparse_moe.gate.weight", p["block.router"][l].T)
                for e in range(config["num_local_experts"]):
                    x = f"{h}block_sparse_moe.experts.{e}."
                    eq(x + "w1.weight", p["block.w1"][l][e].T)
                    eq(x + "w3.weight", p["block.w3"][l][e].T)
                    eq(x + "w2.weight", p["block.w2"][l][e].T)
            else:
                eq(h + "mlp.gate_proj.weight", p["block.w1"][l].T)
                eq(h + "mlp.up_proj.weight", p["block.w3"][l].T)
                eq(h + "mlp.down_proj.weight", p["block.w2"][l].T)
            eq(h + "input_layernorm.weight", p["block.attn_norm"][l])
            eq(h + "post_attention_layernorm.weight", p["block.ffn_norm"][l])
        eq("model.norm.weight", p["norm"])
        eq("lm_head.weight", p["lm_head"].T)
    print(f"layouts: {checked} tensors as documented")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2:])
    elif cmd == "same":
        same(sys.argv[2], sys.argv[3])
    elif cmd == "check":
        check(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown command {cmd}")
