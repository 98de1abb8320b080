//===- CompletionRequestTest.cpp - The bodies `mtrun serve` reads and writes ---===//

#include "runtime/serve/CompletionRequest.h"

#include "runtime/support/Json.h"

#include <gtest/gtest.h>

#include <string>

using namespace mtc::rt;

namespace {

constexpr CompletionApi kMegatron = CompletionApi::Megatron;
constexpr CompletionApi kOpenAI = CompletionApi::OpenAI;

CompletionRequest parsed(CompletionApi api, const std::string &body) {
  auto result = parseCompletionRequest(api, body);
  if (auto *error = std::get_if<RequestError>(&result)) {
    ADD_FAILURE() << body << ": " << error->message;
    return {};
  }
  return std::get<CompletionRequest>(result);
}

/// The refusal of `body`, which must be a 400.
RequestError refusal(CompletionApi api, const std::string &body) {
  auto result = parseCompletionRequest(api, body);
  auto *error = std::get_if<RequestError>(&result);
  if (!error) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  EXPECT_EQ(error->status, 400) << body;
  return *error;
}

std::string refused(CompletionApi api, const std::string &body) {
  return refusal(api, body).message;
}

/// `{"prompts": ["a"], <key>: <value>}`.
std::string megatronWith(const std::string &key, const std::string &value) {
  return R"({"prompts": ["a"], ")" + key + "\": " + value + "}";
}

TEST(CompletionRequestTest, MegatronDefaults) {
  CompletionRequest r = parsed(kMegatron, R"({"prompts": ["hello", "world"]})");
  EXPECT_EQ(r.api, kMegatron);
  EXPECT_EQ(r.prompts, (std::vector<std::string>{"hello", "world"}));
  EXPECT_FALSE(r.newTokens);
  EXPECT_EQ(r.defaultNewTokens, 64);
  EXPECT_EQ(r.sampling.temperature, 1.0);
  EXPECT_EQ(r.sampling.topK, 0);
  EXPECT_EQ(r.sampling.topP, 1.0);
  EXPECT_FALSE(r.seed);
  EXPECT_FALSE(r.stopToken);
  EXPECT_FALSE(r.logprobs);
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.stopStrings.empty());
}

TEST(CompletionRequestTest, MegatronFields) {
  CompletionRequest r = parsed(kMegatron, R"({"prompts": ["a"], "tokens_to_generate": 5,
      "temperature": 0, "top_k": 3, "random_seed": 9, "stop_token": 7, "logprobs": true,
      "add_BOS": false, "stop_on_eol": false, "top_p_decay": 0.0, "length_penalty": 1.5})");
  EXPECT_EQ(r.newTokens, 5);
  EXPECT_EQ(r.sampling.temperature, 0.0);
  EXPECT_EQ(r.sampling.topK, 3);
  EXPECT_EQ(r.seed, 9u);
  EXPECT_EQ(r.stopToken, 7);
  EXPECT_TRUE(r.logprobs);
  // Megatron's top_p 0.0 is "no top-p", mtc's 1; null is the default.
  EXPECT_EQ(parsed(kMegatron, megatronWith("top_p", "0.0")).sampling.topP, 1.0);
  EXPECT_EQ(parsed(kMegatron, megatronWith("top_p", "0.5")).sampling.topP, 0.5);
  EXPECT_EQ(parsed(kMegatron, megatronWith("top_k", "null")).sampling.topK, 0);
  // Scoring only: no new token, the log probabilities of the prompt's.
  CompletionRequest score =
      parsed(kMegatron, R"({"prompts": ["a"], "tokens_to_generate": 0, "logprobs": true})");
  EXPECT_EQ(score.newTokens, 0);
}

