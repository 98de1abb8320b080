//===- CompletionTest.cpp - Answering one request on a stand-in model -----===//
//
// The model here is a rule over bytes: after byte c it is sure of c + 1, and after 'z' of the
// end of document (0). Greedy decoding of "ab" is then "abcdef...".
//
//===----------------------------------------------------------------------===//

#include "runtime/serve/Completion.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string>

using namespace mtc::rt;

namespace {

constexpr int64_t kVocabulary = 256;

/// The stand-in's logits after `last`.
std::vector<float> ruleLogits(int64_t last) {
  std::vector<float> logits(kVocabulary, 0.0f);
  logits[last == 'z' ? 0 : (last + 1) % kVocabulary] = 10.0f;
  return logits;
}

struct StandIn {
  ByteTokenizer tokenizer;
  std::vector<float> logits;
  int calls = 0; // of logitsOfLast
  CompletionModel model;

  explicit StandIn(int64_t window = 16) {
    model.tokenizer = &tokenizer;
    model.window = window;
    model.vocabulary = kVocabulary;
    model.logitsOfLast = [this](std::span<const int64_t> ids) -> Expected<std::span<const float>> {
      ++calls;
      logits = ruleLogits(ids.back());
      return std::span<const float>(logits);
    };
    model.logitsOfEach = [](std::span<const int64_t> ids,
                            const std::function<void(int64_t, std::span<const float>)> &visit) {
      for (size_t t = 0; t < ids.size(); ++t)
        visit(static_cast<int64_t>(t), ruleLogits(ids[t]));
      return Error::success();
    };
  }
};

CompletionRequest request(CompletionApi api, std::vector<std::string> prompts,
                          std::optional<int64_t> newTokens) {
  CompletionRequest r;
  r.api = api;
  r.prompts = std::move(prompts);
  r.newTokens = newTokens;
  r.echo = api == CompletionApi::Megatron;
  r.sampling.temperature = 0;
  return r;
}

std::vector<CompletionResult> completed(const CompletionModel &model, const CompletionRequest &r,
                                        uint64_t seed = 1) {
  auto answer = complete(model, r, seed);
  if (auto *error = std::get_if<RequestError>(&answer)) {
    ADD_FAILURE() << error->message;
    return {};
  }
  return std::get<0>(answer);
}

RequestError refused(const CompletionModel &model, const CompletionRequest &r) {
  auto answer = complete(model, r, 1);
  auto *error = std::get_if<RequestError>(&answer);
  if (!error) {
    ADD_FAILURE() << "completed";
    return {};
  }
  return *error;
}

std::vector<int64_t> bytes(std::string_view text) { return {text.begin(), text.end()}; }

TEST(CompletionTest, GreedyMegatron) {
  StandIn standIn;
  std::vector<CompletionResult> results =
      completed(standIn.model, request(CompletionApi::Megatron, {"ab", "mn"}, 3));
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].text, "abcde");
  EXPECT_EQ(results[0].tokens, bytes("abcde"));
  EXPECT_EQ(results[0].segments, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(results[0].promptTokens, 2);
  EXPECT_FALSE(results[0].stopped);
  EXPECT_TRUE(results[0].logprobs.empty());
  EXPECT_EQ(results[1].text, "mnopq");
}

TEST(CompletionTest, OpenAIEchoesOnlyWhenAsked) {
  StandIn standIn;
  CompletionRequest r = request(CompletionApi::OpenAI, {"ab"}, 3);
  EXPECT_EQ(completed(standIn.model, r)[0].text, "cde");
  EXPECT_TRUE(completed(standIn.model, r)[0].segments.empty());
  r.echo = true;
  EXPECT_EQ(completed(standIn.model, r)[0].text, "abcde");
}

TEST(CompletionTest, EndOfDocumentStops) {
  StandIn standIn;
  std::vector<CompletionResult> results =
      completed(standIn.model, request(CompletionApi::OpenAI, {"wx"}, 10));
  EXPECT_EQ(results[0].text, "yz");
  EXPECT_TRUE(results[0].stopped);
  // A stop token of the request's instead: 'z' is not generated.
  CompletionRequest r = request(CompletionApi::Megatron, {"wx"}, 10);
  r.stopToken = 'z';
  results = completed(standIn.model, r);
  EXPECT_EQ(results[0].text, "wxy");
  EXPECT_TRUE(results[0].stopped);
}

