//===- Passes.td - kernel fusion passes ----------------------*- tablegen -*-===//

#ifndef MTC_COMPILER_FUSION_PASSES_TD
#define MTC_COMPILER_FUSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseElementwisePass : Pass<"mtc-fuse-elementwise"> {
  let summary = "Fuse chains of elementwise linalg ops into their consumers";
  let description = [{
    mt-to-linalg makes one `linalg.generic` (one loop nest, one buffer) per op. This pass
    fuses every elementwise producer (all loops parallel, e.g. `add`, `gelu`, a bias
    broadcast, a dropout scale) into the `linalg.generic` that consumes it, when the
    producer has no other use, so that a chain of elementwise ops, and an elementwise chain
    feeding a reduction, becomes one loop nest without intermediate buffers. It uses
    upstream linalg's elementwise fusion patterns; named ops (`linalg.batch_matmul`, which
    becomes a BLAS call, `linalg.fill`, `linalg.transpose`) are not fused, so a contraction
    stays one library call. Producers with several uses are not fused: that would recompute
    them. Nor is a producer whose body is costly per element (a call, e.g. libm's sin, cos
    and pow, or a transcendental `math` op; FusionRule.h's `isCostlyPerElement`) fused into
    a consumer that reads it broadcast (through a map that is not a permutation): its body
    would run once per iteration of the consumer instead of once per element (rope's cos and
    sin tables, per position, read by every batch row and head). Cheap producers (an iota, a
    cast, a scale) are still fused into broadcasting consumers.

    A fused producer whose body calls a function (dropout's decision,
    `mtc_dropout_keep_element`) is not trivially dead to MLIR: the upstream patterns strip
    its results and leave a loop that computes nothing. The pass erases such result-less
    generics on tensors, relying on the kernel contract that functions called from a
    kernel body are pure (MTToLinalg.h).
  }];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

#endif // MTC_COMPILER_FUSION_PASSES_TD
