//===- FunctionCost.h - what one call of a step function computes -*- C++ -*-===//
//
// The cost model's compute figures, per call of each function the runtime calls
// (`forward_backward`, `optimizer_step`, the pipeline's `chunk<c>.<role>` and
// `stage<s>.<role>`), on one rank: counted on the partitioned step (after
// mtc-partition-pipeline: local types, attention decomposed into contractions, the backward
// and any recomputation explicit), layer scans once per repeat.
//
//  - gemms: each matrix product (`mt.contract`) by its FLOPs (2 x the product of every
//    distinct dimension of both operands), identical sizes merged with a count;
//  - traffic_bytes: the bytes the memory-bound kernels read and write, per kernel as mtc's
//    own fusion forms them (FusedKernels.h, compiler/fusion/FusionRule.h): each kernel's
//    inputs from memory (each value once) and the results it writes, not the values its
//    fused ops pass in registers;
//  - ops: the kernels after fusion (each matrix product one), for a per-kernel overhead.
//
// Under mixed precision the f32 ops of a bf16/f16 composite op's decomposition
// (`mt.stored_as`, dialects/mt/Utils/TensorSize.h) count their f32 tensors at the low type's
// size and their casts to f32 and back as nothing: a fused kernel's arithmetic, not traffic.
//
// Views and casts (`mt.rename`, `mtp.to_local`, ...), constants and the collectives
// (CommunicationVolume.h) count nothing here. computeOpCost counts a fused kernel at its
// root, the op that writes its result: an op fused into its consumer costs nothing alone.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_ANALYSIS_FUNCTIONCOST_H
#define MTC_COMPILER_ANALYSIS_FUNCTIONCOST_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mtc {

struct GemmCount {
  int64_t flops = 0;
  int64_t count = 0;
};

struct FunctionCost {
  /// Ascending in flops.
  std::vector<GemmCount> gemms;
  int64_t trafficBytes = 0;
  int64_t ops = 0;
  /// The part of trafficBytes in tensors with the micro-batch dimension (`batch`): what
  /// grows with the micro-batch, the rest (parameters, their gradients) staying. Every matrix
  /// product of a transformer's step has the dimension, so its FLOPs grow likewise; the
  /// layout search (compiler/costmodel/LayoutSearch.h) scales a step compiled at one
  /// micro-batch to another by these.
  int64_t batchTrafficBytes = 0;
  /// Matrix products without the micro-batch dimension (0 in the models of examples/): FLOPs
  /// that do not grow with it.
  int64_t unbatchedGemmFlops = 0;
};

/// The costs of `partitioned`'s functions the runtime calls, by name (absent ones left out).
std::map<std::string, FunctionCost> computeFunctionCosts(mlir::ModuleOp partitioned);

/// The cost of one call of `partitioned`'s function `name` (its calls and layer scans
/// included); all zero when there is no such function.
FunctionCost computeFunctionCost(mlir::ModuleOp partitioned, llvm::StringRef name);

/// The cost of `op` (an op of one of `partitioned`'s functions) and the ops nested in it,
/// the functions it calls and scans included.
FunctionCost computeOpCost(mlir::ModuleOp partitioned, mlir::Operation *op);

} // namespace mtc

#endif // MTC_COMPILER_ANALYSIS_FUNCTIONCOST_H
