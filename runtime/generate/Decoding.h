//===- Decoding.h - Generating tokens one after the other -------*- C++ -*-===//
//
// The loop of `mtrun generate`: from the prompt's ids, score the sequence, choose the next
// token (Sampler.h), append it, until a stop token, the number of new tokens asked for, or
// the end of the model's window (the plan's sequence length: positions past it have no
// learned position and were never trained; there is no sliding window). Each step asks for
// the logits of the whole sequence so far: the window path (LogitsFunction.h) scores it all
// again, the KV cache (KVCache.h) only its new last token, which the causal model makes equal.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_GENERATE_DECODING_H
#define MTC_RUNTIME_GENERATE_DECODING_H

#include "runtime/generate/Sampler.h"

#include <functional>
#include <span>
#include <vector>

namespace mtc::rt {

/// Why generation ended.
enum class StopReason { MaxNewTokens, StopToken, WindowFull };

struct GenerationOptions {
  SamplingOptions sampling;
  /// New tokens at most; -1: until the window is full.
  int64_t maxNewTokens = -1;
  /// Ids that end generation when chosen (they are not appended).
  std::vector<int64_t> stopTokens;
};

struct Generation {
  std::vector<int64_t> tokens; // the prompt's, then the generated ones
  int64_t promptTokens = 0;
  StopReason reason = StopReason::MaxNewTokens;
  int64_t stopToken = -1; // the stop token chosen (StopToken only)
};

/// The logits of the last position of `ids` (the scores of the token after it), one per id
/// of the vocabulary.
using LogitsOfLast = std::function<Expected<std::span<const float>>(std::span<const int64_t> ids)>;

/// Generates after `prompt` in a window of `window` positions. Fails when the prompt is
/// empty, leaves no room in the window, or the sampling options are invalid; `onToken`
/// (optional) sees each new token as it is chosen.
Expected<Generation> generate(const LogitsOfLast &logitsOfLast, std::span<const int64_t> prompt,
                              int64_t window, const GenerationOptions &options,
                              const std::function<void(int64_t)> &onToken = {});

} // namespace mtc::rt

#endif // MTC_RUNTIME_GENERATE_DECODING_H
