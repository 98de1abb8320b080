//===- Passes.td - lowering passes --------------------------*- tablegen -*-===//

#ifndef MTC_COMPILER_LOWERING_PASSES_TD
#define MTC_COMPILER_LOWERING_PASSES_TD

include "mlir/Pass/PassBase.td"

def MTDecomposePass : Pass<"mt-decompose", "::mlir::ModuleOp"> {
  let summary = "Rewrite the mt ops without a kernel of their own into the core ops";
  let description = [{
    Kernel generation handles a small core of `mt` ops: constants, the elementwise ops
    (with named broadcasting), `transpose`, `broadcast`, the reductions, `contract`, and the
    ops that stay special (gather, embedding_grad, dropout, rope, topk, topk_grad, the MoE
    routing ops, split, merge, rename, repeat, param_ref, assign). This pass rewrites, in
    every `func.func`, the composite ops into that core; every replacement has exactly the
    type of the op it replaces.

    - `mt.softmax` over `d`: `e = exp(x - reduce_max(x over d))`, `e / reduce_sum(e over d)`.
    - `mt.layer_norm`: `c = x - reduce_mean(x)`, `c * rsqrt(reduce_mean(c * c) + eps) * scale
      (+ bias)` (biased variance, eps inside the square root).
    - `mt.rms_norm`: `x * rsqrt(reduce_mean(x * x) + eps) * scale`.
    - `mt.attention`: the key and value dimension `seq` is renamed `<seq>_kv`; for
      grouped-query attention the query's `heads` is split into (`kv_heads`,
      `<heads>_group`) so that query and key share `kv_heads`. Scores are
      `contract(q, k over head_dim) * scale`, plus, when causal, a mask of half the element
      type's largest finite value, negated, where the key position exceeds the query
      position; probabilities are the softmax above over `<seq>_kv`, and the output is
      `contract(p, v over <seq>_kv)`, its heads merged back.
    - `mt.attention_grad`: p recomputed as above; `dv = p^T do`, `dp = do v^T`,
      `ds = scale * p * (dp - sum(dp * p over <seq>_kv))`, `dq = ds k`, `dk = ds^T q`, the
      key and value gradients summed over the query heads of a group.
    - `mt.cross_entropy`: `mean(logsumexp(x) - sum(x * onehot(labels)))`, logsumexp in the
      stable form; `mt.cross_entropy_grad`: `(softmax(x) - onehot(labels)) * loss_grad /
      positions`.
    - `mt.z_loss`: `mean(logsumexp(x)^2)` over the positions, logsumexp in the stable form.

    The one-hot of the labels is `mt.topk_grad` scattering ones at the labels (a unit `k`
    dimension `<dim>_label` is added to both); the positions of the causal mask are
    `mt.iota` (computed in f32 when the scores' type cannot hold every position exactly).
    New dimension names are fresh: they clash with no dimension of the rewritten op's
    operands, and a name that already exists in the module is reused only with its size.

    An op reading or producing bf16 or f16 tensors is decomposed in f32: its low-precision
    operands are cast to f32 and its results cast back, so that mixed precision computes
    the statistics, sums and products of these ops in f32 (the tensors between kernels stay
    in the low type). The ops it creates for such an op (the casts included, the constants
    not) carry `mt.stored_as = bf16` (or f16): the cost model counts their f32 tensors at the
    low type's size and their casts as nothing (dialects/mt/Utils/TensorSize.h).

    Under ring attention (the module's `mt.parallel` has `cp` above 1 and `cp_comm_type =
    p2p`) `mt.attention` and `mt.attention_grad` stay whole, with or without document
    positions: their partition rule builds the block steps of the ring from the same pieces
    (`mtp-partition`).

    Under fused attention (the module attribute `mt.fused_attention = <block>`, `mtc
    compile --fused-attention`) they stay whole too, for mt-to-linalg's FlashAttention-2
    loops; one of bf16 or f16 tensors is replaced by its f32 copy between casts (all marked
    `mt.stored_as`). Attention of queries over keys of another length is still decomposed.
    Fused attention with context parallelism (cp above 1) is an error: its loops need the
    whole sequence on a rank.
  }];
  let dependentDialects = ["::mtc::mt::MTDialect"];
}

#endif // MTC_COMPILER_LOWERING_PASSES_TD
