//===- EvaluationSamples.h - What a run's evaluations read ----------*- C++ -*-===//
//
// How many samples of the valid split a run's order is built for, and how many global
// batches each evaluation reads, as Megatron decides them (its
// get_train_valid_test_num_samples and build_train_valid_test_data_iterators):
//
//   - by default every evaluation reads --eval-iters global batches, the next ones of one
//     order built for (train iterations / --eval-interval + 1) x --eval-iters batches; with
//     --skip-train, one evaluation of --eval-iters batches, from the order's start;
//   - with --full-validation every evaluation reads the whole valid split, every sample of one
//     epoch of it once (Megatron builds that split's dataset with num_samples None: one epoch,
//     shuffled). The compiled step's batch shape is fixed, so the split is read in whole
//     global batches and the samples of a last partial batch (fewer than one global batch)
//     are left out, as Megatron's sampler drops a last incomplete batch (drop_last); the run
//     logs and records how many samples it evaluated. Each global batch is dealt over the
//     data-parallel ranks as every evaluation's batches are (Trainer::evaluate), so every
//     evaluated sample is read by exactly one rank.
//
// The test split is read as before: its first --eval-iters global batches, when --eval-iters
// is above 0.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_EVALUATIONSAMPLES_H
#define MTC_RUNTIME_EXEC_EVALUATIONSAMPLES_H

#include "runtime/support/Error.h"

#include <cstdint>

namespace mtc::rt {

/// The most samples an indexed dataset's order is built for (as mtrun's --train-samples).
inline constexpr int64_t kMaxOrderSamples = int64_t(1) << 48;

/// The samples of the valid split's order a run of `trainIters` train iterations builds
/// (Megatron's eval_samples): (trainIters / evalInterval + 1) x evalIters global batches of
/// `globalBatch`, or with `skipTrain` evalIters global batches (one evaluation). Fails when
/// that is more than kMaxOrderSamples, or on counts out of range (evalIters and globalBatch
/// below 1, evalInterval below 1 without `skipTrain`, trainIters below 0).
Expected<int64_t> validationOrderSamples(int64_t trainIters, int64_t evalInterval,
                                         int64_t evalIters, int64_t globalBatch, bool skipTrain);

/// The whole valid split read in global batches (--full-validation).
struct FullValidation {
  /// The samples of one epoch of the split.
  int64_t splitSamples = 0;
  /// Whole global batches of them each evaluation reads.
  int64_t batches = 0;
  /// The samples those batches hold (batches x the global batch).
  int64_t evaluatedSamples = 0;
  /// The samples of the last partial batch, left out (fewer than one global batch).
  int64_t droppedSamples = 0;
};

/// `splitSamples` samples read in global batches of `globalBatch`. Fails when they fill no
/// global batch (nothing could be evaluated), or on counts below 1.
Expected<FullValidation> fullValidation(int64_t splitSamples, int64_t globalBatch);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_EVALUATIONSAMPLES_H