TEST(CompletionRequestTest, MegatronRefusalsAreMegatrons) {
  EXPECT_NE(refused(kMegatron, "{\"prompts\": [").find("the body is not JSON: json: "),
            std::string::npos);
  EXPECT_EQ(refused(kMegatron, "[1]"), "the body must be a JSON object, not array");
  EXPECT_EQ(refused(kMegatron, "{}"), "prompts argument required");
  EXPECT_EQ(refused(kMegatron, R"({"prompts": "hi"})"), "prompts is not a list of strings");
  EXPECT_EQ(refused(kMegatron, R"({"prompts": [1]})"), "prompts is not a list of strings");
  EXPECT_EQ(refused(kMegatron, R"({"prompts": []})"), "prompts is empty");
  std::string many = "{\"prompts\": [\"a\"";
  for (int i = 0; i < 128; ++i)
    many += ", \"a\"";
  EXPECT_EQ(refused(kMegatron, many + "]}"), "Maximum number of prompts is 128");
  EXPECT_EQ(refused(kMegatron, R"({"prompts": [""]})"),
            "Empty prompts require add_BOS=true, which mtrun serve does not support");
  EXPECT_EQ(refused(kMegatron, megatronWith("max_len", "2")),
            "max_len is no longer used.  Replace with tokens_to_generate");
  EXPECT_EQ(refused(kMegatron, megatronWith("sentences", "[]")),
            "sentences is no longer used.  Replace with prompts");
  EXPECT_EQ(refused(kMegatron, megatronWith("beam_width", "2")),
            "Beam search is no longer supported.");
  for (const char *n : {"\"5\"", "2.5", "true"})
    EXPECT_EQ(refused(kMegatron, megatronWith("tokens_to_generate", n)),
              "tokens_to_generate must be an integer greater than 0")
        << n;
  EXPECT_EQ(refused(kMegatron, megatronWith("tokens_to_generate", "-1")),
            "tokens_to_generate must be an integer greater than or equal to 0");
  EXPECT_EQ(refused(kMegatron, megatronWith("tokens_to_generate", "0")),
            "tokens_to_generate=0 implies logprobs should be True");
  EXPECT_EQ(refused(kMegatron, megatronWith("logprobs", "1")), "logprobs must be a boolean value");
  for (const char *t : {"101", "-1", "\"hot\"", "1e300", "true"})
    EXPECT_EQ(refused(kMegatron, megatronWith("temperature", t))
                  .rfind("temperature must be a number from 0.0 (greedy) to 100.0, got ", 0),
              0u)
        << t;
  EXPECT_EQ(refused(kMegatron, megatronWith("temperature", "-1")),
            "temperature must be a number from 0.0 (greedy) to 100.0, got -1");
  EXPECT_EQ(refused(kMegatron, megatronWith("top_k", "\"3\"")),
            "top_k must be an integer equal to or greater than 0 and less than or equal to 1000");
  EXPECT_EQ(refused(kMegatron, megatronWith("top_k", "1001")),
            "top_k must be equal to or greater than 0 and less than or equal to 1000");
  EXPECT_EQ(refused(kMegatron, R"({"prompts": ["a"], "top_k": 2, "top_p": 0.5})"),
            "cannot set both top-k and top-p samplings.");
  EXPECT_EQ(refused(kMegatron, megatronWith("top_p", "1.5")),
            "top_p must be less than or equal to 1.0");
  EXPECT_EQ(refused(kMegatron, megatronWith("top_p", "\"0.5\"")),
            "top_p must be a positive float less than or equal to 1.0");
  EXPECT_EQ(refused(kMegatron, megatronWith("top_p_decay", "0.5")),
            "top_p_decay: a top-p decay is not supported by mtrun serve");
  EXPECT_EQ(refused(kMegatron, megatronWith("add_BOS", "1")), "add_BOS must be a boolean value");
  EXPECT_EQ(refused(kMegatron, megatronWith("add_BOS", "true")),
            "add_BOS: true is not supported by mtrun serve");
  EXPECT_EQ(refused(kMegatron, megatronWith("stop_on_eol", "true")),
            "stop_on_eol: true is not supported by mtrun serve");
  EXPECT_EQ(refused(kMegatron, megatronWith("random_seed", "\"1\"")),
            "random_seed must be integer");
  EXPECT_EQ(refused(kMegatron, megatronWith("random_seed", "-1")),
            "random_seed must be a positive integer");
  EXPECT_EQ(refused(kMegatron, megatronWith("stop_token", "-3")),
            "stop_token must be an integer (a token id)");
  EXPECT_EQ(refused(kMegatron, megatronWith("length_penalty", "\"x\"")),
            "length_penalty must be a float");
  EXPECT_EQ(refused(kMegatron, megatronWith("temprature", "0.5")), "unknown field 'temprature'");
}

