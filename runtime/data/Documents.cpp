//===- Documents.cpp - Positions within packed documents ------------------===//

#include "runtime/data/Documents.h"

#include <cassert>

namespace mtc::rt {

void resetPositionIds(std::span<const int32_t> tokens, int64_t sequenceLength, int64_t eod,
                      std::span<int32_t> positions) {
  assert(tokens.size() == positions.size() && "one position per token");
  assert(sequenceLength > 0 && tokens.size() % size_t(sequenceLength) == 0 && "whole samples");
  for (size_t begin = 0; begin < tokens.size(); begin += size_t(sequenceLength)) {
    int32_t position = 0;
    for (size_t i = begin; i < begin + size_t(sequenceLength); ++i) {
      positions[i] = position++;
      if (tokens[i] == eod)
        position = 0; // the next token starts a document
    }
  }
}

} // namespace mtc::rt
