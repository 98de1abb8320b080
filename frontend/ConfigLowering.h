//===- ConfigLowering.h - train {} and parallel {} blocks -------*- C++ -*-===//
//
// Checks the settings of `train {}` and `parallel {}` against their schema and against the
// model's dimensions (a tensor-parallel degree must divide the dimensions it shards), and
// records them as the typed module attributes `mt.train` / `mt.parallel` (#mt.train,
// #mt.parallel) for the later stages.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_FRONTEND_CONFIGLOWERING_H
#define MTC_FRONTEND_CONFIGLOWERING_H

#include "frontend/AST.h"
#include "frontend/Diagnostics.h"

#include "dialects/mt/IR/MTDialect.h"
#include "llvm/ADT/StringMap.h"

namespace mtc::frontend {

struct TrainSettings {
  /// The element type of parameters and activations: "fp32", "bf16" or "fp16".
  std::string precision = "fp32";
  /// Size of the `batch` dimension unless `dims {}` sets it.
  int64_t microBatch = 1;
  mt::TrainAttr attr;
};

/// `train {}` (absent: the defaults). Errors go to `diags`.
TrainSettings lowerTrainBlock(const ConfigBlock *block, mlir::MLIRContext &context,
                              Diagnostics &diags);

/// `parallel {}` / `parallel auto` (absent: no setting). `dims` are the model's dimension
/// sizes and `numLayers` the total repeat count, for the divisibility checks and the
/// pipeline split; `vocabulary` (the dimension the loss classifies over, if any) is exempt
/// from them: tp pads it (mt-pad-vocabulary).
mt::ParallelAttr lowerParallelBlock(const ConfigBlock *block, const llvm::StringMap<int64_t> &dims,
                                    int64_t numLayers, llvm::StringRef vocabulary,
                                    mlir::MLIRContext &context, Diagnostics &diags);

} // namespace mtc::frontend

#endif // MTC_FRONTEND_CONFIGLOWERING_H
