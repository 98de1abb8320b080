//===- Sampler.cpp - The next token from a position's logits --------------===//

#include "runtime/generate/Sampler.h"

#include "runtime/support/Philox.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace mtc::rt {

Error checkSamplingOptions(const SamplingOptions &options) {
  if (!std::isfinite(options.temperature) || options.temperature < 0)
    return makeError("the temperature must be a finite number >= 0 (0: greedy), got ",
                     options.temperature);
  if (options.topK < 0)
    return makeError("top-k must be >= 0 (0: every token), got ", options.topK);
  if (!(options.topP > 0 && options.topP <= 1))
    return makeError("top-p must be in (0, 1] (1: every token), got ", options.topP);
  return Error::success();
}

double samplingDraw(uint64_t seed, int64_t position) {
  uint32_t words[4];
  mtc_philox_element(seed, 0, static_cast<uint64_t>(position), 0, words);
  uint64_t bits = (uint64_t(words[0]) << 21) | (words[1] >> 11);
  return static_cast<double>(bits) * 0x1p-53;
}

Expected<int64_t> sampleToken(std::span<const float> logits, const SamplingOptions &options,
                              int64_t position) {
  if (logits.empty())
    return makeError("no logits to choose a token from");
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isfinite(logits[i]))
      return makeError("the logit of token ", i, " at position ", position - 1, " is ", logits[i],
                       " (the model's parameters are not finite)");
  if (options.temperature == 0)
    return static_cast<int64_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());

  // Ids by decreasing logit, lower ids first among equal ones; then top-k.
  std::vector<int64_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int64_t a, int64_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  if (options.topK > 0 && static_cast<size_t>(options.topK) < ids.size())
    ids.resize(static_cast<size_t>(options.topK));
  // softmax(logits / T) over the kept ids, in double; the largest is exp(0) = 1.
  const double largest = logits[size_t(ids.front())];
  std::vector<double> weights(ids.size());
  double total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    weights[i] = std::exp((logits[size_t(ids[i])] - largest) / options.temperature);
    total += weights[i];
  }
  // Top-p: the shortest prefix whose probability reaches p.
  if (options.topP < 1) {
    double kept = 0;
    size_t count = 0;
    while (count < weights.size() && (count == 0 || kept < options.topP * total))
      kept += weights[count++];
    weights.resize(count);
    total = kept;
  }
  const double target = samplingDraw(options.seed, position) * total;
  double cumulative = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    cumulative += weights[i];
    if (target < cumulative)
      return ids[i];
  }
  // Rounding left the draw at the total: the last kept id.
  return ids[weights.size() - 1];
}

} // namespace mtc::rt
