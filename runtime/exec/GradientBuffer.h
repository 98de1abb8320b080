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
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_GRADIENTBUFFER_H
#define MTC_RUNTIME_EXEC_GRADIENTBUFFER_H

#include "runtime/comm/Communicator.h"
#include "runtime/exec/GradientSharding.h"
#include "runtime/exec/TrainingState.h"
#include "runtime/plan/Plan.h"

#include <optional>
#include <vector>

namespace mtc::rt {

class GradientBuffer {
public:
  /// The buffers for the parameters of `state` (local shapes, `plan`'s tables). `dpSize`: the
  /// size of the plan's data-parallel axis (the distributed optimizer), 1 without one.
  /// `withScratch`: also the second buffer.
  static Expected<GradientBuffer> create(const Plan &plan, const TrainingState &state,
                                         int64_t dpSize, bool withScratch);

  /// Where parameter `param`'s accumulated gradient, and its scratch gradient, are.
  float *grad(size_t param) { return grads_.data() + offsets_[param]; }
  float *scratch(size_t param) { return scratch_.data() + offsets_[param]; }
  /// Sets every accumulated gradient to zero.
  void clear();
  /// Adds the scratch gradients to the accumulated ones: all of them, or `count` elements of
  /// parameter `param` from element `begin` on.
  void accumulateAll();
  void accumulate(size_t param, size_t begin, size_t count);

  /// Sums the accumulated gradients over `dataParallel` (null: nothing to sum, except that the
  /// distributed optimizer's shards are still taken): the reduce-scatter of the distributed
  /// optimizer's gradients, then one all-reduce of the others. `step` names the step in
  /// errors.
  Error reduce(Communicator *dataParallel, int64_t step);
  /// The gradient the optimizer takes for `param` after `reduce`.
  float *optimizerGrad(size_t param);

  /// Bytes of the buffers.
  int64_t bytes() const;

private:
  GradientBuffer() = default;

  std::vector<float> grads_, scratch_;
  std::vector<size_t> offsets_;
  size_t allReducedElements_ = 0;
  int64_t dpSize_ = 1;
  std::vector<GradientShardSpec> shardSpecs_;
  std::vector<std::optional<size_t>> shardOf_;
  /// The packed blocks of the reduce-scatter when the scratch buffer cannot serve.
  std::vector<float> packed_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_GRADIENTBUFFER_H
