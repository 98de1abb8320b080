//===- CommunicationPrediction.h - Bytes a rank should send per step -*- C++ -*-===//
//
// What a rank of a run should send per optimizer step, from the plan alone: the compiled
// functions' own collectives (the compiler's `predictions.communication_bytes`, per call of
// each function) and the runtime's reductions of the gradients and the loss over the
// data-parallel ranks; under pipeline parallelism also the activations and gradients one
// stage sends the next, the shared parameters' sum over their stages and the pipeline
// group's sum of the squared gradient norm and the loss. mtrun prints it beside the bytes
// the communicators counted (docs/runtime.md, "`mtrun`"). Every figure counts a collective
// as the Gloo backend's ring algorithms send it (CommunicationVolume.h in the compiler).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_COMMUNICATIONPREDICTION_H
#define MTC_RUNTIME_EXEC_COMMUNICATIONPREDICTION_H

#include "runtime/plan/Plan.h"

#include <cstdint>
#include <optional>

namespace mtc::rt {

/// The bytes rank 0 should send per step when the global batch is `microBatches`
/// micro-batches shared by `dataParallelSize` ranks: the compiler's prediction per
/// forward_backward call times the micro-batches this rank runs, plus its prediction for
/// optimizer_step (when the plan has them), plus dataParallelReductionBytes of the plan's
/// parameters and, for an MoE model with more than one data-parallel rank, a ring all-reduce
/// of its i64 tokens per expert (2 (dp - 1) / dp of their bytes).
double predictedCommunicationBytes(const Plan &plan, int64_t microBatches,
                                   int64_t dataParallelSize);

/// The bytes each rank of pipeline stage `stage` should send per step when it runs
/// `schedule` (one of `plan`'s, for the micro-batches of one data-parallel rank) with
/// `dataParallelSize` data-parallel ranks; `stageTables` is stagePlan(plan, ...) of the
/// stage (PipelineStage.h). The sum of
///   - the compiler's prediction per call of each chunk function times the calls of the
///     stage's task list (`chunk<c>.forward`, `.backward`, `.backward_input`,
///     `.backward_weight`),
///   - every send of the task list: the activations chunk c's forward hands on
///     (send_activation of chunk c), or their gradient (send_gradient of chunk c, the size of
///     chunk c - 1's activations), in whole f32 words as the stage holds them,
///   - for each shared parameter the stage holds with n - 1 other stages, an all-reduce of its
///     rank-local gradient over the n stages (2 (n - 1) / n of its bytes; under ZeRO-2 of
///     its shard when the stage's optimizer layout splits it over dp),
///   - dataParallelReductionBytes of the stage's parameters; under ZeRO-2 the reduce-scatter
///     of each gradient a chunk call returns that the stage shards over dp ((dp - 1) / dp of
///     its bytes, per call) instead of one per step,
///   - the compiler's prediction for `stage<s>.grad_squares` and `stage<s>.optimizer_step`,
///     and the pipeline group's all-reduce of two f64 (the squared norm and the loss) over
///     its P stages (2 (P - 1) / P x 16 bytes),
///   - for an MoE model the tokens per expert (PipelineExpertLoad), as f64: the rows of the
///     stage's layers in the data-parallel all-reduce of the loss (2 (dp - 1) / dp of their
///     bytes), the rows of every layer in the pipeline group's (2 (P - 1) / P of them).
/// Every rank of a stage sends the same: the mesh axes' collectives are symmetric, and each
/// rank exchanges its messages with the rank at its place of the neighbouring stage. None
/// when the plan has no prediction for one of the functions the stage calls (a plan without
/// kernels, or compiled before mtc predicted them), and when the chunk forwards disagree on
/// their tokens per expert.
std::optional<double> predictedStageCommunicationBytes(const Plan &plan, const Plan &stageTables,
                                                       const PipelineSchedule &schedule,
                                                       int64_t stage, int64_t dataParallelSize);

/// What `dataParallelSize` > 1 data-parallel ranks send to reduce the gradients of the
/// parameters of `tables` and the f64 loss: ring all-reduces of the rank-local gradients and
/// the loss (2 (dp - 1) / dp of their bytes) and, with the distributed optimizer, the
/// reduce-scatter of each gradient whose optimizer layout splits a dimension over the
/// data-parallel axis ((dp - 1) / dp of its rank-local bytes), under ZeRO-2 once for each
/// of the rank's `microBatchesPerRank`. 0 for a single rank.
double dataParallelReductionBytes(const Plan &tables, int64_t dataParallelSize,
                                  int64_t microBatchesPerRank = 1);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_COMMUNICATIONPREDICTION_H
