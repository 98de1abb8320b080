//===- Completion.h - Answering one request of `mtrun serve` -----*- C++ -*-===//
//
// Runs a CompletionRequest on a model: tokenizes every prompt and checks it against the
// model's vocabulary and window before generating anything, then generates each prompt's
// continuation with runtime/generate's loop (so a request is `mtrun generate`'s tokens for
// the same prompt, options and seed), ends it at a stop string, scores the log
// probabilities when asked, and decodes the text. A request that fails a check is a
// RequestError naming the field (400); a failure of the model is a 500; a server that is
// stopping ends the request between two tokens (503).
//
// Log probabilities are those of the model itself: log_softmax of the raw logits (no
// temperature, top-k or top-p), as Megatron reports them.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SERVE_COMPLETION_H
#define MTC_RUNTIME_SERVE_COMPLETION_H

#include "runtime/data/Tokenizer.h"
#include "runtime/generate/Decoding.h"
#include "runtime/serve/CompletionRequest.h"

#include <functional>
#include <span>
#include <variant>
#include <vector>

namespace mtc::rt {

/// Scores `ids` and calls `visit(t, logits of position t)` (the scores of the token after
/// t) for every position t < ids.size(), in order.
using LogitsOfEach =
    std::function<Error(std::span<const int64_t> ids,
                        const std::function<void(int64_t, std::span<const float>)> &visit)>;

/// What a completion needs of the model: one generation at a time (the caller serialises).
struct CompletionModel {
  Tokenizer *tokenizer = nullptr;
  int64_t window = 0;     // the positions of the model's window (the plan's sequence length)
  int64_t vocabulary = 0; // token ids are below it
  LogitsOfLast logitsOfLast;
  LogitsOfEach logitsOfEach; // for log probabilities
};

/// Whether the server is stopping. complete() asks it before each prompt and before each new
/// token, the same calls for the same request and tokens, so on several ranks it can be a
/// collective decision (RequestRelay.h's anyRank).
using StopCheck = std::function<bool()>;

/// Answers `request` with `seed` for its sampling (the request's own seed, if it gave one, is
/// the caller's to pass). Ends early, with a 503, once `stopping` (if given) says so. The
/// request's checks (400) come before any call of the model or of `stopping`.
std::variant<std::vector<CompletionResult>, RequestError> complete(const CompletionModel &model,
                                                                   const CompletionRequest &request,
                                                                   uint64_t seed,
                                                                   const StopCheck &stopping = {});

/// log_softmax(logits)[id], in double precision.
double logProbability(std::span<const float> logits, int64_t id);

} // namespace mtc::rt

#endif // MTC_RUNTIME_SERVE_COMPLETION_H
