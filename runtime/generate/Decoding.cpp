//===- Decoding.cpp - Generating tokens one after the other ---------------===//

#include "runtime/generate/Decoding.h"

#include <algorithm>

namespace mtc::rt {

Expected<Generation> generate(const LogitsOfLast &logitsOfLast, std::span<const int64_t> prompt,
                              int64_t window, const GenerationOptions &options,
                              const std::function<void(int64_t)> &onToken) {
  if (Error err = checkSamplingOptions(options.sampling); !err.ok())
    return err;
  if (prompt.empty())
    return makeError("the prompt is empty: there is no token to generate after");
  const int64_t promptSize = static_cast<int64_t>(prompt.size());
  if (promptSize >= window)
    return makeError("the prompt is ", promptSize,
                     " tokens, and the model's window (the plan's "
                     "sequence length) is ",
                     window,
                     ": no room for a new token (prompts are "
                     "not truncated and there is no sliding window)");
  Generation result;
  result.tokens.assign(prompt.begin(), prompt.end());
  result.promptTokens = promptSize;
  const int64_t room = window - promptSize;
  const int64_t limit = options.maxNewTokens < 0 ? room : std::min(options.maxNewTokens, room);
  for (int64_t made = 0; made < limit; ++made) {
    Expected<std::span<const float>> logits = logitsOfLast(result.tokens);
    if (!logits)
      return logits.takeError();
    const int64_t position = static_cast<int64_t>(result.tokens.size());
    Expected<int64_t> token = sampleToken(*logits, options.sampling, position);
    if (!token)
      return token.takeError();
    if (std::find(options.stopTokens.begin(), options.stopTokens.end(), *token) !=
        options.stopTokens.end()) {
      result.reason = StopReason::StopToken;
      result.stopToken = *token;
      return result;
    }
    result.tokens.push_back(*token);
    if (onToken)
      onToken(*token);
  }
  result.reason = options.maxNewTokens >= 0 && options.maxNewTokens <= room
                      ? StopReason::MaxNewTokens
                      : StopReason::WindowFull;
  return result;
}

} // namespace mtc::rt
