//===- CommunicationPrediction.h - Bytes a rank should send per step -*- C++ -*-===//
//
// What rank 0 of a run should send per optimizer step, from the plan alone: the compiled
// step's own collectives (the compiler's `predictions.communication_bytes`) and the
// runtime's reduction of the gradients and the loss over the data-parallel ranks. mtrun
// prints it beside the bytes the communicators counted (docs/runtime.md, "`mtrun`").
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_COMMUNICATIONPREDICTION_H
#define MTC_RUNTIME_EXEC_COMMUNICATIONPREDICTION_H

#include "runtime/plan/Plan.h"

#include <cstdint>

namespace mtc::rt {

/// The bytes rank 0 should send per step when the global batch is `microBatches`
/// micro-batches shared by `dataParallelSize` ranks: the compiler's prediction per
/// forward_backward call times the micro-batches this rank runs, plus its prediction for
/// optimizer_step (when the plan has them), plus, with more than one data-parallel rank, ring
/// all-reduces of the rank-local gradients, the f64 loss and the i64 tokens per expert of an
/// MoE model (2 (dp - 1) / dp of their bytes)
/// and, with the distributed optimizer, the reduce-scatter of each gradient whose optimizer
/// layout splits a dimension over the data-parallel axis ((dp - 1) / dp of its rank-local
/// bytes).
double predictedCommunicationBytes(const Plan &plan, int64_t microBatches,
                                   int64_t dataParallelSize);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_COMMUNICATIONPREDICTION_H
