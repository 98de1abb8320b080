//===- Passes.td - codegen passes ----------------------------*- tablegen -*-===//

#ifndef MTC_COMPILER_CODEGEN_PASSES_TD
#define MTC_COMPILER_CODEGEN_PASSES_TD

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
    merge, iota; gather, embedding_grad; rope; dropout (through the external
    `mtc_dropout_scale`, see MTToLinalg.h); topk, topk_grad; dispatch, combine,
    combine_grad, load_balancing_loss(_grad); repeat (an `scf.for` over the instances).
    `mt-decompose` first rewrites norms, softmax, attention and cross-entropy into these.
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

def ApproximateMathPass : Pass<"mtc-approximate-math"> {
  let summary = "Replace f32 transcendental functions with inline polynomial approximations";
  let description = [{
    Rewrites f32 `math.exp`, `math.expm1`, `math.tanh`, `math.log`, `math.log1p`,
    `math.log2` and `math.erf` (scalars or vectors) into upstream MLIR's polynomial
    approximations: arithmetic, comparisons and selects with no call. In a kernel loop a
    call of libm's `expf` or `tanhf` keeps LLVM from vectorising the loop and costs a call
    and a slow path for underflow (softmax exponentiates the causal mask's -3.4e38 on every
    masked score); the approximations vectorise and clamp instead. They are accurate to a
    few ulp in f32 (the CPU backend's tests compare them with libm).

    f64 operations (the gradient checks' kernels) and other functions (`sin`/`cos` of rope
    angles, whose range reduction the approximation does only coarsely) keep their libm
    calls.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def ReductionLoopOrderPass : Pass<"mtc-reduction-loop-order"> {
  let summary = "Order each reduction's loops like the layout of the tensor it reads";
  let description = [{
    mt-to-linalg iterates a reduction over the result's dimensions, then the reduced ones,
    so that the parallel loops are outer (what the GPU backend maps to threads). On the CPU
    that order reads the input with a stride whenever a kept dimension is the input's
    innermost: a bias gradient, the sum of `[batch, seq, hidden]` over `batch` and `seq`,
    becomes `hidden` outer loops over strided columns, which LLVM vectorises only with
    gathers. This pass interchanges the loops of every `linalg.generic` with a reduction
    iterator to follow the layout of its input read through a permutation (the largest
    such input): the innermost loop walks the input's contiguous dimension, and a kept
    innermost dimension becomes a contiguous accumulation into the result row.

    Each result element still accumulates the same elements in the same order (the
    reduced dimensions keep their relative order). Where the innermost loop then reduces
    (a row sum: softmax's denominator, a norm's mean, cross-entropy's log-sum-exp), the op
    combining each result with its accumulator gets `fastmath<reassoc>`, so that LLVM keeps
    partial sums in vector lanes instead of adding one element at a time: those sums round
    differently from left to right (deterministically, for a given target CPU).
  }];
  let dependentDialects = ["::mlir::affine::AffineDialect", "::mlir::linalg::LinalgDialect"];
}

def GemmOperandViewsPass : Pass<"mtc-gemm-operand-views", "::mlir::ModuleOp"> {
  let summary = "Read the transposed operands of f32 batched matrix products in place";
  let description = [{
    On buffers (after bufferization, before deallocations are placed). mt-to-linalg copies
    each operand of an f32 contraction into the canonical order of a batched matrix product
    (`linalg.transpose` into a fresh buffer, collapsed to rank 3); the runtime's GEMM reads
    any strides. An operand `collapse_shape(T)`, T written by `linalg.transpose(S)`, becomes
    a strided view of S (`memref.reinterpret_cast`) when each of its three dimensions
    gathers dimensions of S that merge into one stride, and the transpose and T are erased
    when nothing else reads them. A batch over two dimensions that are not neighbours in S
    (attention's batch and heads) splits into an `scf.for` over the outer part of products
    on views offset by the loop index. S must not be written between the transpose and the
    product (both in one block, nothing between them that may write S's allocation).
    The products compute the same sums in the same order.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
  ];
}

#endif // MTC_COMPILER_CODEGEN_PASSES_TD
