//===- DocumentsTest.cpp - positions within packed documents --------------===//

#include "runtime/data/Documents.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

using namespace mtc::rt;

namespace {

/// Megatron's loop, transcribed from `_get_ltor_masks_and_position_ids`
/// (megatron/core/datasets/gpt_dataset.py) for one sample: positions from arange, and at
/// each end of document i every later position lowered by i + 1 - prev_index.
std::vector<int32_t> megatronPositions(const std::vector<int32_t> &data, int32_t eod) {
  std::vector<int32_t> positionIds(data.size());
  for (size_t k = 0; k < data.size(); ++k)
    positionIds[k] = int32_t(k);
  std::vector<int32_t> eodIndex;
  for (size_t k = 0; k < data.size(); ++k)
    if (data[k] == eod)
      eodIndex.push_back(positionIds[k]);
  int32_t prevIndex = 0;
  for (int32_t i : eodIndex) {
    for (size_t k = size_t(i) + 1; k < data.size(); ++k)
      positionIds[k] -= i + 1 - prevIndex;
    prevIndex = i + 1;
  }
  return positionIds;
}

std::vector<int32_t> positionsOf(const std::vector<int32_t> &tokens, int64_t seq, int64_t eod) {
  std::vector<int32_t> positions(tokens.size(), -1);
  resetPositionIds(tokens, seq, eod, positions);
  return positions;
}

TEST(DocumentsTest, WithoutAnEndOfDocumentThePositionsAreTheSample) {
  std::vector<int32_t> tokens = {3, 4, 5, 6};
  EXPECT_EQ(positionsOf(tokens, 4, 7), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(positionsOf(tokens, 4, 7), megatronPositions(tokens, 7));
}

// The end of document keeps its document's position; the token after it is at 0.
TEST(DocumentsTest, TheEndOfDocumentEndsItsDocument) {
  std::vector<int32_t> tokens = {3, 4, 7, 5, 6, 1, 7, 2};
  EXPECT_EQ(positionsOf(tokens, 8, 7), (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 3, 0}));
  EXPECT_EQ(positionsOf(tokens, 8, 7), megatronPositions(tokens, 7));
}

TEST(DocumentsTest, EndOfDocumentAtTheFirstAndLastPositions) {
  std::vector<int32_t> first = {7, 3, 4, 5};
  EXPECT_EQ(positionsOf(first, 4, 7), (std::vector<int32_t>{0, 0, 1, 2}));
  EXPECT_EQ(positionsOf(first, 4, 7), megatronPositions(first, 7));
  std::vector<int32_t> last = {3, 4, 5, 7};
  EXPECT_EQ(positionsOf(last, 4, 7), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(positionsOf(last, 4, 7), megatronPositions(last, 7));
}

// Consecutive ends of document: each empty document is its end alone, at position 0.
TEST(DocumentsTest, ConsecutiveEndsOfDocument) {
  std::vector<int32_t> tokens = {3, 7, 7, 7, 4, 5};
  EXPECT_EQ(positionsOf(tokens, 6, 7), (std::vector<int32_t>{0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(positionsOf(tokens, 6, 7), megatronPositions(tokens, 7));
}

// Each sample of a micro-batch starts at position 0, whatever the previous one ended with.
TEST(DocumentsTest, EverySampleStartsAtZero) {
  std::vector<int32_t> tokens = {3, 4, 5, 6, /**/ 7, 3, 4, 5, /**/ 3, 7, 4, 5};
  EXPECT_EQ(positionsOf(tokens, 4, 7),
            (std::vector<int32_t>{0, 1, 2, 3, /**/ 0, 0, 1, 2, /**/ 0, 1, 0, 1}));
}

// Random samples over a small vocabulary (many ends of document, runs of them) agree with
// Megatron's loop sample by sample.
TEST(DocumentsTest, RandomSamplesAgreeWithMegatron) {
  std::mt19937 random(1234);
  std::uniform_int_distribution<int32_t> token(0, 3);
  const int64_t seq = 17, samples = 50;
  std::vector<int32_t> tokens(size_t(seq * samples));
  for (int32_t &t : tokens)
    t = token(random);
  std::vector<int32_t> positions = positionsOf(tokens, seq, 0);
  for (int64_t s = 0; s < samples; ++s) {
    std::vector<int32_t> sample(tokens.begin() + s * seq, tokens.begin() + (s + 1) * seq);
    std::vector<int32_t> got(positions.begin() + s * seq, positions.begin() + (s + 1) * seq);
    EXPECT_EQ(got, megatronPositions(sample, 0)) << "sample " << s;
  }
}

// An id beyond int32 (a tokenizer's) matches no token: the positions are the sample's.
TEST(DocumentsTest, AnEndOfDocumentOutsideTheTokensResetsNothing) {
  std::vector<int32_t> tokens = {-1, 0, 1};
  EXPECT_EQ(positionsOf(tokens, 3, int64_t(1) << 40), (std::vector<int32_t>{0, 1, 2}));
}

} // namespace
