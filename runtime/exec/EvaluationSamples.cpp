//===- EvaluationSamples.cpp - What a run's evaluations read --------------===//

#include "runtime/exec/EvaluationSamples.h"

namespace mtc::rt {

Expected<int64_t> validationOrderSamples(int64_t trainIters, int64_t evalInterval,
                                         int64_t evalIters, int64_t globalBatch, bool skipTrain) {
  if (evalIters < 1 || globalBatch < 1 || trainIters < 0 || (!skipTrain && evalInterval < 1))
    return makeError("cannot size the validation order of ", evalIters, " batches of ", globalBatch,
                     " samples every ", evalInterval, " of ", trainIters, " iterations");
  // Megatron's total_eval_points: one evaluation every evalInterval iterations and one at the
  // end; --skip-train evaluates once.
  const int64_t evaluations = skipTrain ? 1 : trainIters / evalInterval + 1;
  if (evaluations > kMaxOrderSamples / evalIters ||
      evaluations * evalIters > kMaxOrderSamples / globalBatch)
    return makeError(evaluations, " evaluation", evaluations == 1 ? "" : "s", " of ", evalIters,
                     " batches of ", globalBatch, " samples are more than the ", kMaxOrderSamples,
                     " validation samples an order can hold");
  return evaluations * evalIters * globalBatch;
}

Expected<FullValidation> fullValidation(int64_t splitSamples, int64_t globalBatch) {
  if (splitSamples < 1 || globalBatch < 1)
    return makeError("cannot read ", splitSamples, " samples in global batches of ", globalBatch);
  FullValidation full;
  full.splitSamples = splitSamples;
  full.batches = splitSamples / globalBatch;
  if (full.batches == 0)
    return makeError("the valid split holds ", splitSamples, " sample",
                     splitSamples == 1 ? "" : "s", ", fewer than one global batch of ", globalBatch,
                     ": nothing to evaluate in whole batches (give the valid split "
                     "more documents with --split, or a smaller --global-batch)");
  full.evaluatedSamples = full.batches * globalBatch;
  full.droppedSamples = splitSamples - full.evaluatedSamples;
  return full;
}

} // namespace mtc::rt
