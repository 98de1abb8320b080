//===- PipelineJSON.h - the plan's "pipeline" object -------------*- C++ -*-===//
//
// Writes the schedules of a plan as the "pipeline" object of plan.json, which the
// runtime's schedule executor reads: per micro-batch count, every stage's task list with
// its bubble fraction, in-flight count and (compute tasks) start slot, all from the
// simulation with unit task times (F = B = W = 1, BW = 2).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_PIPELINE_PIPELINEJSON_H
#define MTC_COMPILER_PIPELINE_PIPELINEJSON_H

#include "dialects/mts/IR/MTSOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/JSON.h"

namespace mtc::pipeline {

/// The "pipeline" object for `schedules` (at least one; verified schedules of one
/// pipeline, one per micro-batch count the plan admits, in any order; they are written
/// by increasing count) and `chunkLayers`, the layers of the repeat in each chunk.
/// Schedules that differ in kind, stages, virtual stages or chunk placement, two with
/// one micro-batch count, or a chunkLayers entry count other than P * V are an error on
/// the schedule.
mlir::FailureOr<llvm::json::Object> pipelineToJSON(llvm::ArrayRef<mts::ScheduleOp> schedules,
                                                   llvm::ArrayRef<int64_t> chunkLayers);

/// The "pipeline" object of a plan with `kind`, P `stages`, `virtualStages` and
/// `microBatches` per step at dp = 1: one schedule for every divisor m of `microBatches`
/// that the kind can schedule (interleaved needs m a multiple of P), so that every
/// data-parallel degree dividing the count finds its m. The schedules are built in a
/// scratch module and verified. No admissible m is the kind's error for the whole count
/// at `loc`.
mlir::FailureOr<llvm::json::Object> buildPipelineJSON(mlir::Location loc, mts::ScheduleKind kind,
                                                      int64_t stages, int64_t virtualStages,
                                                      int64_t microBatches,
                                                      llvm::ArrayRef<int64_t> chunkLayers);

/// One entry of the object's "schedules": {"micro_batches", "stages": [...]}.
llvm::json::Object scheduleToJSON(mts::ScheduleOp schedule);

} // namespace mtc::pipeline

#endif // MTC_COMPILER_PIPELINE_PIPELINEJSON_H
