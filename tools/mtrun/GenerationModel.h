//===- GenerationModel.h - What `mtrun generate` and `mtrun serve` load ---*- C++ -*-===//
//
// A plan, its parameters (a checkpoint, or the initial ones with --steps 0), its kernels, its
// `logits` function on one rank and the tokenizer, loaded and checked from the flags both
// commands share, before any token is generated. Where the plan has `prefill` and
// `decode_step` (mt-kv-cache), tokens are scored with the KV cache (KVCache.h) unless
// --no-kv-cache asks for the window path.
//
// On several ranks (`--nodes N`: every rank of the job loads the model) each rank places
// itself on the plan's mesh (RankMesh, as training does), reads the checkpoint whole and keeps
// its shards, and runs the plan's partitioned `logits` with its collectives (the window path:
// a mesh plan has no `prefill`/`decode_step`). Ranks beyond the mesh are data-parallel copies
// that compute the same logits. Every rank then takes rank 0's logits (SharedLogits.h), so
// every rank chooses the same tokens. A pipeline plan is refused.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TOOLS_MTRUN_GENERATIONMODEL_H
#define MTC_TOOLS_MTRUN_GENERATIONMODEL_H

#include "runtime/comm/Communicator.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/RankMesh.h"
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
  /// The ranks sharing this host's cores (the default threads per rank divide them).
  int ranksOnHost = 1;
};

/// Fails, naming the plan, where generation cannot run `plan` on a job of `worldSize` ranks:
/// a pipeline plan, or a world that is not a multiple of the plan's mesh (the checks a
/// launcher makes before it starts the ranks). `command` ("generate", "serve") is the mtrun
/// command the message suggests running with the right --nodes.
Error checkGenerationLayout(const Plan &plan, int64_t worldSize,
                            std::string_view command = "generate");

/// "tp=2 x data parallel 1": the plan's mesh and the data-parallel copies on `ranks` ranks.
std::string describeMesh(const Plan &plan, int64_t ranks);

/// The ids of `text` by `tokenizer`; fails when it gives an id outside the model's
/// `vocabulary` (a tokenizer the model was not trained with).
Expected<std::vector<int64_t>> encodeForModel(Tokenizer &tokenizer, int64_t vocabulary,
                                              std::string_view text);

class GenerationModel {
public:
  /// Loads everything and checks it: errors name the flag or file at fault. The calling
  /// thread's kernels run on threads() threads. `world` (null: this rank alone) is the job's:
  /// collective over it (every rank loads the model at the same point), and it must outlive
  /// the model.
  static Expected<std::unique_ptr<GenerationModel>> load(const GenerationModelOptions &options,
                                                         Communicator *world = nullptr);

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
  /// The job's world (null: one rank) and this rank's place on the plan's mesh.
  Communicator *world() const { return world_; }
  const RankMesh &mesh() const { return *mesh_; }
  /// Whether this rank prints and answers (rank 0 of the job).
  bool leader() const { return !world_ || world_->rank() == 0; }
  /// The logits of every position of `tokens` but the last, row after row: as generation
  /// used them with the cache (`tokens` the result of the last generate()), else from the
  /// window (collective over the mesh: every rank calls it).
  Expected<std::vector<float>> logitsOfPositions(std::span<const int64_t> tokens);

  /// The ids of `text`; fails when the tokenizer gives an id outside the model's vocabulary
  /// (a tokenizer the model was not trained with).
  Expected<std::vector<int64_t>> encode(std::string_view text);
  /// The logits after the last of the ids (Decoding.h), through the cache or logits(); on
  /// several ranks rank 0's (SharedLogits.h: every rank calls it with the same ids).
  LogitsOfLast logitsOfLast();
  /// Generates after `prompt` (GenerationOptions as Decoding.h).
  Expected<Generation> generate(std::span<const int64_t> prompt, const GenerationOptions &options);

private:
  GenerationModel() = default;

  std::unique_ptr<Plan> plan_;
  Communicator *world_ = nullptr;
  std::unique_ptr<RankMesh> mesh_;
  std::unique_ptr<KernelLibrary> kernels_;
  std::unique_ptr<TrainingState> state_;
  std::unique_ptr<LogitsFunction> logits_;
  std::unique_ptr<CachedLogits> cached_;
  std::unique_ptr<Tokenizer> tokenizer_;
  int threads_ = 1;
};

} // namespace mtc::rt

#endif // MTC_TOOLS_MTRUN_GENERATIONMODEL_H
