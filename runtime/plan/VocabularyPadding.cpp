//===- VocabularyPadding.cpp - Whole tensors with and without padding -----===//

#include "runtime/plan/VocabularyPadding.h"

#include "runtime/plan/Sharding.h"

#include <cassert>

namespace mtc::rt {
namespace {

/// The real block as a ShardBox of the padded tensor: the same arithmetic as a shard.
ShardBox realBox(const Plan &plan, const std::vector<Dim> &dims) {
  ShardBox box;
  box.globalShape = dimSizes(dims);
  box.localShape = realShape(plan, dims);
  box.offset.assign(dims.size(), 0);
  return box;
}

} // namespace

std::vector<int64_t> realShape(const Plan &plan, const std::vector<Dim> &dims) {
  std::vector<int64_t> shape = dimSizes(dims);
  if (plan.vocabularyPadded())
    for (size_t d = 0; d < dims.size(); ++d)
      if (dims[d].name == plan.vocabulary)
        shape[d] = plan.vocabularyRealSize;
  return shape;
}

std::vector<float> stripVocabularyPadding(const Plan &plan, const std::vector<Dim> &dims,
                                          std::span<const float> values) {
  ShardBox box = realBox(plan, dims);
  assert(static_cast<int64_t>(values.size()) == box.globalElements() && "not the whole tensor");
  std::vector<float> real(static_cast<size_t>(box.localElements()));
  extractShard(box, values.data(), real.data());
  return real;
}

std::vector<float> padVocabulary(const Plan &plan, const std::vector<Dim> &dims,
                                 std::span<const float> real) {
  ShardBox box = realBox(plan, dims);
  assert(static_cast<int64_t>(real.size()) == box.localElements() && "not the real block");
  std::vector<float> whole(static_cast<size_t>(box.globalElements()), 0.0f);
  insertShard(box, real.data(), whole.data());
  return whole;
}

} // namespace mtc::rt
