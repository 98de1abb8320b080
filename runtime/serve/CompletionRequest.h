//===- CompletionRequest.h - The bodies `mtrun serve` reads and writes -*- C++ -*-===//
//
// The two text-generation APIs `mtrun serve` speaks, read into one request, and their
// answers (docs/user-guide.md, "Serving"):
//
// - Megatron-LM's text generation server, `PUT /api`: {"prompts": [...] (1 to 128 strings),
//   "tokens_to_generate" (default 64), "temperature" (default 1.0), "top_k" (default 0:
//   off, at most 1000), "top_p" (default 0.0: off; not with top_k), "random_seed",
//   "logprobs", "stop_token"}, answered with {"text": [prompt + continuation, ...],
//   "segments": [[one string per token], ...], "tokens": [[ids], ...], "logprobs"?: [[log
//   p(token t+1 | tokens up to t)], ...]}, its refusals with Megatron's messages. Unlike
//   Megatron, temperature 0 is accepted and is greedy (as Megatron's /completions treats it).
// - OpenAI's completions, `POST /v1/completions`: {"prompt": text or [texts], "max_tokens"
//   (default 16), "temperature" (default 1, at most 2), "top_p" (default 1), "seed", "stop"
//   (up to 4 strings), "echo", "model", "user", "top_k" (vLLM's and Megatron's extension)},
//   answered with a "text_completion" object: "choices" with "finish_reason" "stop" or
//   "length", and "usage".
//
// A field either API defines but mtc does not implement (beam search, OpenAI's log
// probabilities, several choices, streaming, penalties, ...) is refused when set to anything
// but its default, and an unknown field is refused too, so that a request never silently
// means less than it says (a misspelt "temprature" is an error, not a default). Every
// refusal is a RequestError naming the field. Plain C++20, no HTTP: Serve.cpp of mtrun
// moves the bodies.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SERVE_COMPLETIONREQUEST_H
#define MTC_RUNTIME_SERVE_COMPLETIONREQUEST_H

#include "runtime/generate/Sampler.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace mtc::rt {

enum class CompletionApi { Megatron, OpenAI };

/// At most this many prompts in one request (Megatron's limit).
inline constexpr size_t kMaxPromptsPerRequest = 128;
/// At most this many stop strings (OpenAI's limit).
inline constexpr size_t kMaxStopStrings = 4;

struct CompletionRequest {
  CompletionApi api = CompletionApi::Megatron;
  std::vector<std::string> prompts;
  /// temperature, top-k, top-p; the seed is `seed`'s.
  SamplingOptions sampling;
  /// The request's seed; none: the server chooses one (each unseeded request another).
  std::optional<uint64_t> seed;
  /// New tokens per prompt as asked; none: `defaultNewTokens`, or fewer where the prompt
  /// leaves less room in the model's window.
  std::optional<int64_t> newTokens;
  int64_t defaultNewTokens = 64;
  /// Megatron's stop_token; none: the tokenizer's end of document, which always ends an
  /// OpenAI completion.
  std::optional<int64_t> stopToken;
  /// OpenAI's stop: the completion ends before the first of them it contains.
  std::vector<std::string> stopStrings;
  /// Megatron's logprobs: the log-probability of every token after the first.
  bool logprobs = false;
  /// OpenAI's echo: the answer's text starts with the prompt (Megatron's always does).
  bool echo = true;
};

/// A refusal: the HTTP status, a message, and the request field at fault (empty: none).
struct RequestError {
  int status = 400;
  std::string message;
  std::string param;
};

/// Reads a request body of `api`.
std::variant<CompletionRequest, RequestError> parseCompletionRequest(CompletionApi api,
                                                                     std::string_view body);

/// One prompt's completion, for the answer.
struct CompletionResult {
  std::string text;                  // the answer's text (with the prompt when echoed)
  std::vector<int64_t> tokens;       // the prompt's ids, then the generated ones
  std::vector<std::string> segments; // the text of each of `tokens`
  std::vector<double> logprobs;      // log p(tokens[t + 1] | tokens[0..t]), when asked
  int64_t promptTokens = 0;
  bool stopped = false; // a stop token or stop string ended it ("stop"), else "length"
};

/// The answer's body: Megatron's {"text", "segments", "tokens"[, "logprobs"]}, or OpenAI's
/// text_completion with `id`, `created` (seconds since the epoch) and `model`.
std::string completionResponse(const CompletionRequest &request,
                               const std::vector<CompletionResult> &results, std::string_view id,
                               int64_t created, std::string_view model);

/// An error's body: Megatron's {"message": ...} (what its tools/text_generation_cli.py
/// reads); OpenAI's {"error": {"message", "type", "param", "code"}}.
std::string errorResponse(CompletionApi api, const RequestError &error);

} // namespace mtc::rt

#endif // MTC_RUNTIME_SERVE_COMPLETIONREQUEST_H
