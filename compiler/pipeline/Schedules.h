//===- Schedules.h - pipeline schedule generators ----------------*- C++ -*-===//
//
// Generates the `mts.schedule` of one training step for a schedule kind, a stage count
// P, virtual stages V (chunks per stage) and m micro-batches. The generators decide the
// order of every stage's compute tasks; the sends and receives follow from it (see
// Schedules.cpp), so every kind pairs its messages the same way.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_PIPELINE_SCHEDULES_H
#define MTC_COMPILER_PIPELINE_SCHEDULES_H

#include "dialects/mts/IR/MTSOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Support/LLVM.h"

namespace mtc::pipeline {

/// The stage of each of the P * V chunks: chunk c runs on stage c % P (Megatron's
/// interleaved placement; for V = 1 chunk c on stage c).
llvm::SmallVector<int64_t> placeChunks(int64_t stages, int64_t virtualStages);

/// Builds the schedule at the builder's insertion point. Parameters the kind cannot
/// schedule (V != 1 for gpipe, 1f1b and zb-h1; V < 2 or m not a multiple of P for
/// interleaved; a non-positive count) are an error at `loc`, and nothing is built.
mlir::FailureOr<mts::ScheduleOp> buildSchedule(mlir::OpBuilder &builder, mlir::Location loc,
                                               mts::ScheduleKind kind, int64_t stages,
                                               int64_t virtualStages, int64_t microBatches);

} // namespace mtc::pipeline

#endif // MTC_COMPILER_PIPELINE_SCHEDULES_H
