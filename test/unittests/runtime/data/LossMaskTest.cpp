//===- LossMaskTest.cpp - the loss mask of packed documents ---------------===//

#include "runtime/data/LossMask.h"

#include <gtest/gtest.h>

#include <vector>

using namespace mtc::rt;

namespace {

// Megatron's loss_mask[data == eod_token] = 0 over the input tokens: two documents packed
// in one sample, each ended by the end of document 7.
TEST(LossMaskTest, ZeroAtEveryEndOfDocument) {
  std::vector<int32_t> tokens = {3, 4, 7, 5, 6, 1, 7, 2};
  std::vector<float> mask(tokens.size(), -1.0f);
  eodLossMask(tokens, 7, mask);
  EXPECT_EQ(mask, (std::vector<float>{1, 1, 0, 1, 1, 1, 0, 1}));
}

// The bytes tokenizer's end of document is 0: id 0 is masked, and a sample without it
// counts every position.
TEST(LossMaskTest, OnesWithoutAnEndOfDocument) {
  std::vector<int32_t> tokens = {3, 4, 5, 6};
  std::vector<float> mask(tokens.size());
  eodLossMask(tokens, 0, mask);
  EXPECT_EQ(mask, (std::vector<float>{1, 1, 1, 1}));
  tokens[2] = 0;
  eodLossMask(tokens, 0, mask);
  EXPECT_EQ(mask, (std::vector<float>{1, 1, 0, 1}));
}

// An id beyond int32 (a tokenizer's) matches no token.
TEST(LossMaskTest, AnEndOfDocumentOutsideTheTokensMasksNothing) {
  std::vector<int32_t> tokens = {-1, 0, 1};
  std::vector<float> mask(tokens.size());
  eodLossMask(tokens, int64_t(1) << 40, mask);
  EXPECT_EQ(mask, (std::vector<float>{1, 1, 1}));
}

} // namespace