TEST(CompletionTest, DefaultNewTokensFitTheWindow) {
  StandIn standIn(16);
  CompletionRequest r = request(CompletionApi::Megatron, {"ab"}, std::nullopt);
  r.defaultNewTokens = 64;
  std::vector<CompletionResult> results = completed(standIn.model, r);
  EXPECT_EQ(results[0].tokens.size(), 16u);
  EXPECT_FALSE(results[0].stopped);
  r.defaultNewTokens = 4;
  EXPECT_EQ(completed(standIn.model, r)[0].text, "abcdef");
}

TEST(CompletionTest, EveryPromptIsCheckedBeforeAnyIsGenerated) {
  StandIn standIn(16);
  RequestError error =
      refused(standIn.model, request(CompletionApi::Megatron, {"ab", "abcdefghijklmnop"}, {}));
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.param, "prompts");
  EXPECT_EQ(error.message, "prompts[1]: 16 tokens fill the model's window of 16 tokens (the plan's "
                           "sequence length): no room for a new token (prompts are not truncated)");
  EXPECT_EQ(standIn.calls, 0);

  error = refused(standIn.model, request(CompletionApi::Megatron, {"ab"}, 15));
  EXPECT_EQ(error.param, "tokens_to_generate");
  EXPECT_EQ(error.message, "tokens_to_generate: the prompt's 2 tokens and 15 new ones exceed the "
                           "model's window of 16 tokens (the plan's sequence length)");
  error = refused(standIn.model, request(CompletionApi::OpenAI, {"ab"}, 15));
  EXPECT_EQ(error.param, "max_tokens");
  EXPECT_EQ(standIn.calls, 0);
  // 14 new tokens fill the window exactly.
  EXPECT_EQ(completed(standIn.model, request(CompletionApi::OpenAI, {"ab"}, 14))[0].text.size(),
            14u);
}

TEST(CompletionTest, TokensOutsideTheVocabulary) {
  StandIn standIn;
  standIn.model.vocabulary = 128;
  RequestError error = refused(standIn.model, request(CompletionApi::OpenAI, {"caf\xc3\xa9"}, 2));
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.param, "prompt");
  EXPECT_EQ(error.message, "prompt: the bytes tokenizer gives id 195, outside the model's "
                           "vocabulary of 128 (is it the tokenizer the model was trained with?)");
  CompletionRequest r = request(CompletionApi::Megatron, {"ab"}, 2);
  r.stopToken = 300;
  error = refused(standIn.model, r);
  EXPECT_EQ(error.param, "stop_token");
  EXPECT_EQ(error.message, "stop_token 300 is outside the model's vocabulary of 128");
}

TEST(CompletionTest, StopStrings) {
  StandIn standIn;
  CompletionRequest r = request(CompletionApi::OpenAI, {"ab"}, 10);
  r.stopStrings = {"xyz", "de"};
  std::vector<CompletionResult> results = completed(standIn.model, r);
  EXPECT_EQ(results[0].text, "c");
  EXPECT_TRUE(results[0].stopped);
  // Generation ended at the stop string: "cde" were generated, not 10 tokens.
  EXPECT_EQ(results[0].tokens, bytes("abcde"));
  EXPECT_EQ(standIn.calls, 3);
  // Found after the last token too.
  r.newTokens = 3;
  results = completed(standIn.model, r);
  EXPECT_EQ(results[0].text, "c");
  EXPECT_TRUE(results[0].stopped);
  // The echo keeps the prompt.
  r.echo = true;
  EXPECT_EQ(completed(standIn.model, r)[0].text, "abc");
  // Not found: "length".
  r.stopStrings = {"q"};
  results = completed(standIn.model, r);
  EXPECT_EQ(results[0].text, "abcde");
  EXPECT_FALSE(results[0].stopped);
}

