//===- FusionRule.h - which kernels mtc's fusion merges ---------*- C++ -*-===//
//
// The one statement of mtc's kernel fusion, shared by the pass that performs it
// (mtc-fuse-elementwise, on linalg) and by the cost model that prices its kernels
// (compiler/analysis/FunctionCost.h, on the partitioned mt step, where each op's loop nest
// is the one mt-to-linalg gives it: kernelShapeOf).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_FUSION_FUSIONRULE_H
#define MTC_COMPILER_FUSION_FUSIONRULE_H

#include <cstdint>

namespace mlir {
class Operation;
} // namespace mlir

namespace mtc::fusion {

/// A kernel as the fusion sees it.
enum class LoopNest {
  /// Nothing the fusion merges: a library call (a GEMM), a named linalg op (fill,
  /// transpose), a reshape, a runtime or function call, a gather.
  Opaque,
  /// A `linalg.generic` whose loops are all parallel (elementwise ops, casts, broadcasts
  /// and transposes written as maps, dropout).
  Parallel,
  /// A `linalg.generic` with reduction loops.
  Reduction,
};

/// Whether the producer's loop nest is fused into the consumer's, its result never
/// reaching memory: the producer is parallel, the consumer is a generic (parallel or a
/// reduction), and the consumer is the only use of the producer's result (with several
/// uses the producer's loop would be recomputed in each, so it is not fused).
/// `consumerLoopsStayDefined`: upstream linalg's own condition for a reduction consumer,
/// that the fused op's inputs still define every loop (the pass leaves it to upstream,
/// which checks it before asking). `recomputesCostly`: the consumer reads each element of
/// the producer's result at several of its iterations (a broadcast) and the producer is
/// costly per element (isCostlyPerElement): fused, its body would run once per iteration
/// of the consumer instead of once per element (rope's cos and sin per batch row and head
/// instead of per position), so it is not fused. A cheap producer (an iota, a cast, a
/// scale) is still fused into a broadcasting consumer: recomputing it costs less than
/// writing and reading it.
bool fusesInto(LoopNest producer, LoopNest consumer, bool producerHasOneUse,
               bool consumerLoopsStayDefined = true, bool recomputesCostly = false);

/// Whether an op costs much more per element than the loads and stores fusion saves. In a
/// kernel body: a function call (libm's pow, sin and cos, which mtc-approximate-math leaves,
/// or the runtime's) or a transcendental `math` op (exp, log, erf, tanh: polynomials even
/// when approximated); `math`'s single instructions (sqrt, rsqrt, abs, fma, rounding) are
/// cheap. Among `mt` ops (for the cost model): those whose lowering holds such an op.
bool isCostlyPerElement(mlir::Operation *op);

/// The loop nests mt-to-linalg (compiler/codegen/ToLinalg) lowers an `mt` op to: the one
/// that reads its operands, the one that writes its result, whether there is a further
/// kernel between them (`reduce_mean`: a reduction, then the division by the count, its
/// result written and read in between), and the bytes of the tables a kernel of its own
/// computes before them, which the op's kernel reads (rope: cos and sin in f64 per pair of
/// the rotated dimension and position; costly, so never fused back).
struct KernelShape {
  LoopNest reads = LoopNest::Opaque;
  LoopNest writes = LoopNest::Opaque;
  bool splitInTwo = false;
  int64_t tableBytes = 0;
};

/// `op`'s kernels after mt-to-linalg; Opaque/Opaque for what is no kernel the fusion
/// merges (contractions, shape, gather/scatter, routing and collective ops, calls).
KernelShape kernelShapeOf(mlir::Operation *op);

/// Whether mt-to-linalg lowers `op` to no code at all, its result being its (first)
/// operand: a rename, a cast between the global and the local type, a dropout of rate 0.
bool isPassThrough(mlir::Operation *op);

} // namespace mtc::fusion

#endif // MTC_COMPILER_FUSION_FUSIONRULE_H
