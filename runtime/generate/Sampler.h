//===- Sampler.h - The next token from a position's logits ------*- C++ -*-===//
//
// How `mtrun generate` picks each token from the scores the plan's `logits` function gives
// the position before it:
//
//   temperature 0 (the default)  greedy: the id of the largest logit, the lowest id among
//                                equal ones (numpy's argmax), no random draw
//   temperature T > 0            sampling from softmax(logits / T), restricted to
//     top-k K > 0                  the K ids with the largest logits (ties: lower ids first),
//     top-p P < 1                  then the smallest of those prefixes, most probable first,
//                                  whose probability (renormalised over the top-k) reaches P
//                                  (at least one id; Holtzman et al.'s nucleus sampling);
//                                  the kept probabilities are renormalised
//
// the order of Hugging Face's TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper.
// The draw for the token at sequence position t is the uniform u in [0, 1) made of 53 bits of
// Philox4x32-10 (runtime/support/Philox.h) with key `seed` and counter (t, 0, 0, 0): u =
// (words[0] * 2^21 + (words[1] >> 11)) * 2^-53; the token is the first kept id, in the order
// above, whose cumulative probability exceeds u. So a seed gives the same text on every run
// and machine, and a token's draw does not depend on how many tokens came before it.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_GENERATE_SAMPLER_H
#define MTC_RUNTIME_GENERATE_SAMPLER_H

#include "runtime/support/Error.h"

#include <cstdint>
#include <span>

namespace mtc::rt {

struct SamplingOptions {
  double temperature = 0; // 0: greedy
  int64_t topK = 0;       // 0: every id
  double topP = 1;        // 1: every id
  uint64_t seed = 0;
};

/// Fails, naming the option, unless temperature >= 0 (finite), top-k >= 0 and top-p is in
/// (0, 1].
Error checkSamplingOptions(const SamplingOptions &options);

/// The uniform draw in [0, 1) of the token at sequence position `position`.
double samplingDraw(uint64_t seed, int64_t position);

/// The id of the token at `position` from the logits of the position before it (one per
/// id). Fails when `logits` is empty or holds a value that is not finite (NaN or an
/// infinity: a diverged model).
Expected<int64_t> sampleToken(std::span<const float> logits, const SamplingOptions &options,
                              int64_t position);

} // namespace mtc::rt

#endif // MTC_RUNTIME_GENERATE_SAMPLER_H
