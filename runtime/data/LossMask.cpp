//===- LossMask.cpp - The loss mask of packed documents -------------------===//

#include "runtime/data/LossMask.h"

#include <cassert>

namespace mtc::rt {

void eodLossMask(std::span<const int32_t> tokens, int64_t eod, std::span<float> mask) {
  assert(tokens.size() == mask.size() && "one weight per token");
  for (size_t i = 0; i < tokens.size(); ++i)
    mask[i] = tokens[i] == eod ? 0.0f : 1.0f;
}

} // namespace mtc::rt
