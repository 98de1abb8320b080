//===- SamplerTest.cpp - choosing the next token ---------------------------===//

#include "runtime/generate/Sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

using namespace mtc::rt;

namespace {

SamplingOptions sampling(double temperature, int64_t topK = 0, double topP = 1, uint64_t seed = 7) {
  SamplingOptions o;
  o.temperature = temperature;
  o.topK = topK;
  o.topP = topP;
  o.seed = seed;
  return o;
}

/// How often each id is chosen over positions [0, n).
std::map<int64_t, int> histogram(const std::vector<float> &logits, const SamplingOptions &o,
                                 int n) {
  std::map<int64_t, int> counts;
  for (int t = 0; t < n; ++t) {
    Expected<int64_t> id = sampleToken(logits, o, t);
    EXPECT_TRUE(id) << id.error().message();
    if (id)
      ++counts[*id];
  }
  return counts;
}

TEST(SamplerTest, GreedyIsTheFirstLargest) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  Expected<int64_t> id = sampleToken(logits, sampling(0), 3);
  ASSERT_TRUE(id);
  EXPECT_EQ(*id, 1); // numpy's argmax: the lowest of the equal ones
  // Greedy ignores the seed, top-k and top-p.
  EXPECT_EQ(*sampleToken(logits, sampling(0, 1, 0.1, 99), 5), 1);
}

TEST(SamplerTest, DrawsAreUniformAndKeyedOnSeedAndPosition) {
  EXPECT_EQ(samplingDraw(1, 5), samplingDraw(1, 5));
  EXPECT_NE(samplingDraw(1, 5), samplingDraw(2, 5));
  EXPECT_NE(samplingDraw(1, 5), samplingDraw(1, 6));
  double sum = 0;
  for (int t = 0; t < 10000; ++t) {
    double u = samplingDraw(3, t);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
}

TEST(SamplerTest, SameSeedSameTokens) {
  std::vector<float> logits = {1.0f, 0.9f, 0.8f, 0.7f, 0.6f};
  std::vector<int64_t> first, second, other;
  for (int t = 0; t < 50; ++t) {
    first.push_back(*sampleToken(logits, sampling(1.0, 0, 1, 11), t));
    second.push_back(*sampleToken(logits, sampling(1.0, 0, 1, 11), t));
    other.push_back(*sampleToken(logits, sampling(1.0, 0, 1, 12), t));
  }
  EXPECT_EQ(first, second);
  EXPECT_NE(first, other);
}

TEST(SamplerTest, TemperatureFollowsTheSoftmax) {
  // p = softmax([0, ln 3]) = [1/4, 3/4].
  std::vector<float> logits = {0.0f, std::log(3.0f)};
  std::map<int64_t, int> counts = histogram(logits, sampling(1.0), 20000);
  EXPECT_NEAR(counts[1] / 20000.0, 0.75, 0.015);
  // T = 0.5 squares the odds: 9 : 1.
  counts = histogram(logits, sampling(0.5), 20000);
  EXPECT_NEAR(counts[1] / 20000.0, 0.9, 0.01);
  // A large temperature flattens it.
  counts = histogram(logits, sampling(1000.0), 20000);
  EXPECT_NEAR(counts[1] / 20000.0, 0.5, 0.015);
}

TEST(SamplerTest, TopKKeepsTheKLargest) {
  std::vector<float> logits = {3.0f, 0.0f, 2.0f, 1.0f, 2.0f};
  std::map<int64_t, int> counts = histogram(logits, sampling(1.0, 2), 5000);
  // The two largest: 0 (3.0), then 2 (2.0, the lower of the equal ids 2 and 4).
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts[0], 0);
  EXPECT_GT(counts[2], 0);
  // K = 1 is greedy; K beyond the vocabulary keeps everything.
  counts = histogram(logits, sampling(5.0, 1), 200);
  EXPECT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts[0], 200);
  counts = histogram(logits, sampling(100.0, 100), 5000);
  EXPECT_EQ(counts.size(), 5u);
}

TEST(SamplerTest, TopPKeepsTheSmallestPrefixReachingP) {
  // p = [0.5, 0.25, 0.125, 0.125].
  std::vector<float> logits = {std::log(4.0f), std::log(2.0f), 0.0f, 0.0f};
  // 0.5 alone reaches 0.5: only id 0.
  std::map<int64_t, int> counts = histogram(logits, sampling(1.0, 0, 0.5), 500);
  EXPECT_EQ(counts.size(), 1u);
  // 0.6 needs ids 0 and 1, renormalised to 2 : 1.
  counts = histogram(logits, sampling(1.0, 0, 0.6), 30000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_NEAR(counts[0] / 30000.0, 2.0 / 3.0, 0.015);
  // A tiny p keeps the most likely id; p = 1 keeps every id.
  counts = histogram(logits, sampling(1.0, 0, 1e-9), 200);
  EXPECT_EQ(counts[0], 200);
  counts = histogram(logits, sampling(1.0, 0, 1.0), 5000);
  EXPECT_EQ(counts.size(), 4u);
}

TEST(SamplerTest, TopPAppliesWithinTopK) {
  // top-k 3 renormalises [0.5, 0.25, 0.125] to [4/7, 2/7, 1/7]; top-p 0.8 then keeps ids 0
  // and 1 (6/7 >= 0.8 > 4/7).
  std::vector<float> logits = {std::log(4.0f), std::log(2.0f), 0.0f, 0.0f};
  std::map<int64_t, int> counts = histogram(logits, sampling(1.0, 3, 0.8), 5000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts[1], 0);
}

TEST(SamplerTest, MaskedClassesAreNeverDrawn) {
  // The padded classes of a tp plan carry a large negative logit.
  std::vector<float> logits = {0.0f, -1.7e38f, 0.0f};
  std::map<int64_t, int> counts = histogram(logits, sampling(2.0), 2000);
  EXPECT_EQ(counts.count(1), 0u);
}

TEST(SamplerTest, RejectsBadOptionsAndLogits) {
  EXPECT_FALSE(checkSamplingOptions(sampling(-0.1)).ok());
  EXPECT_FALSE(checkSamplingOptions(sampling(NAN)).ok());
  EXPECT_FALSE(checkSamplingOptions(sampling(INFINITY)).ok());
  EXPECT_FALSE(checkSamplingOptions(sampling(1.0, -1)).ok());
  EXPECT_FALSE(checkSamplingOptions(sampling(1.0, 0, 0.0)).ok());
  EXPECT_FALSE(checkSamplingOptions(sampling(1.0, 0, 1.5)).ok());
  EXPECT_TRUE(checkSamplingOptions(sampling(0.0, 0, 1.0)).ok());
  Error err = checkSamplingOptions(sampling(1.0, 0, 1.5));
  EXPECT_NE(err.message().find("top-p must be in (0, 1]"), std::string::npos) << err.message();

  std::vector<float> empty;
  EXPECT_FALSE(sampleToken(empty, sampling(0), 1));
  std::vector<float> nan = {0.0f, NAN};
  Expected<int64_t> id = sampleToken(nan, sampling(0), 4);
  ASSERT_FALSE(id);
  EXPECT_NE(id.error().message().find("the logit of token 1 at position 3 is nan"),
            std::string::npos)
      << id.error().message();
}

} // namespace
