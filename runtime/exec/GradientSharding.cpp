//===- GradientSharding.cpp - The distributed optimizer's gradient reduce-scatter ---===//

#include "runtime/exec/GradientSharding.h"

#include "runtime/plan/Sharding.h"

#include <cstring>

namespace mtc::rt {

size_t totalShardElements(std::span<const GradientShardSpec> specs) {
  size_t total = 0;
  for (const GradientShardSpec &s : specs)
    total += s.shardElements;
  return total;
}

/// The check both reduce-scatters make of the group.
static Error checkGroup(Communicator *dp, int64_t n) {
  if (n < 1 || (dp ? dp->size() != n : n != 1))
    return makeError("internal error: the data-parallel group has ", dp ? dp->size() : 1,
                     " ranks, but the gradients are sharded ", n, " ways");
  return Error::success();
}

Error reduceScatterGradients(Communicator *dp, int64_t n, std::span<const GradientShardSpec> specs,
                             const float *grads, float *packed, float *shards) {
  if (Error err = checkGroup(dp, n); !err.ok())
    return err;
  size_t total = totalShardElements(specs);
  if (total == 0)
    return Error::success();
  // Block c of every gradient, in spec order, at packed[c * total ...]: spec s's block c lands
  // at packed[c * total + s.shardOffset].
  for (const GradientShardSpec &s : specs)
    for (int64_t c = 0; c < n; ++c)
      extractDimBlock(s.shape, s.dim, n, c, grads + s.gradOffset,
                      packed + size_t(c) * total + s.shardOffset);
  if (!dp || n == 1) {
    std::memcpy(shards, packed, total * sizeof(float));
    return Error::success();
  }
  return dp->reduceScatter(packed, shards, total, MTC_F32, MTC_SUM);
}

Error reduceScatterGradientInPlace(Communicator *dp, int64_t n, const GradientShardSpec &spec,
                                   float *grad, float *staging, float *shard) {
  if (Error err = checkGroup(dp, n); !err.ok())
    return err;
  size_t elements = spec.shardElements * size_t(n);
  if (!dp || n == 1) {
    std::memmove(shard, grad, elements * sizeof(float));
    return Error::success();
  }
  std::memcpy(staging, grad, elements * sizeof(float));
  for (int64_t c = 0; c < n; ++c)
    extractDimBlock(spec.shape, spec.dim, n, c, staging, grad + size_t(c) * spec.shardElements);
  return dp->reduceScatter(grad, shard, spec.shardElements, MTC_F32, MTC_SUM);
}

} // namespace mtc::rt
