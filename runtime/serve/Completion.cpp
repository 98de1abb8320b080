//===- Completion.cpp - Answering one request of `mtrun serve` ------------===//

#include "runtime/serve/Completion.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace mtc::rt {
namespace {

/// Where the first of `stops` begins in `text`, if one does.
std::optional<size_t> firstStop(std::string_view text, const std::vector<std::string> &stops) {
  std::optional<size_t> first;
  for (const std::string &stop : stops)
    if (size_t at = text.find(stop); at != std::string_view::npos && (!first || at < *first))
      first = at;
  return first;
}

/// A prompt's ids and the new tokens it asks for, checked.
struct CheckedPrompt {
  std::vector<int64_t> ids;
  int64_t newTokens = 0;
};

} // namespace

double logProbability(std::span<const float> logits, int64_t id) {
  double largest = -std::numeric_limits<double>::infinity();
  for (float v : logits)
    largest = std::max(largest, double(v));
  double sum = 0;
  for (float v : logits)
    sum += std::exp(double(v) - largest);
  return double(logits[static_cast<size_t>(id)]) - largest - std::log(sum);
}

std::variant<std::vector<CompletionResult>, RequestError> complete(const CompletionModel &model,
                                                                   const CompletionRequest &request,
                                                                   uint64_t seed,
                                                                   const StopCheck &stopping) {
  const bool megatron = request.api == CompletionApi::Megatron;
  const std::string promptField = megatron ? "prompts" : "prompt";
  const std::string newField = megatron ? "tokens_to_generate" : "max_tokens";
  Tokenizer &tokenizer = *model.tokenizer;
  const int64_t window = model.window;
  const int64_t stopToken = request.stopToken.value_or(tokenizer.eod());
  if (stopToken >= model.vocabulary)
    return RequestError{400,
                        concat("stop_token ", stopToken, " is outside the model's vocabulary of ",
                               model.vocabulary),
                        "stop_token"};
  const RequestError stopped{503, "the server is stopping: the request was not completed", ""};

  // Every prompt is checked before any is generated.
  std::vector<CheckedPrompt> prompts;
  for (size_t i = 0; i < request.prompts.size(); ++i) {
    const bool single = request.prompts.size() == 1;
    const std::string where = single ? promptField : concat(promptField, "[", i, "]");
    const std::string which = single ? "the prompt" : where;
    auto refuse = [&](auto... pieces) {
      return RequestError{400, concat(where, ": ", pieces...), promptField};
    };
    CheckedPrompt prompt;
    if (Error err = tokenizer.encode(request.prompts[i], prompt.ids); !err.ok())
      return refuse(err.message());
    if (prompt.ids.empty())
      return refuse("no tokens: there is nothing to continue");
    for (int64_t id : prompt.ids)
      if (id < 0 || id >= model.vocabulary)
        return refuse("the ", tokenizer.name(), " tokenizer gives id ", id,
                      ", outside the model's vocabulary of ", model.vocabulary,
                      " (is it the tokenizer the model was trained with?)");
    const int64_t length = static_cast<int64_t>(prompt.ids.size());
    if (!request.newTokens && length >= window)
      return refuse(length, " tokens fill the model's window of ", window,
                    " tokens (the plan's sequence length): no room for a new token (prompts are "
                    "not truncated)");
    prompt.newTokens =
        request.newTokens.value_or(std::min(request.defaultNewTokens, window - length));
    if (length + prompt.newTokens > window)
      return RequestError{400,
                          concat(newField, ": ", which, "'s ", length, " tokens and ",
                                 prompt.newTokens, " new ones exceed the model's window of ",
                                 window, " tokens (the plan's sequence length)"),
                          newField};
    prompts.push_back(std::move(prompt));
  }

  GenerationOptions options;
  options.sampling = request.sampling;
  options.sampling.seed = seed;
  options.stopTokens = {stopToken};
  std::vector<CompletionResult> results;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (stopping && stopping())
      return stopped;
    const std::vector<int64_t> &prompt = prompts[i].ids;
    CompletionResult result;
    result.promptTokens = static_cast<int64_t>(prompt.size());
    result.tokens = prompt;
    if (prompts[i].newTokens > 0) {
      // The logits of the next token, unless the server is stopping or the text so far
      // holds a stop string: then generation ends with the tokens it was given.
      bool cancelled = false, atStopString = false;
      std::vector<int64_t> sofar;
      LogitsOfLast logits = [&](std::span<const int64_t> ids) -> Expected<std::span<const float>> {
        if (stopping && stopping()) {
          cancelled = true;
          return makeError("the server is stopping");
        }
        if (!request.stopStrings.empty()) {
          std::string text;
          if (Error err = tokenizer.decode(ids.subspan(prompt.size()), text); !err.ok())
            return err;
          if (firstStop(text, request.stopStrings)) {
            atStopString = true;
            sofar.assign(ids.begin(), ids.end());
            return makeError("stop string");
          }
        }
        return model.logitsOfLast(ids);
      };
      options.maxNewTokens = prompts[i].newTokens;
      Expected<Generation> generation = generate(logits, prompt, window, options);
      if (cancelled)
        return stopped;
      if (atStopString) {
        result.tokens = std::move(sofar);
      } else if (!generation) {
        return RequestError{500, concat("generating: ", generation.error().message()), ""};
      } else {
        result.tokens = std::move(generation->tokens);
        result.stopped = generation->reason == StopReason::StopToken;
      }
    }
    std::span<const int64_t> tokens(result.tokens);
    std::string generated;
    if (Error err = tokenizer.decode(tokens.subspan(prompt.size()), generated); !err.ok())
      return RequestError{500, concat("decoding the generated tokens: ", err.message()), ""};
    if (std::optional<size_t> at = firstStop(generated, request.stopStrings)) {
      generated.resize(*at);
      result.stopped = true;
    }
    result.text = request.echo ? request.prompts[i] + generated : generated;
    if (megatron) {
      for (int64_t id : result.tokens) {
        std::string segment;
        if (Error err = tokenizer.decode(std::span<const int64_t>(&id, 1), segment); !err.ok())
          return RequestError{500, concat("decoding token ", id, ": ", err.message()), ""};
        result.segments.push_back(std::move(segment));
      }
    }
    if (request.logprobs) {
      Error err = model.logitsOfEach(tokens, [&](int64_t t, std::span<const float> row) {
        if (static_cast<size_t>(t) + 1 < tokens.size())
          result.logprobs.push_back(logProbability(row, tokens[static_cast<size_t>(t) + 1]));
      });
      if (!err.ok())
        return RequestError{500, concat("scoring the tokens: ", err.message()), ""};
    }
    results.push_back(std::move(result));
  }
  return results;
}

} // namespace mtc::rt
