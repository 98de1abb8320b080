//===- KVCache.h - Generation with the plan's prefill and decode_step -----*- C++ -*-===//
//
// Cached generation (docs/plan-format.md, mt-kv-cache): `prefill` scores one sequence in
// the model's window and returns every layer's keys and values; `decode_step` scores one
// new token at its absolute position with them and returns them with that position
// written. A token then costs one position's work instead of the window's.
//
// CachedSequence is the bookkeeping (which ids the cache holds, the logits each position
// got); KVCacheBuffers owns the caches; CachedLogits binds both to the plan's functions and
// answers Decoding.h's LogitsOfLast: a call whose ids extend the ones scored before by one
// runs decode_step, any other runs prefill (a new prompt). Under causal attention both give
// the window path's logits (LogitsFunction.h) up to rounding.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_GENERATE_KVCACHE_H
#define MTC_RUNTIME_GENERATE_KVCACHE_H

#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/MeshCollectives.h"
#include "runtime/exec/TrainingState.h"
#include "runtime/generate/PlanMesh.h"
#include "runtime/plan/Plan.h"

#include <cstdint>
#include <span>
#include <vector>

namespace mtc::rt {

/// The ids the cache holds and the logits each of their positions was given.
class CachedSequence {
public:
  /// What scoring `ids` takes: decode_step of the last id at `position` when the ids are
  /// the cached ones plus one, else prefill of them all.
  struct Action {
    bool prefill = true;
    int64_t position = 0;
  };

  explicit CachedSequence(int64_t vocabulary) : vocabulary_(vocabulary) {}

  Action next(std::span<const int64_t> ids) const;
  /// After a prefill of `ids`: `rows` holds the logits of each position (ids.size() rows).
  void prefilled(std::span<const int64_t> ids, std::span<const float> rows);
  /// After a decode_step of `id` at the next position: its logits.
  void stepped(int64_t id, std::span<const float> row);

  /// Forgets the ids (after a failed call, which may have written part of the cache).
  void reset() {
    ids_.clear();
    logits_.clear();
  }

  int64_t size() const { return static_cast<int64_t>(ids_.size()); }
  /// The logits of position t < size(), as they were computed.
  std::span<const float> at(int64_t position) const;

private:
  int64_t vocabulary_;
  std::vector<int64_t> ids_;
  std::vector<float> logits_;
};

/// Every layer's keys and values for one sequence, twice: a decode_step reads one pair and
/// writes the other (a kernel's outputs must not alias its inputs), then they swap.
class KVCacheBuffers {
public:
  /// Fails (rather than throwing) when the memory cannot be had.
  static Expected<KVCacheBuffers> create(int64_t keyElements, int64_t valueElements);

  float *keys() { return keys_[current_].data(); }
  float *values() { return values_[current_].data(); }
  float *nextKeys() { return keys_[1 - current_].data(); }
  float *nextValues() { return values_[1 - current_].data(); }
  /// After a step wrote nextKeys()/nextValues(): they become the current ones.
  void swap() { current_ = 1 - current_; }

private:
  KVCacheBuffers() = default;
  std::vector<float> keys_[2], values_[2];
  int current_ = 0;
};

class CachedLogits {
public:
  /// Binds `kernels`' prefill and decode_step to the parameters of `state`: the whole
  /// model on one rank, or this rank's shards where `mesh` (RankMesh::context()) places it
  /// on the plan's mesh (tensor parallelism: each rank caches its heads' keys and values,
  /// the functions' collectives run over `mesh`, and every rank of the mesh calls
  /// logitsOfLast() with the same ids at the same time). Fails when the plan has not both,
  /// or is partitioned over more than one rank and `mesh` is null. The plan, kernels,
  /// state and mesh must outlive the object.
  static Expected<CachedLogits> create(const Plan &plan, const KernelLibrary &kernels,
                                       const TrainingState &state,
                                       const MeshContext *mesh = nullptr);

  int64_t window() const { return window_; }
  int64_t vocabulary() const { return vocabulary_; }

  /// The logits after the last of `ids` (1 to window() ids below vocabulary()).
  Expected<std::span<const float>> logitsOfLast(std::span<const int64_t> ids);
  /// The logits of position t of the ids scored last, as generation used them.
  std::span<const float> at(int64_t position) const { return sequence_.at(position); }
  /// The ids the cache holds.
  int64_t cachedTokens() const { return sequence_.size(); }

private:
  CachedLogits(const LoadedKernel &prefill, const LoadedKernel &step, KVCacheBuffers cache,
               int64_t vocabulary, PlanMesh mesh)
      : prefill_(&prefill), step_(&step), cache_(std::move(cache)), sequence_(vocabulary),
        mesh_(std::move(mesh)) {}

  Error runPrefill(std::span<const int64_t> ids);
  Error runStep(int64_t id, int64_t position);

  const LoadedKernel *prefill_, *step_;
  KVCacheBuffers cache_;
  CachedSequence sequence_;
  PlanMesh mesh_;
  std::vector<void *> prefillParams_, stepParams_; // each function's, in its order
  std::vector<int32_t> tokens_, token_, position_;
  std::vector<float> windowLogits_, stepLogits_;
  std::vector<void *> buffers_;
  int64_t window_ = 1, vocabulary_ = 1, paddedVocabulary_ = 1;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_GENERATE_KVCACHE_H
