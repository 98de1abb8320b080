//===- GradientSharding.h - The distributed optimizer's gradient reduce-scatter -*- C++ -*-===//
//
// With the distributed optimizer (Megatron's ZeRO-1; plan `mesh.data_parallel_axis` and
// per-parameter `optimizer_layout`, docs/plan-format.md "Distributed optimizer") each
// data-parallel rank updates only its shard of a parameter's optimizer state, so it needs only
// the shard of the summed gradient: instead of all-reducing the gradient over the n
// data-parallel ranks, the Trainer reduce-scatters it.
//
// The gradient forward_backward returns is this rank's tensor-parallel shard (the parameter's
// `layout`, local dims). The optimizer layout splits one more of its dimensions, d, over the
// data-parallel axis: data-parallel coordinate c holds the contiguous index range
// [c * L / n, (c + 1) * L / n) of d (L its tensor-parallel local size) -- the arithmetic of
// runtime/plan/Sharding.h applied to the local tensor. Such a block is not contiguous in
// memory (d need not be the outermost dimension), so the blocks are packed first, in
// coordinate order, and then one Communicator::reduceScatter (f32, sum) over the data-parallel
// group leaves every rank with the sum of its block:
//
//   packed = [block 0 of every sharded gradient][block 1 of every ...] ... [block n - 1 ...]
//   reduceScatter(packed, shards, total shard elements, MTC_F32, MTC_SUM)
//
// All sharded gradients travel in one call (each block c holds every parameter's block c, in
// the order of `specs`), so the step pays one collective's latency, not one per parameter.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_GRADIENTSHARDING_H
#define MTC_RUNTIME_EXEC_GRADIENTSHARDING_H

#include "runtime/comm/Communicator.h"
#include "runtime/support/Error.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mtc::rt {

/// One gradient that is reduce-scattered over the data-parallel ranks.
struct GradientShardSpec {
  std::string name;           // the parameter, for messages
  std::vector<int64_t> shape; // the gradient as forward_backward returns it (local dims)
  size_t dim = 0;             // the dimension split over the data-parallel ranks
  size_t gradOffset = 0;      // where the whole gradient starts in the gradient buffer
  size_t shardOffset = 0;     // where this rank's shard starts in the shard buffer
  size_t shardElements = 0;   // elements of the shard: the gradient's / n
};

/// The elements of every shard together (the shard buffer's size; the packed buffer holds n
/// times as many).
size_t totalShardElements(std::span<const GradientShardSpec> specs);

/// Reduce-scatters the gradients `specs` name (in `grads`, at their gradOffset) over the data-
/// parallel group `dp` of `n` ranks (rank = data-parallel coordinate; null when n is 1): on
/// return shards[spec.shardOffset ...] holds the sum over the group of block (my coordinate)
/// of the gradient, for every spec. `packed` is scratch of n * totalShardElements(specs)
/// elements. Fails with the communicator's error (naming the collective) or when `dp` does
/// not have `n` ranks.
Error reduceScatterGradients(Communicator *dp, int64_t n, std::span<const GradientShardSpec> specs,
                             const float *grads, float *packed, float *shards);

/// ZeRO-2's reduce-scatter of one micro-batch's gradient `grad` (the whole gradient of
/// `spec`, at no particular offset) without a packing buffer the size of all gradients: the n
/// blocks are rearranged in place into coordinate order, through `staging` (at least the
/// gradient's elements), then one Communicator::reduceScatter leaves the sum over the group of
/// this rank's block in `shard` (spec.shardElements; it may be `staging`). `grad` is left in
/// block order. One call per gradient: the staging buffer is one gradient's, not all of them.
Error reduceScatterGradientInPlace(Communicator *dp, int64_t n, const GradientShardSpec &spec,
                                   float *grad, float *staging, float *shard);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_GRADIENTSHARDING_H
