//===- CompletionRequest.cpp - The bodies `mtrun serve` reads and writes --===//

#include "runtime/serve/CompletionRequest.h"

#include "runtime/support/Json.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

namespace mtc::rt {
namespace {

/// The members of a request body, each read once; what is left over is unknown.
class Fields {
public:
  explicit Fields(const JsonObject &object) : object_(object) {}

  /// Marks `key` read and returns its value; a null member counts as absent (clients send
  /// null for "the default").
  const JsonValue *take(std::string_view key) {
    const JsonValue *value = object_.find(key);
    if (!value)
      return nullptr;
    taken_.emplace_back(key);
    return value->isNull() ? nullptr : value;
  }
  /// The first member not read, if any.
  std::optional<std::string> unknown() const {
    for (const auto &[key, value] : object_)
      if (std::find(taken_.begin(), taken_.end(), key) == taken_.end())
        return key;
    return std::nullopt;
  }

private:
  const JsonObject &object_;
  std::vector<std::string> taken_;
};

RequestError invalid(std::string_view param, std::string message) {
  return RequestError{400, std::move(message), std::string(param)};
}

/// `value` as the message shows it: its JSON, cut after 40 bytes.
std::string shown(const JsonValue &value) {
  std::string text = value.serialize();
  if (text.size() > 40)
    text = text.substr(0, 40) + "...";
  return text;
}

/// The integer `value` if it is one (an integral number) in [low, high].
std::optional<int64_t> integerIn(const JsonValue &value, int64_t low, int64_t high) {
  std::optional<int64_t> i = value.getInt();
  if (!i || *i < low || *i > high)
    return std::nullopt;
  return i;
}

/// The number `value` if it is a finite one in [low, high].
std::optional<double> numberIn(const JsonValue &value, double low, double high) {
  std::optional<double> d = value.getNumber();
  if (!d || !std::isfinite(*d) || *d < low || *d > high)
    return std::nullopt;
  return d;
}

/// More tokens than any window holds: the window check gives the useful message.
constexpr int64_t kMaxNewTokens = int64_t(1) << 40;

/// A field of an API that mtc does not implement: absent, null, or equal to its default.
struct Unsupported {
  std::string_view key;
  JsonValue defaultValue; // a bool or a number; null: only absence (or null) is accepted
  std::string_view what;  // "<what> not supported by mtrun serve"
};

std::optional<RequestError> checkUnsupported(Fields &fields, const Unsupported &field) {
  const JsonValue *value = fields.take(field.key);
  if (!value)
    return std::nullopt;
  const JsonValue &def = field.defaultValue;
  if ((def.isBool() && value->getBool() == def.getBool()) ||
      (def.isNumber() && value->isNumber() && value->getNumber() == def.getNumber()))
    return std::nullopt;
  return invalid(field.key, concat(field.key, ": ", field.what, " not supported by mtrun serve"));
}

/// A boolean field: Megatron's "<key> must be a boolean value".
std::variant<bool, RequestError> boolean(Fields &fields, std::string_view key, bool fallback) {
  const JsonValue *value = fields.take(key);
  if (!value)
    return fallback;
  if (!value->isBool())
    return invalid(key, concat(key, " must be a boolean value"));
  return *value->getBool();
}

std::variant<CompletionRequest, RequestError> parseMegatron(Fields &fields) {
  // Megatron's checks, in its order and with its messages where it has one.
  CompletionRequest request;
  request.api = CompletionApi::Megatron;
  request.echo = true;
  request.defaultNewTokens = 64;
  const JsonValue *prompts = fields.take("prompts");
  if (!prompts)
    return invalid("prompts", "prompts argument required");
  if (fields.take("max_len"))
    return invalid("max_len", "max_len is no longer used.  Replace with tokens_to_generate");
  if (fields.take("sentences"))
    return invalid("sentences", "sentences is no longer used.  Replace with prompts");
  if (fields.take("beam_width"))
    return invalid("beam_width", "Beam search is no longer supported.");
  const JsonArray *list = prompts->getArray();
  if (!list)
    return invalid("prompts", "prompts is not a list of strings");
  if (list->empty())
    return invalid("prompts", "prompts is empty");
  if (list->size() > kMaxPromptsPerRequest)
    return invalid("prompts", concat("Maximum number of prompts is ", kMaxPromptsPerRequest));
  for (const JsonValue &prompt : *list) {
    if (!prompt.isString())
      return invalid("prompts", "prompts is not a list of strings");
    request.prompts.push_back(*prompt.getString());
  }
  if (const JsonValue *value = fields.take("tokens_to_generate")) {
    if (!value->getInt())
      return invalid("tokens_to_generate", "tokens_to_generate must be an integer greater than 0");
    std::optional<int64_t> n = integerIn(*value, 0, kMaxNewTokens);
    if (!n)
      return invalid("tokens_to_generate",
                     "tokens_to_generate must be an integer greater than or equal to 0");
    request.newTokens = *n;
  }
  std::variant<bool, RequestError> logprobs = boolean(fields, "logprobs", false);
  if (auto *error = std::get_if<RequestError>(&logprobs))
    return *error;
  request.logprobs = std::get<bool>(logprobs);
  if (request.newTokens == 0 && !request.logprobs)
    return invalid("tokens_to_generate", "tokens_to_generate=0 implies logprobs should be True");
  SamplingOptions &sampling = request.sampling;
  sampling.temperature = 1.0;
  if (const JsonValue *value = fields.take("temperature")) {
    std::optional<double> t = numberIn(*value, 0, 100);
    if (!t)
      return invalid("temperature", concat("temperature must be a number from 0.0 (greedy) to "
                                           "100.0, got ",
                                           shown(*value)));
    sampling.temperature = *t;
  }
  if (const JsonValue *value = fields.take("top_k")) {
    if (!value->getInt())
      return invalid("top_k", "top_k must be an integer equal to or greater than 0 and less "
                              "than or equal to 1000");
    std::optional<int64_t> k = integerIn(*value, 0, 1000);
    if (!k)
      return invalid("top_k",
                     "top_k must be equal to or greater than 0 and less than or equal to 1000");
    sampling.topK = *k;
  }
  if (const JsonValue *value = fields.take("top_p")) {
    if (!value->isNumber())
      return invalid("top_p", "top_p must be a positive float less than or equal to 1.0");
    double p = *value->getNumber();
    if (p > 0 && sampling.topK > 0)
      return invalid("top_p", "cannot set both top-k and top-p samplings.");
    if (!(p >= 0 && p <= 1))
      return invalid("top_p", "top_p must be less than or equal to 1.0");
    // Megatron's 0.0 is "no top-p", mtc's 1.
    sampling.topP = p > 0 ? p : 1.0;
  }
  for (const Unsupported &field : {
           Unsupported{"top_p_decay", 0, "a top-p decay is"},
           Unsupported{"top_p_bound", 0, "a top-p bound is"},
       })
    if (std::optional<RequestError> error = checkUnsupported(fields, field))
      return *error;
  for (std::string_view key :
       {"add_BOS", "stop_on_double_eol", "stop_on_eol", "prevent_newline_after_colon"}) {
    std::variant<bool, RequestError> flag = boolean(fields, key, false);
    if (auto *error = std::get_if<RequestError>(&flag))
      return *error;
    if (std::get<bool>(flag))
      return invalid(key, concat(key, ": true is not supported by mtrun serve"));
  }
  for (const std::string &prompt : request.prompts)
    if (prompt.empty())
      return invalid("prompts", "Empty prompts require add_BOS=true, which mtrun serve does not "
                                "support");
  if (const JsonValue *value = fields.take("random_seed")) {
    if (!value->getInt())
      return invalid("random_seed", "random_seed must be integer");
    std::optional<int64_t> seed = integerIn(*value, 0, std::numeric_limits<int64_t>::max());
    if (!seed)
      return invalid("random_seed", "random_seed must be a positive integer");
    request.seed = static_cast<uint64_t>(*seed);
  }
  if (const JsonValue *value = fields.take("stop_token")) {
    std::optional<int64_t> id = integerIn(*value, 0, std::numeric_limits<int64_t>::max());
    if (!id)
      return invalid("stop_token", "stop_token must be an integer (a token id)");
    request.stopToken = *id;
  }
  // Beam search's, which Megatron accepts and ignores since it has none.
  if (const JsonValue *value = fields.take("length_penalty"); value && !value->isNumber())
    return invalid("length_penalty", "length_penalty must be a float");
  return request;
}

std::variant<CompletionRequest, RequestError> parseOpenAI(Fields &fields) {
  CompletionRequest request;
  request.api = CompletionApi::OpenAI;
  request.echo = false;
  request.defaultNewTokens = 16;
  if (const JsonValue *model = fields.take("model"); model && !model->isString())
    return invalid("model", "model must be a string");
  const JsonValue *prompt = fields.take("prompt");
  if (!prompt)
    return invalid("prompt", "prompt is required: a string or a list of strings");
  if (const std::string *text = prompt->getString()) {
    request.prompts.push_back(*text);
  } else if (const JsonArray *list = prompt->getArray(); list && !list->empty()) {
    for (const JsonValue &item : *list) {
      if (item.isNumber() || item.isArray())
        return invalid("prompt", "prompt: token-id prompts are not supported by mtrun serve "
                                 "(send the text)");
      if (!item.isString())
        return invalid("prompt", "prompt must be a string or a list of strings");
      request.prompts.push_back(*item.getString());
    }
  } else {
    return invalid("prompt", "prompt must be a string or a non-empty list of strings");
  }
  if (request.prompts.size() > kMaxPromptsPerRequest)
    return invalid("prompt", concat("prompt: at most ", kMaxPromptsPerRequest, " prompts"));
  for (const std::string &text : request.prompts)
    if (text.empty())
      return invalid("prompt", "prompt: an empty prompt has nothing to continue");
  if (const JsonValue *value = fields.take("max_tokens")) {
    std::optional<int64_t> n = integerIn(*value, 1, kMaxNewTokens);
    if (!n)
      return invalid("max_tokens",
                     concat("max_tokens must be an integer of at least 1, got ", shown(*value)));
    request.newTokens = *n;
  }
  SamplingOptions &sampling = request.sampling;
  sampling.temperature = 1.0;
  if (const JsonValue *value = fields.take("temperature")) {
    std::optional<double> t = numberIn(*value, 0, 2);
    if (!t)
      return invalid("temperature",
                     concat("temperature must be a number from 0 to 2, got ", shown(*value)));
    sampling.temperature = *t;
  }
  if (const JsonValue *value = fields.take("top_p")) {
    std::optional<double> p = numberIn(*value, 0, 1);
    if (!p || *p == 0)
      return invalid("top_p", concat("top_p must be a number in (0, 1], got ", shown(*value)));
    sampling.topP = *p;
  }
  if (const JsonValue *value = fields.take("top_k")) {
    // vLLM's -1 and Megatron's 0 both mean every token.
    std::optional<int64_t> k = integerIn(*value, -1, std::numeric_limits<int64_t>::max());
    if (!k)
      return invalid("top_k", concat("top_k must be an integer of at least 0 (0 or -1: every "
                                     "token), got ",
                                     shown(*value)));
    sampling.topK = std::max<int64_t>(*k, 0);
  }
  if (const JsonValue *value = fields.take("seed")) {
    std::optional<int64_t> seed = integerIn(*value, 0, std::numeric_limits<int64_t>::max());
    if (!seed)
      return invalid("seed", concat("seed must be an integer of at least 0, got ", shown(*value)));
    request.seed = static_cast<uint64_t>(*seed);
  }
  if (const JsonValue *value = fields.take("stop")) {
    // A string, or a list of them.
    std::span<const JsonValue> list(value, 1);
    if (const JsonArray *array = value->getArray())
      list = *array;
    if (list.size() > kMaxStopStrings)
      return invalid("stop", concat("stop: at most ", kMaxStopStrings, " stop sequences"));
    for (const JsonValue &item : list) {
      if (!item.isString() || item.getString()->empty())
        return invalid("stop", "stop must be a non-empty string or a list of them");
      request.stopStrings.push_back(*item.getString());
    }
  }
  std::variant<bool, RequestError> echo = boolean(fields, "echo", false);
  if (auto *error = std::get_if<RequestError>(&echo))
    return *error;
  request.echo = std::get<bool>(echo);
  if (const JsonValue *value = fields.take("user"); value && !value->isString())
    return invalid("user", "user must be a string");
  if (const JsonValue *value = fields.take("logit_bias")) {
    const JsonObject *bias = value->getObject();
    if (!bias || !bias->empty())
      return invalid("logit_bias", "logit_bias: logit biases are not supported by mtrun serve");
  }
  for (const Unsupported &field : {
           Unsupported{"n", 1, "more than one choice is"},
           Unsupported{"best_of", 1, "best_of is"},
           Unsupported{"stream", false, "streaming is"},
           Unsupported{"stream_options", nullptr, "streaming is"},
           Unsupported{"logprobs", nullptr, "log probabilities are"},
           Unsupported{"suffix", nullptr, "a suffix is"},
           Unsupported{"presence_penalty", 0, "a presence penalty is"},
           Unsupported{"frequency_penalty", 0, "a frequency penalty is"},
       })
    if (std::optional<RequestError> error = checkUnsupported(fields, field))
      return *error;
  return request;
}

} // namespace

std::variant<CompletionRequest, RequestError> parseCompletionRequest(CompletionApi api,
                                                                     std::string_view body) {
  Expected<JsonValue> json = parseJson(body);
  if (!json)
    return invalid("", "the body is not JSON: " + json.error().message());
  const JsonObject *object = json->getObject();
  if (!object)
    return invalid("", concat("the body must be a JSON object, not ", jsonKindName(json->kind())));
  Fields fields(*object);
  std::variant<CompletionRequest, RequestError> request =
      api == CompletionApi::Megatron ? parseMegatron(fields) : parseOpenAI(fields);
  if (std::holds_alternative<CompletionRequest>(request))
    if (std::optional<std::string> unknown = fields.unknown())
      return invalid(*unknown, api == CompletionApi::OpenAI
                                   ? "Unrecognized request argument supplied: " + *unknown
                                   : "unknown field '" + *unknown + "'");
  return request;
}

std::string completionResponse(const CompletionRequest &request,
                               const std::vector<CompletionResult> &results, std::string_view id,
                               int64_t created, std::string_view model) {
  if (request.api == CompletionApi::Megatron) {
    JsonArray texts, segments, tokens, logprobs;
    for (const CompletionResult &result : results) {
      texts.emplace_back(result.text);
      segments.emplace_back(JsonArray(result.segments.begin(), result.segments.end()));
      tokens.emplace_back(JsonArray(result.tokens.begin(), result.tokens.end()));
      logprobs.emplace_back(JsonArray(result.logprobs.begin(), result.logprobs.end()));
    }
    JsonObject answer{{"text", std::move(texts)},
                      {"segments", std::move(segments)},
                      {"tokens", std::move(tokens)}};
    if (request.logprobs)
      answer.set("logprobs", std::move(logprobs));
    return JsonValue(std::move(answer)).serialize();
  }
  JsonArray choices;
  int64_t promptTokens = 0, completionTokens = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const CompletionResult &result = results[i];
    choices.emplace_back(JsonObject{{"text", result.text},
                                    {"index", static_cast<int64_t>(i)},
                                    {"logprobs", nullptr},
                                    {"finish_reason", result.stopped ? "stop" : "length"}});
    promptTokens += result.promptTokens;
    completionTokens += static_cast<int64_t>(result.tokens.size()) - result.promptTokens;
  }
  return JsonValue(
             JsonObject{{"id", std::string(id)},
                        {"object", "text_completion"},
                        {"created", created},
                        {"model", std::string(model)},
                        {"choices", std::move(choices)},
                        {"usage", JsonObject{{"prompt_tokens", promptTokens},
                                             {"completion_tokens", completionTokens},
                                             {"total_tokens", promptTokens + completionTokens}}}})
      .serialize();
}

std::string errorResponse(CompletionApi api, const RequestError &error) {
  if (api == CompletionApi::Megatron)
    return JsonValue(JsonObject{{"message", error.message}}).serialize();
  const char *type = error.status >= 500 ? "server_error" : "invalid_request_error";
  return JsonValue(JsonObject{
                       {"error", JsonObject{{"message", error.message},
                                            {"type", type},
                                            {"param", error.param.empty() ? JsonValue(nullptr)
                                                                          : JsonValue(error.param)},
                                            {"code", nullptr}}}})
      .serialize();
}

} // namespace mtc::rt