TEST(CompletionRequestTest, RefusalsNameTheirField) {
  EXPECT_EQ(refusal(kMegatron, megatronWith("temperature", "-1")).param, "temperature");
  EXPECT_EQ(refusal(kMegatron, megatronWith("temprature", "1")).param, "temprature");
  EXPECT_EQ(refusal(kMegatron, "{}").param, "prompts");
  EXPECT_EQ(refusal(kMegatron, "{").param, "");
  EXPECT_EQ(refusal(kOpenAI, R"({"prompt": "a", "top_p": 2})").param, "top_p");
  EXPECT_EQ(refusal(kOpenAI, R"({"prompt": "a", "n": 3})").param, "n");
}

TEST(CompletionRequestTest, OpenAIDefaultsAndFields) {
  CompletionRequest r = parsed(kOpenAI, R"({"model": "gpt-tiny", "prompt": "hello"})");
  EXPECT_EQ(r.api, kOpenAI);
  EXPECT_EQ(r.prompts, (std::vector<std::string>{"hello"}));
  EXPECT_FALSE(r.newTokens);
  EXPECT_EQ(r.defaultNewTokens, 16);
  EXPECT_EQ(r.sampling.temperature, 1.0);
  EXPECT_EQ(r.sampling.topP, 1.0);
  EXPECT_FALSE(r.seed);
  EXPECT_FALSE(r.echo);
  EXPECT_FALSE(r.logprobs);
  CompletionRequest s = parsed(kOpenAI, R"({"prompt": ["a", "b"], "max_tokens": 3,
      "temperature": 0, "top_p": 0.9, "top_k": 4, "seed": 5, "echo": true, "n": 1,
      "best_of": 1, "stream": false, "stop": null, "logprobs": null, "suffix": null,
      "presence_penalty": 0, "frequency_penalty": 0.0, "logit_bias": {}, "user": "me"})");
  EXPECT_EQ(s.prompts.size(), 2u);
  EXPECT_EQ(s.newTokens, 3);
  EXPECT_EQ(s.sampling.temperature, 0.0);
  EXPECT_EQ(s.sampling.topP, 0.9);
  EXPECT_EQ(s.sampling.topK, 4);
  EXPECT_EQ(s.seed, 5u);
  EXPECT_TRUE(s.echo);
  EXPECT_EQ(parsed(kOpenAI, R"({"prompt": "a", "top_k": -1})").sampling.topK, 0);
  EXPECT_EQ(parsed(kOpenAI, R"({"prompt": "a", "stop": "\n"})").stopStrings,
            (std::vector<std::string>{"\n"}));
  EXPECT_EQ(parsed(kOpenAI, R"({"prompt": "a", "stop": ["x", "yz"]})").stopStrings,
            (std::vector<std::string>{"x", "yz"}));
}

TEST(CompletionRequestTest, OpenAIRefusals) {
  EXPECT_EQ(refused(kOpenAI, R"({"model": "m"})"),
            "prompt is required: a string or a list of strings");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": [1, 2]})"),
            "prompt: token-id prompts are not supported by mtrun serve (send the text)");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": []})"),
            "prompt must be a string or a non-empty list of strings");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": ""})"),
            "prompt: an empty prompt has nothing to continue");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "model": 3})"), "model must be a string");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "max_tokens": 0})"),
            "max_tokens must be an integer of at least 1, got 0");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "temperature": 3})"),
            "temperature must be a number from 0 to 2, got 3");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "top_p": 0})"),
            "top_p must be a number in (0, 1], got 0");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "top_p": 1.01})"),
            "top_p must be a number in (0, 1], got 1.01");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "seed": -2})"),
            "seed must be an integer of at least 0, got -2");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "n": 2})"),
            "n: more than one choice is not supported by mtrun serve");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "stream": true})"),
            "stream: streaming is not supported by mtrun serve");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "logprobs": 2})"),
            "logprobs: log probabilities are not supported by mtrun serve");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "logit_bias": {"1": 5}})"),
            "logit_bias: logit biases are not supported by mtrun serve");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "stop": ["a", "b", "c", "d", "e"]})"),
            "stop: at most 4 stop sequences");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "stop": [""]})"),
            "stop must be a non-empty string or a list of them");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "stop": 3})"),
            "stop must be a non-empty string or a list of them");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "echo": "yes"})"), "echo must be a boolean value");
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "prompts": ["b"]})"),
            "Unrecognized request argument supplied: prompts");
  // The huge value is shown cut.
  EXPECT_EQ(refused(kOpenAI, R"({"prompt": "a", "max_tokens": ")" + std::string(100, 'x') + "\"}"),
            "max_tokens must be an integer of at least 1, got \"" + std::string(39, 'x') + "...");
}

