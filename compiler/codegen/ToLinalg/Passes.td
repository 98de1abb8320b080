//===- Passes.td - mt to linalg ------------------------------*- tablegen -*-===//

#ifndef MTC_COMPILER_CODEGEN_TOLINALG_PASSES_TD
#define MTC_COMPILER_CODEGEN_TOLINALG_PASSES_TD

include "mlir/Pass/PassBase.td"

def MTToLinalgPass : Pass<"mt-to-linalg", "::mlir::ModuleOp"> {
  let summary = "Lower mt functions (after mt-decompose) to linalg, tensor and scf";
  let description = [{
    Rewrites every `func.func` of the module onto builtin tensors and `linalg.generic` ops,
    the input of the CPU (x86 shared object) and GPU (PTX) backends.

    A `!mt.tensor<[batch=2, seq=4, hidden=8], f32>` becomes `tensor<2x4x8xf32>` (its
    physical order), a scalar `tensor<f32>`. The indexing maps come from the dimension
    names: an elementwise op (and `mt.cast`, `mt.transpose`, `mt.broadcast`) iterates over
    its result's dimensions and each operand's map picks its own dimensions by name, so
    named broadcasting and different dimension orders are just maps. A reduction iterates
    over its operand's dimensions (the reduced ones as `reduction` iterators) into a
    `linalg.fill` of the identity (0, or -inf for `reduce_max`); `reduce_mean` divides the
    sum by the element count. A contraction iterates over the result's dimensions (parallel)
    followed by the contracted ones (reduction). `mt.constant` operands of elementwise ops
    are folded into the kernel body as `arith.constant`s.

    Supported: constant; add, sub, mul, div, max, pow, greater (1.0 / 0.0); neg, exp, log,
    sqrt, rsqrt, tanh, sigmoid, relu, silu, gelu (erf or tanh form), gelu_grad, cos; cast;
    transpose; broadcast; reduce_sum, reduce_mean, reduce_max; contract; rename, split,
    merge, iota; gather, embedding_grad; rope; dropout (decided in the kernel
    from the runtime's key, see MTToLinalg.h); topk, topk_grad; dispatch, combine,
    combine_grad, load_balancing_loss(_grad); repeat (an `scf.for` over the instances);
    attention and attention_grad, fused (they arrive whole only under the module attribute
    `mt.fused_attention = <block>`, `mtc compile --fused-attention`): FlashAttention-2's
    forward and backward as `scf.for` loops over blocks of `block` query and key positions
    (the largest divisor of the sequence not above it; 64 without the attribute), causal
    blocks above the diagonal skipped, each block pair `linalg.batch_matmul`s and
    elementwise/reduction generics on [batch x kv heads, rows, head_dim] tensors, an online
    softmax forward and probabilities recomputed from the saved log-sum-exp backward
    (AttentionToLinalg.cpp), with document `positions` the keys before each query's
    document masked too (the ids broadcast into the rows); they compute in f32 or f64.
    `mt-decompose` first rewrites norms, softmax, attention (unless fused) and cross-entropy
    into these.
    Any other `mt` op inside a function is reported by name and the pass fails. `mt` ops
    outside functions (`mt.param`, ...) are left alone.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

#endif // MTC_COMPILER_CODEGEN_TOLINALG_PASSES_TD
