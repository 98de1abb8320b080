//===- GradientBuffer.h - A step's gradients and their data-parallel reduction -*- C++ -*-===//
//
// Every parameter's gradient of a plan's tables (a whole plan, or one pipeline stage's
// PipelineStage.h stagePlan) in one f32 buffer, in two groups: the gradients all-reduced over
// the data-parallel ranks first (one all-reduce), then, with the distributed optimizer (a
// data-parallel axis in the plan), those reduce-scattered over it (GradientSharding.h), each
// group in table order. A second buffer of the same layout (`scratch`) takes the gradient of
// one micro-batch (or one pipeline chunk's part) while the first accumulates.
//
// After `reduce` the optimizer reads `optimizerGrad(i)`: the rank's shard of the summed
// gradient for a reduce-scattered parameter (written over the start of the reduce-scattered
// group), else the whole summed gradient.
//
// ZeRO-2 (plan `mesh.zero_stage` 2) keeps the reduce-scattered gradients only as shards:
// every micro-batch's gradient of them is reduce-scattered at once (`addMicroBatch`, one
// reduceScatterGradientInPlace per gradient) and added to an f32 shard accumulator of
// 1/dp of their size. The reduce-scattered group of the first buffer then holds one
// micro-batch's gradient, the scratch buffer only the all-reduced group, and a staging
// buffer of the largest reduce-scattered gradient serves the in-place packing.
//
// A pipeline stage (PipelineTrainer.h) takes in its gradients in chunk parts: each chunk
// call writes the gradient of its layers (a run of whole rows of a layer parameter's leading
// `layers` dimension) and of the whole model parameters it reads, and `addPart` adds each
// written run: to the accumulated gradients, or under ZeRO-2 reduce-scattered at once into
// the run's rows of the shard accumulator (the stage's optimizer layout never splits
// `layers` under ZeRO-2, so those rows are one contiguous run of the shard too).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_GRADIENTBUFFER_H
#define MTC_RUNTIME_EXEC_GRADIENTBUFFER_H

#include "runtime/comm/Communicator.h"
#include "runtime/exec/GradientSharding.h"
#include "runtime/exec/TrainingState.h"
#include "runtime/plan/Plan.h"

#include <optional>
#include <span>
#include <vector>

namespace mtc::rt {

class GradientBuffer {
public:
  /// The buffers for the parameters of `state` (local shapes, `plan`'s tables). `dpSize`: the
  /// size of the plan's data-parallel axis (the distributed optimizer), 1 without one.
  /// `withScratch`: also the second buffer (with ZeRO-2: when the rank runs more than one
  /// micro-batch).
  static Expected<GradientBuffer> create(const Plan &plan, const TrainingState &state,
                                         int64_t dpSize, bool withScratch);

  /// Where parameter `param`'s accumulated gradient, and its scratch gradient, are.
  float *grad(size_t param) { return grads_.data() + offsets_[param]; }
  float *scratch(size_t param) { return scratch_.data() + offsets_[param]; }
  /// Where forward_backward writes parameter `param`'s gradient of a micro-batch (`first`:
  /// the rank's first of the step).
  float *microBatchGrad(size_t param, bool first);
  /// Takes in the gradients of a micro-batch forward_backward has written (microBatchGrad):
  /// adds the scratch gradients to the accumulated ones after the first, and with ZeRO-2
  /// reduce-scatters the sharded ones over `dataParallel` into the shard accumulator.
  Error addMicroBatch(Communicator *dataParallel, bool first, int64_t step);
  /// Sets every accumulated gradient to zero.
  void clear();
  /// Adds the scratch gradients to the accumulated ones: all of them, or `count` elements of
  /// parameter `param` from element `begin` on.
  void accumulateAll();
  void accumulate(size_t param, size_t begin, size_t count);
  /// Takes in `count` elements of parameter `param`'s gradient from element `begin` on,
  /// written where microBatchGrad(param, false) points: accumulates them, or under ZeRO-2,
  /// for a reduce-scattered gradient, reduce-scatters them over `dataParallel` and adds the
  /// rank's block to its shard. `begin` and `count` must be whole rows of the leading
  /// dimension, and the whole tensor when the data-parallel split is along that dimension.
  Error addPart(Communicator *dataParallel, size_t param, size_t begin, size_t count,
                int64_t step);
  /// The gradient of `param` accumulated so far: the whole gradient, or under ZeRO-2 the
  /// rank's shard of a reduce-scattered one (summed over the data-parallel ranks already).
  std::span<float> accumulated(size_t param);

  /// Sums the accumulated gradients over `dataParallel` (null: nothing to sum, except that the
  /// distributed optimizer's shards are still taken): the reduce-scatter of the distributed
  /// optimizer's gradients (already done under ZeRO-2), then one all-reduce of the others.
  /// `step` names the step in errors.
  Error reduce(Communicator *dataParallel, int64_t step);
  /// The gradient the optimizer takes for `param` after `reduce`.
  float *optimizerGrad(size_t param);

  /// Bytes of the buffers.
  int64_t bytes() const;

private:
  GradientBuffer() = default;

  std::vector<float> grads_, scratch_;
  std::vector<size_t> offsets_, sizes_;
  size_t allReducedElements_ = 0;
  int64_t dpSize_ = 1;
  std::vector<GradientShardSpec> shardSpecs_;
  std::vector<std::optional<size_t>> shardOf_;
  /// The packed blocks of the reduce-scatter when the scratch buffer cannot serve.
  std::vector<float> packed_;
  /// ZeRO-2: the accumulated shards (in shardSpecs_ order) and the staging of one gradient.
  bool shardsPerMicroBatch_ = false;
  std::vector<float> shardSums_, staging_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_GRADIENTBUFFER_H
