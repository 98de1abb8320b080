//===- PipelinePlan.h - the plan's "pipeline" object ------------*- C++ -*-===//
//
// With pipeline parallelism the plan holds the contract's "pipeline" object: the stage
// cut (StageCut.h), one schedule per micro-batch count the runtime may run
// (PipelineJSON.h), the parameters two stages share, and per stage the predicted memory
// of the activations it holds and its predicted peak (docs/plan-format.md).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_PLAN_PIPELINEPLAN_H
#define MTC_COMPILER_PLAN_PIPELINEPLAN_H

#include "compiler/pipeline/StageCut.h"
#include "runtime/plan/StageBuffers.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <vector>

namespace mtc {

/// The bytes of the buffers a pipeline stage holds, from the partitioned chunk and stage
/// functions (a rank's tensors). Per chunk, for one micro-batch: the residuals its forward
/// returns, those of them its backward_weight reads, the stash its backward_input returns,
/// and the activations its forward hands to the next chunk (one message). Per stage: its
/// parameters and optimizer state (the arguments of `stage<s>.optimizer_step`) and the
/// runtime's gradient buffers (from the gradients those arguments take: whole, or ZeRO-2's
/// shards). Each buffer counts in whole f32 words, as the runtime holds it.
struct PipelineBufferBytes {
  rt::ChunkBufferBytes chunks;
  std::vector<int64_t> stageParameters, stageOptimizerState, stageGradients;
};

/// The chunk and stage functions of `trained` (a module after the training pipeline),
/// built on a copy and partitioned, measured.
mlir::FailureOr<PipelineBufferBytes> pipelineBufferBytes(mlir::ModuleOp trained);

/// The schedule the plan runs: the one the settings name, or 1f1b (interleaved with
/// virtual stages). Emits an error and fails on a schedule the generators do not know.
mlir::LogicalResult checkPipelineSchedule(mlir::ModuleOp trained, const pipeline::StageCut &cut);

/// The "pipeline" object of `trained` cut as `cut`, for a step of `microBatches`
/// micro-batches at dp = 1: a schedule for every divisor m of it that the schedule kind
/// can run (the plan's schedule, or 1f1b, interleaved with virtual stages), each stage with
/// its predicted activations and, given the compiled x86 kernels' `functions` (their
/// calling convention with each function's arena), its predicted peak bytes, with the
/// stage's own arena: the largest of its chunks' and its stage's functions. Emits an error
/// and fails on a schedule the generators do not know or that runs none of them.
mlir::FailureOr<llvm::json::Object> buildPipelineJson(mlir::ModuleOp trained,
                                                      const pipeline::StageCut &cut,
                                                      int64_t microBatches,
                                                      const llvm::json::Object *functions);

} // namespace mtc

#endif // MTC_COMPILER_PLAN_PIPELINEPLAN_H