TEST(CompletionRequestTest, Answers) {
  CompletionRequest megatron = parsed(kMegatron, R"({"prompts": ["a", "b"]})");
  std::vector<CompletionResult> results(2);
  results[0].text = "a \"quoted\"\nline \xc3\xa9";
  results[0].tokens = {97, 32, 34};
  results[0].segments = {"a", " ", "\""};
  results[0].promptTokens = 1;
  results[0].stopped = true;
  results[1].text = "b";
  results[1].tokens = {98, 99, 100, 101};
  results[1].segments = {"b", "c", "d", "e"};
  results[1].promptTokens = 1;
  Expected<JsonValue> answer =
      parseJson(completionResponse(megatron, results, "cmpl-0", 5, "gpt-tiny"));
  ASSERT_TRUE(answer) << answer.error().message();
  EXPECT_EQ(*answer,
            JsonValue(JsonObject{
                {"text", JsonArray{results[0].text, "b"}},
                {"segments", JsonArray{JsonArray{"a", " ", "\""}, JsonArray{"b", "c", "d", "e"}}},
                {"tokens", JsonArray{JsonArray{97, 32, 34}, JsonArray{98, 99, 100, 101}}},
            }));
  // With log probabilities.
  megatron.logprobs = true;
  results[0].logprobs = {-0.5, -1.25};
  results[1].logprobs = {-1, -2, -3};
  answer = parseJson(completionResponse(megatron, results, "cmpl-0", 5, "gpt-tiny"));
  ASSERT_TRUE(answer) << answer.error().message();
  EXPECT_EQ(*answer->getObject()->find("logprobs"),
            JsonValue(JsonArray{JsonArray{-0.5, -1.25}, JsonArray{-1.0, -2.0, -3.0}}));

  CompletionRequest openai = parsed(kOpenAI, R"({"model": "m", "prompt": ["a", "b"]})");
  answer = parseJson(completionResponse(openai, results, "cmpl-7", 1700000000, "gpt-tiny"));
  ASSERT_TRUE(answer) << answer.error().message();
  const JsonObject &o = *answer->getObject();
  EXPECT_EQ(*o.find("id"), JsonValue("cmpl-7"));
  EXPECT_EQ(*o.find("object"), JsonValue("text_completion"));
  EXPECT_EQ(*o.find("created"), JsonValue(1700000000));
  EXPECT_EQ(*o.find("model"), JsonValue("gpt-tiny"));
  const JsonArray &choices = *o.find("choices")->getArray();
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_EQ(choices[0], JsonValue(JsonObject{{"text", results[0].text},
                                             {"index", 0},
                                             {"logprobs", nullptr},
                                             {"finish_reason", "stop"}}));
  EXPECT_EQ(*choices[1].getObject()->find("finish_reason"), JsonValue("length"));
  EXPECT_EQ(*choices[1].getObject()->find("index"), JsonValue(1));
  EXPECT_EQ(
      *o.find("usage"),
      JsonValue(JsonObject{{"prompt_tokens", 2}, {"completion_tokens", 5}, {"total_tokens", 7}}));
}

TEST(CompletionRequestTest, ErrorBodies) {
  RequestError error{400, "bad \"thing\"\n", "top_p"};
  EXPECT_EQ(*parseJson(errorResponse(kMegatron, error)),
            JsonValue(JsonObject{{"message", "bad \"thing\"\n"}}));
  EXPECT_EQ(*parseJson(errorResponse(kOpenAI, error)),
            JsonValue(JsonObject{{"error", JsonObject{{"message", "bad \"thing\"\n"},
                                                      {"type", "invalid_request_error"},
                                                      {"param", "top_p"},
                                                      {"code", nullptr}}}}));
  RequestError busy{503, "busy", ""};
  EXPECT_EQ(*parseJson(errorResponse(kOpenAI, busy)),
            JsonValue(JsonObject{{"error", JsonObject{{"message", "busy"},
                                                      {"type", "server_error"},
                                                      {"param", nullptr},
                                                      {"code", nullptr}}}}));
}

} // namespace
