//===- GenerationModel.h - What `mtrun generate` and `mtrun serve` load ---*- C++ -*-===//
//
// A plan, its parameters (a checkpoint, or the initial ones with --steps 0), its kernels, its
// `logits` function on one rank and the tokenizer, loaded and checked from the flags both
// commands share, before any token is generated. Where the plan has `prefill` and
// `decode_step` (mt-kv-cache), tokens are scored with the KV cache (KVCache.h) unless
// --no-kv-cache asks for the window path.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TOOLS_MTRUN_GENERATIONMODEL_H
#define MTC_TOOLS_MTRUN_GENERATIONMODEL_H

#include "runtime/data/Tokenizer.h"
#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/TrainingState.h"
#include "runtime/generate/Decoding.h"
#include "runtime/generate/KVCache.h"
#include "runtime/generate/LogitsFunction.h"
#include "runtime/plan/Plan.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt {

/// The flags that choose the model (their names are the commands' flags).
struct GenerationModelOptions {
  std::optional<std::string> plan, load, steps, threads;
  TokenizerOptions tokenizer;
  /// --no-kv-cache: score the whole window for every token even where the plan has a cache.
  bool noKVCache = false;
};

class GenerationModel {
public:
  /// Loads everything and checks it: errors name the flag or file at fault. The calling
  /// thread's kernels run on threads() threads.
  static Expected<std::unique_ptr<GenerationModel>> load(const GenerationModelOptions &options);

  const Plan &plan() const { return *plan_; }
  Tokenizer &tokenizer() { return *tokenizer_; }
  LogitsFunction &logits() { return *logits_; }
  /// The positions of the model's window.
  int64_t window() const { return logits_->window(); }
  /// The token ids the model scores (the plan's real vocabulary).
  int64_t vocabulary() const { return plan_->vocabularyRealSize; }
  /// The kernels' threads (--threads-per-rank, else the default): setKernelThreads() on
  /// another thread that runs the model.
  int threads() const { return threads_; }

  /// Whether tokens are scored with the KV cache (else the window path).
  bool usesKVCache() const { return cached_ != nullptr; }
  /// The logits of every position of `tokens` but the last, row after row: as generation
  /// used them with the cache (`tokens` the result of the last generate()), else from the
  /// window.
  Expected<std::vector<float>> logitsOfPositions(std::span<const int64_t> tokens);

  /// The ids of `text`; fails when the tokenizer gives an id outside the model's vocabulary
  /// (a tokenizer the model was not trained with).
  Expected<std::vector<int64_t>> encode(std::string_view text);
  /// The logits after the last of the ids (Decoding.h), through the cache or logits().
  LogitsOfLast logitsOfLast();
  /// Generates after `prompt` (GenerationOptions as Decoding.h).
  Expected<Generation> generate(std::span<const int64_t> prompt, const GenerationOptions &options);

private:
  GenerationModel() = default;

  std::unique_ptr<Plan> plan_;
  std::unique_ptr<KernelLibrary> kernels_;
  std::unique_ptr<TrainingState> state_;
  std::unique_ptr<LogitsFunction> logits_;
  std::unique_ptr<CachedLogits> cached_;
  std::unique_ptr<Tokenizer> tokenizer_;
  int threads_ = 1;
};

} // namespace mtc::rt

#endif // MTC_TOOLS_MTRUN_GENERATIONMODEL_H
