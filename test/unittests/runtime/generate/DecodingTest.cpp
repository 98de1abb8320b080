//===- DecodingTest.cpp - the generation loop ------------------------------===//

#include "runtime/generate/Decoding.h"

#include <gtest/gtest.h>

#include <vector>

using namespace mtc::rt;

namespace {

/// A model of 5 tokens whose next token is always (last + 1) mod 5, recording each call.
struct CountingModel {
  std::vector<float> logits = std::vector<float>(5);
  std::vector<size_t> calls;

  LogitsOfLast function() {
    return [this](std::span<const int64_t> ids) -> Expected<std::span<const float>> {
      calls.push_back(ids.size());
      std::fill(logits.begin(), logits.end(), 0.0f);
      logits[size_t((ids.back() + 1) % 5)] = 10.0f;
      return std::span<const float>(logits);
    };
  }
};

TEST(DecodingTest, GreedyUntilMaxNewTokens) {
  CountingModel model;
  GenerationOptions options;
  options.maxNewTokens = 3;
  std::vector<int64_t> prompt = {2};
  Expected<Generation> g = generate(model.function(), prompt, 8, options);
  ASSERT_TRUE(g) << g.error().message();
  EXPECT_EQ(g->tokens, (std::vector<int64_t>{2, 3, 4, 0}));
  EXPECT_EQ(g->promptTokens, 1);
  EXPECT_EQ(g->reason, StopReason::MaxNewTokens);
  // The whole sequence is scored each time.
  EXPECT_EQ(model.calls, (std::vector<size_t>{1, 2, 3}));
}

TEST(DecodingTest, StopsAtAStopTokenWithoutAppendingIt) {
  CountingModel model;
  GenerationOptions options;
  options.stopTokens = {7, 0};
  std::vector<int64_t> prompt = {1, 2};
  std::vector<int64_t> seen;
  Expected<Generation> g =
      generate(model.function(), prompt, 16, options, [&](int64_t id) { seen.push_back(id); });
  ASSERT_TRUE(g) << g.error().message();
  EXPECT_EQ(g->tokens, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(seen, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(g->reason, StopReason::StopToken);
  EXPECT_EQ(g->stopToken, 0);
}

TEST(DecodingTest, StopsWhenTheWindowIsFull) {
  CountingModel model;
  GenerationOptions options; // no limit: the window
  std::vector<int64_t> prompt = {0, 1};
  Expected<Generation> g = generate(model.function(), prompt, 4, options);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->tokens.size(), 4u);
  EXPECT_EQ(g->reason, StopReason::WindowFull);
  // More new tokens asked for than there is room: the window ends it.
  options.maxNewTokens = 10;
  g = generate(model.function(), prompt, 4, options);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->reason, StopReason::WindowFull);
  // Exactly the room: the limit ends it.
  options.maxNewTokens = 2;
  g = generate(model.function(), prompt, 4, options);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->reason, StopReason::MaxNewTokens);
  // Zero new tokens: the prompt back, without a call.
  model.calls.clear();
  options.maxNewTokens = 0;
  g = generate(model.function(), prompt, 4, options);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->tokens, prompt);
  EXPECT_TRUE(model.calls.empty());
}

TEST(DecodingTest, RefusesPromptsWithoutRoom) {
  CountingModel model;
  GenerationOptions options;
  std::vector<int64_t> empty;
  Expected<Generation> g = generate(model.function(), empty, 4, options);
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message().find("the prompt is empty"), std::string::npos);
  std::vector<int64_t> full = {0, 1, 2, 3};
  g = generate(model.function(), full, 4, options);
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message().find("the prompt is 4 tokens, and the model's window (the plan's "
                                     "sequence length) is 4"),
            std::string::npos)
      << g.error().message();
  options.sampling.topP = 2;
  std::vector<int64_t> prompt = {1};
  EXPECT_FALSE(generate(model.function(), prompt, 4, options));
}

TEST(DecodingTest, SamplingIsDeterministicForASeed) {
  // A flat model: every token equally likely.
  std::vector<float> flat(5, 0.0f);
  LogitsOfLast uniform = [&](std::span<const int64_t>) -> Expected<std::span<const float>> {
    return std::span<const float>(flat);
  };
  GenerationOptions options;
  options.sampling.temperature = 1;
  options.sampling.seed = 42;
  std::vector<int64_t> prompt = {1};
  Expected<Generation> a = generate(uniform, prompt, 32, options);
  Expected<Generation> b = generate(uniform, prompt, 32, options);
  options.sampling.seed = 43;
  Expected<Generation> c = generate(uniform, prompt, 32, options);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_NE(a->tokens, c->tokens);
}

TEST(DecodingTest, ModelErrorsPassThrough) {
  LogitsOfLast broken = [](std::span<const int64_t>) -> Expected<std::span<const float>> {
    return makeError("the kernel failed");
  };
  GenerationOptions options;
  std::vector<int64_t> prompt = {1};
  Expected<Generation> g = generate(broken, prompt, 4, options);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().message(), "the kernel failed");
}

} // namespace
