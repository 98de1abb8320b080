//===- PipelinePlan.h - the plan's "pipeline" object ------------*- C++ -*-===//
//
// With pipeline parallelism the plan holds the contract's "pipeline" object: the stage
// cut (StageCut.h), one schedule per micro-batch count the runtime may run
// (PipelineJSON.h), the parameters two stages share, and per stage the predicted memory
// of the activations it holds (docs/plan-format.md).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_PLAN_PIPELINEPLAN_H
#define MTC_COMPILER_PLAN_PIPELINEPLAN_H

#include "compiler/pipeline/StageCut.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

namespace mtc {

/// What each chunk keeps for one micro-batch between its functions, in bytes (whole
/// tensors, before tensor parallelism): the residuals its forward returns, those of them its
/// backward_weight reads, and the stash its backward_input returns (indexed by chunk).
struct ChunkSavedBytes {
  llvm::SmallVector<int64_t> residual, weightResidual, stash;
};

/// The chunk functions of `trained` (a module after the training pipeline), built on a
/// copy, measured.
mlir::FailureOr<ChunkSavedBytes> chunkSavedBytes(mlir::ModuleOp trained);

/// The schedule the plan runs: the one the settings name, or 1f1b (interleaved with
/// virtual stages). Emits an error and fails on a schedule the generators do not know.
mlir::LogicalResult checkPipelineSchedule(mlir::ModuleOp trained, const pipeline::StageCut &cut);

/// The "pipeline" object of `trained` cut as `cut`, for a step of `microBatches`
/// micro-batches at dp = 1: a schedule for every divisor m of it that the schedule kind
/// can run (the plan's schedule, or 1f1b, interleaved with virtual stages). Emits an
/// error and fails on a schedule the generators do not know or that runs none of them.
mlir::FailureOr<llvm::json::Object> buildPipelineJson(mlir::ModuleOp trained,
                                                      const pipeline::StageCut &cut,
                                                      int64_t microBatches);

} // namespace mtc

#endif // MTC_COMPILER_PLAN_PIPELINEPLAN_H
