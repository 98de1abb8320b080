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

/// The "pipeline" object for `schedules` (verified schedules of one pipeline, one per
/// micro-batch count the plan admits, in any order; they are written by increasing
/// count) and `chunkLayers`, the layers of the repeat in each chunk. Schedules that
/// differ in kind, stages, virtual stages or chunk placement, two with one micro-batch
/// count, or a chunkLayers entry count other than P * V are an error on the schedule.
mlir::FailureOr<llvm::json::Object> pipelineToJSON(llvm::ArrayRef<mts::ScheduleOp> schedules,
                                                   llvm::ArrayRef<int64_t> chunkLayers);

/// One entry of the object's "schedules": {"micro_batches", "stages": [...]}.
llvm::json::Object scheduleToJSON(mts::ScheduleOp schedule);

} // namespace mtc::pipeline

#endif // MTC_COMPILER_PIPELINE_PIPELINEJSON_H