TEST(CompletionTest, LogProbabilities) {
  StandIn standIn;
  CompletionRequest r = request(CompletionApi::Megatron, {"abd"}, 0);
  r.logprobs = true;
  std::vector<CompletionResult> results = completed(standIn.model, r);
  ASSERT_EQ(results[0].logprobs.size(), 2u);
  EXPECT_EQ(results[0].text, "abd");
  // 'b' after 'a' is the sure one; 'd' after 'b' one of the 255 others.
  double sum = std::exp(10.0) + 255;
  EXPECT_NEAR(results[0].logprobs[0], 10.0 - std::log(sum), 1e-12);
  EXPECT_NEAR(results[0].logprobs[1], -std::log(sum), 1e-12);
  // With new tokens: one per token after the first.
  r.newTokens = 2;
  results = completed(standIn.model, r);
  EXPECT_EQ(results[0].tokens, bytes("abdef"));
  EXPECT_EQ(results[0].logprobs.size(), 4u);
  EXPECT_NEAR(results[0].logprobs[3], 10.0 - std::log(sum), 1e-12);
}

TEST(CompletionTest, LogProbability) {
  std::vector<float> uniform(8, 3.0f);
  EXPECT_NEAR(logProbability(uniform, 5), -std::log(8.0), 1e-12);
  std::vector<float> large = {1000.0f, 0.0f};
  EXPECT_NEAR(logProbability(large, 0), 0.0, 1e-12);
  EXPECT_NEAR(logProbability(large, 1), -1000.0, 1e-9);
}

TEST(CompletionTest, SeedsGiveTheirSamples) {
  StandIn standIn;
  // Flat logits: every byte but the end of document equally likely.
  standIn.model.logitsOfLast = [&](std::span<const int64_t>) -> Expected<std::span<const float>> {
    standIn.logits.assign(kVocabulary, 0.0f);
    standIn.logits[0] = -1e9f;
    return std::span<const float>(standIn.logits);
  };
  CompletionRequest r = request(CompletionApi::Megatron, {"ab"}, 8);
  r.sampling.temperature = 1;
  std::vector<int64_t> seven = completed(standIn.model, r, 7)[0].tokens;
  EXPECT_EQ(completed(standIn.model, r, 7)[0].tokens, seven);
  EXPECT_NE(completed(standIn.model, r, 8)[0].tokens, seven);
  // What runtime/generate gives for the same seed.
  GenerationOptions options;
  options.sampling = r.sampling;
  options.sampling.seed = 7;
  options.maxNewTokens = 8;
  options.stopTokens = {0};
  Expected<Generation> direct = generate(standIn.model.logitsOfLast, bytes("ab"), 16, options);
  ASSERT_TRUE(direct);
  EXPECT_EQ(direct->tokens, seven);
}

TEST(CompletionTest, AStoppingServerEndsTheRequest) {
  StandIn standIn;
  std::atomic<bool> stopping{false};
  auto inner = standIn.model.logitsOfLast;
  standIn.model.logitsOfLast = [&](std::span<const int64_t> ids) {
    if (ids.size() == 4)
      stopping = true;
    return inner(ids);
  };
  auto answer = complete(standIn.model, request(CompletionApi::OpenAI, {"ab"}, 10), 1,
                         [&] { return stopping.load(); });
  auto *error = std::get_if<RequestError>(&answer);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->status, 503);
  EXPECT_EQ(standIn.calls, 3);
}

// On several ranks the stop check is a collective: it is asked once before each prompt and
// once before each new token, the same calls for the same request, and never for a request
// refused by its checks.
TEST(CompletionTest, TheStopCheckIsAskedBeforeEachPromptAndToken) {
  StandIn standIn;
  int asked = 0;
  auto answer = complete(standIn.model, request(CompletionApi::OpenAI, {"ab", "b"}, 3), 1, [&] {
    ++asked;
    return false;
  });
  ASSERT_TRUE(std::holds_alternative<std::vector<CompletionResult>>(answer));
  EXPECT_EQ(asked, 2 + standIn.calls);
  asked = 0;
  answer = complete(standIn.model, request(CompletionApi::OpenAI, {"ab", ""}, 3), 1, [&] {
    ++asked;
    return false;
  });
  ASSERT_TRUE(std::holds_alternative<RequestError>(answer));
  EXPECT_EQ(asked, 0);
}

} // namespace
