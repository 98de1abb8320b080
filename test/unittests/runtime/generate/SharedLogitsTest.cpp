//===- SharedLogitsTest.cpp - rank 0's logits on every rank ----------------===//
//
// Ranks are threads over loopback Gloo (CommTestUtil.h), each with a model of its own.
//
//===----------------------------------------------------------------------===//

#include "runtime/generate/SharedLogits.h"

#include "test/unittests/runtime/comm/CommTestUtil.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

using namespace mtc::rt;
using namespace mtc::rt::test;

namespace {

constexpr int64_t kVocabulary = 6;

/// A model whose next token is (last + shift) mod 6; a call fails from `failAt` ids on.
struct ShiftModel {
  int64_t shift = 1;
  size_t failAt = 1000;
  std::vector<float> logits = std::vector<float>(kVocabulary);
  int calls = 0;

  LogitsOfLast function() {
    return [this](std::span<const int64_t> ids) -> Expected<std::span<const float>> {
      ++calls;
      if (ids.size() >= failAt)
        return makeError("the model failed at ", ids.size(), " ids");
      std::fill(logits.begin(), logits.end(), 0.0f);
      logits[size_t((ids.back() + shift) % kVocabulary)] = 5.0f;
      logits[size_t((ids.back() + shift + 1) % kVocabulary)] = 4.0f;
      return std::span<const float>(logits);
    };
  }
};

TEST(SharedLogitsTest, OneRankIsTheModelItself) {
  ShiftModel model;
  LogitsOfLast shared = shareLogitsOfRankZero(model.function(), nullptr, kVocabulary);
  std::vector<int64_t> ids = {2};
  Expected<std::span<const float>> logits = shared(ids);
  ASSERT_TRUE(logits) << logits.error().message();
  EXPECT_EQ(logits->data(), model.logits.data());
  EXPECT_EQ((*logits)[3], 5.0f);
}

// Ranks whose own logits differ (as data-parallel copies might round apart) generate rank
// 0's tokens, greedy and sampled.
TEST(SharedLogitsTest, EveryRankGeneratesRankZerosTokens) {
  TestJob job;
  std::vector<std::vector<int64_t>> greedy(3), sampled(3);
  runRanks(3, [&](int rank) {
    auto world = job.connect(rank, 3, "shared-logits");
    ASSERT_TRUE(world);
    ShiftModel model;
    model.shift = 1 + rank; // rank 0: +1, the others something else
    LogitsOfLast shared = shareLogitsOfRankZero(model.function(), world.get(), kVocabulary);
    std::vector<int64_t> prompt = {0};
    GenerationOptions options;
    options.maxNewTokens = 5;
    Expected<Generation> g = generate(shared, prompt, 16, options);
    ASSERT_TRUE(g) << g.error().message();
    greedy[size_t(rank)] = g->tokens;
    options.sampling.temperature = 1.0;
    options.sampling.seed = 11;
    g = generate(shared, prompt, 16, options);
    ASSERT_TRUE(g) << g.error().message();
    sampled[size_t(rank)] = g->tokens;
  });
  EXPECT_EQ(greedy[0], (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(greedy[1], greedy[0]);
  EXPECT_EQ(greedy[2], greedy[0]);
  EXPECT_EQ(sampled[1], sampled[0]);
  EXPECT_EQ(sampled[2], sampled[0]);
}

// A rank whose model fails ends the call on every rank at once: the failed rank with its own
// error, the others naming it; nobody waits for a collective the failed rank never joins.
TEST(SharedLogitsTest, AFailedRankEndsTheCallOnEveryRank) {
  TestJob job;
  std::vector<std::string> errors(3);
  runRanks(3, [&](int rank) {
    auto world = job.connect(rank, 3, "shared-logits-fail");
    ASSERT_TRUE(world);
    ShiftModel model;
    if (rank == 2)
      model.failAt = 3;
    LogitsOfLast shared = shareLogitsOfRankZero(model.function(), world.get(), kVocabulary);
    std::vector<int64_t> prompt = {0};
    GenerationOptions options;
    Expected<Generation> g = generate(shared, prompt, 16, options);
    ASSERT_FALSE(g);
    errors[size_t(rank)] = g.error().message();
    // The world still works: the failure was agreed on, not a timeout.
    int32_t one = 1;
    EXPECT_TRUE(world->allReduce(&one, 1, MTC_I32, MTC_SUM).ok());
    EXPECT_EQ(one, 3);
  });
  EXPECT_EQ(errors[0], "rank 2 failed to score the tokens");
  EXPECT_EQ(errors[1], "rank 2 failed to score the tokens");
  EXPECT_EQ(errors[2], "the model failed at 3 ids");
}

// Logits shorter than the vocabulary are a failure of that rank, not a short broadcast.
TEST(SharedLogitsTest, ShortLogitsAreAFailure) {
  TestJob job;
  std::vector<std::string> errors(2);
  runRanks(2, [&](int rank) {
    auto world = job.connect(rank, 2, "shared-logits-short");
    ASSERT_TRUE(world);
    ShiftModel model;
    LogitsOfLast shared =
        shareLogitsOfRankZero(model.function(), world.get(), kVocabulary + (rank == 0 ? 1 : 0));
    std::vector<int64_t> ids = {1};
    Expected<std::span<const float>> logits = shared(ids);
    ASSERT_FALSE(logits);
    errors[size_t(rank)] = logits.error().message();
  });
  EXPECT_EQ(errors[0], "the logits have 6 values, not the vocabulary's 7");
  EXPECT_EQ(errors[1], "rank 0 failed to score the tokens");
}

} // namespace
