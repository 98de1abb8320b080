//===- GradientBuffer.cpp - A step's gradients and their data-parallel reduction -===//

#include "runtime/exec/GradientBuffer.h"

#include <algorithm>
#include <new>

namespace mtc::rt {

Expected<GradientBuffer> GradientBuffer::create(const Plan &plan, const TrainingState &state,
                                                int64_t dpSize, bool withScratch) {
  GradientBuffer g;
  g.dpSize_ = dpSize;
  g.shardsPerMicroBatch_ = plan.dataParallelAxis && plan.zeroStage == 2;
  size_t n = state.params.size();
  try {
    g.offsets_.assign(n, 0);
    g.sizes_.assign(n, 0);
    g.shardOf_.assign(n, std::nullopt);
    std::vector<std::optional<size_t>> shardDim(n);
    if (plan.dataParallelAxis)
      for (size_t i = 0; i < n; ++i)
        shardDim[i] = plan.dataParallelShardDim(plan.params[i]);
    size_t total = 0, shardTotal = 0, largestSharded = 0;
    for (bool sharded : {false, true}) {
      for (size_t i = 0; i < n; ++i) {
        if (shardDim[i].has_value() != sharded)
          continue;
        g.offsets_[i] = total;
        const TrainingState::Tensor &p = state.params[i];
        g.sizes_[i] = p.values.size();
        if (sharded) {
          size_t elements = p.values.size() / size_t(dpSize);
          g.shardOf_[i] = g.shardSpecs_.size();
          g.shardSpecs_.push_back(
              GradientShardSpec{p.name, p.shape, *shardDim[i], total, shardTotal, elements});
          shardTotal += elements;
          largestSharded = std::max(largestSharded, p.values.size());
        }
        total += p.values.size();
      }
      if (!sharded)
        g.allReducedElements_ = total;
    }
    g.grads_.assign(total, 0.0f);
    if (g.shardsPerMicroBatch_) {
      // The reduce-scattered gradients are never accumulated whole.
      if (withScratch)
        g.scratch_.assign(g.allReducedElements_, 0.0f);
      g.shardSums_.assign(shardTotal, 0.0f);
      g.staging_.assign(largestSharded, 0.0f);
      return g;
    }
    if (withScratch)
      g.scratch_.assign(total, 0.0f);
    // The packed blocks fill the scratch buffer's reduce-scattered part when there is one (it
    // is free once the gradients are summed); the shards then land in the reduce-scattered
    // part of the accumulated gradients, free once packed.
    if (g.scratch_.empty() && shardTotal > 0)
      g.packed_.assign(total - g.allReducedElements_, 0.0f);
  } catch (const std::bad_alloc &) {
    return makeError("out of memory allocating the gradient buffers");
  }
  return g;
}

void GradientBuffer::clear() {
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  std::fill(shardSums_.begin(), shardSums_.end(), 0.0f);
}

void GradientBuffer::accumulateAll() {
  // (Under ZeRO-2 the scratch buffer is the all-reduced group only.)
  for (size_t j = 0, e = scratch_.size(); j < e; ++j)
    grads_[j] += scratch_[j];
}

float *GradientBuffer::microBatchGrad(size_t param, bool first) {
  return first || (shardsPerMicroBatch_ && shardOf_[param]) ? grad(param) : scratch(param);
}

Error GradientBuffer::addMicroBatch(Communicator *dataParallel, bool first, int64_t step) {
  if (!first)
    accumulateAll();
  if (!shardsPerMicroBatch_)
    return Error::success();
  for (const GradientShardSpec &s : shardSpecs_) {
    float *sum = shardSums_.data() + s.shardOffset;
    // The first micro-batch's shard is the sum so far; a later one's is added to it.
    if (Error err = reduceScatterGradientInPlace(dataParallel, dpSize_, s,
                                                 grads_.data() + s.gradOffset, staging_.data(),
                                                 first ? sum : staging_.data());
        !err.ok())
      return std::move(err).withContext(
          concat("step ", step + 1, ": reduce-scatter of the gradient of '", s.name,
                 "' over the data-parallel ranks"));
    if (!first)
      for (size_t j = 0; j < s.shardElements; ++j)
        sum[j] += staging_[j];
  }
  return Error::success();
}

void GradientBuffer::accumulate(size_t param, size_t begin, size_t count) {
  float *to = grad(param) + begin;
  const float *from = scratch(param) + begin;
  for (size_t j = 0; j < count; ++j)
    to[j] += from[j];
}

Error GradientBuffer::addPart(Communicator *dataParallel, size_t param, size_t begin,
                              size_t count, int64_t step) {
  const std::optional<size_t> &shard = shardOf_[param];
  if (!shardsPerMicroBatch_ || !shard) {
    accumulate(param, begin, count);
    return Error::success();
  }
  // The run as a tensor of its own: the rows [begin, begin + count) of the leading
  // dimension. Split along another dimension, its block c is the rows of block c of the
  // whole tensor, which lie at begin / n in the shard (rows are outermost).
  const GradientShardSpec &whole = shardSpecs_[*shard];
  size_t elements = whole.shardElements * size_t(dpSize_);
  size_t rows = whole.shape.empty() ? 1 : size_t(whole.shape.front());
  size_t row = rows ? elements / rows : 0;
  bool partial = begin != 0 || count != elements;
  if (count == 0 || row == 0 || begin % row != 0 || count % row != 0 || begin + count > elements ||
      (partial && whole.dim == 0))
    return makeError("step ", step + 1, ": internal error: elements [", begin, ", ",
                     begin + count, ") of the gradient of '", whole.name,
                     "' cannot be reduce-scattered on their own (its shards split dimension ",
                     whole.dim, " of ", rows, " rows of ", row, " elements)");
  GradientShardSpec part = whole;
  if (!part.shape.empty())
    part.shape.front() = int64_t(count / row);
  part.shardOffset = whole.shardOffset + begin / size_t(dpSize_);
  part.shardElements = count / size_t(dpSize_);
  float *sum = shardSums_.data() + part.shardOffset;
  if (Error err = reduceScatterGradientInPlace(dataParallel, dpSize_, part, grad(param) + begin,
                                               staging_.data(), staging_.data());
      !err.ok())
    return std::move(err).withContext(concat("step ", step + 1, ": reduce-scatter of the gradient of '",
                                             whole.name, "' over the data-parallel ranks"));
  for (size_t j = 0; j < part.shardElements; ++j)
    sum[j] += staging_[j];
  return Error::success();
}

std::span<float> GradientBuffer::accumulated(size_t param) {
  if (const std::optional<size_t> &spec = shardOf_[param]; spec && shardsPerMicroBatch_)
    return {shardSums_.data() + shardSpecs_[*spec].shardOffset, shardSpecs_[*spec].shardElements};
  return {grad(param), sizes_[param]};
}

float *GradientBuffer::optimizerGrad(size_t param) {
  if (const std::optional<size_t> &spec = shardOf_[param])
    return shardsPerMicroBatch_ ? shardSums_.data() + shardSpecs_[*spec].shardOffset
                                : grads_.data() + allReducedElements_ + shardSpecs_[*spec].shardOffset;
  return grad(param);
}

Error GradientBuffer::reduce(Communicator *dataParallel, int64_t step) {
  if (!shardSpecs_.empty() && !shardsPerMicroBatch_) {
    float *packed = packed_.empty() ? scratch_.data() + allReducedElements_ : packed_.data();
    // The shards overwrite the start of the (packed, so free) reduce-scattered gradients.
    if (Error err = reduceScatterGradients(dataParallel, dpSize_, shardSpecs_, grads_.data(),
                                           packed, grads_.data() + allReducedElements_);
        !err.ok())
      return std::move(err).withContext(concat(
          "step ", step + 1, ": reduce-scatter of the gradients over the data-parallel ranks"));
  }
  if (dataParallel && allReducedElements_ > 0)
    if (Error err =
            dataParallel->allReduce(grads_.data(), allReducedElements_, MTC_F32, MTC_SUM);
        !err.ok())
      return std::move(err).withContext(
          concat("step ", step + 1, ": all-reduce of the gradients over the data-parallel ranks"));
  return Error::success();
}

int64_t GradientBuffer::bytes() const {
  return static_cast<int64_t>((grads_.size() + scratch_.size() + packed_.size() +
                               shardSums_.size() + staging_.size()) *
                              sizeof(float));
}

} // namespace mtc::rt
