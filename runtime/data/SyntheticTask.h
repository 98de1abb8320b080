//===- SyntheticTask.h - The built-in learnable data task -------*- C++ -*-===//
//
// Token sequences from a fixed random sparse Markov chain over a vocabulary of V tokens: each
// token has (up to) 4 possible successors, drawn once from the seed, taken with the fixed
// probabilities 0.4, 0.3, 0.2, 0.1 (renormalised over the first V when V < 4). A sample is
// x_0 ~ uniform(V), x_{t+1} ~ successor distribution of x_t; tokens = x_0..x_{L-1} and
// labels = x_1..x_L. Every label therefore has exactly the same conditional entropy,
//
//     H = -sum_k p_k ln p_k  ~= 1.2799 nats          (ln V = 6.24 nats for V = 512)
//
// which is the best achievable mean cross-entropy of any model, at every position, and what
// `entropyRate()` returns (computed from the exact integer thresholds used for sampling). A
// model that only learns the bigram table reaches it, so training curves show quickly how
// close a run gets.
//
// Determinism: the chain depends only on (vocab, seed); sample `s` of step `n` depends only on
// (vocab, seed, n, s, position), through Philox with the runtime's reserved tensor ids
// (docs/runtime.md), so every data-parallel rank produces its own samples alone.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_SYNTHETICTASK_H
#define MTC_RUNTIME_DATA_SYNTHETICTASK_H

#include "runtime/support/Error.h"

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace mtc::rt {

/// Philox tensor ids >= 0xFFFF0000 are reserved for the runtime's own streams.
inline constexpr uint32_t kSyntheticChainTensorId = 0xFFFF0001u;
inline constexpr uint32_t kSyntheticSampleTensorId = 0xFFFF0002u;

class SyntheticTask {
public:
  static constexpr int kMaxSuccessors = 4;
  static constexpr int64_t kMaxVocab = int64_t(1) << 24;

  /// The task over `vocab` tokens; `vocab` is clamped into [1, kMaxVocab] (use `create` to
  /// have out-of-range values reported instead).
  SyntheticTask(int64_t vocab, uint64_t seed);
  /// Checks 2 <= vocab <= kMaxVocab.
  static Expected<SyntheticTask> create(int64_t vocab, uint64_t seed);

  int64_t vocab() const { return vocab_; }
  uint64_t seed() const { return seed_; }

  /// Successors of `token` (numSuccessors() distinct tokens), most likely first.
  std::span<const int32_t> successors(int32_t token) const {
    return std::span<const int32_t>(successors_)
        .subspan(size_t(token) * numSuccessors_, numSuccessors_);
  }
  int numSuccessors() const { return numSuccessors_; }
  /// Exact probability of the k-th successor.
  double successorProbability(int k) const;
  /// P(next = to | current = from).
  double transitionProbability(int32_t from, int32_t to) const;

  /// Best achievable mean cross-entropy per label, in nats.
  double entropyRate() const;
  /// Cross-entropy of the uniform prediction, ln(vocab): where training starts.
  double uniformLoss() const;

  /// Samples [sampleBegin, sampleBegin + count) of step `step`, each of `seqLen` tokens, into
  /// tokens[count * seqLen] and labels[count * seqLen] (row-major [sample][position]); labels
  /// are the tokens shifted left by one, continuing the chain. Does nothing if count <= 0 or
  /// seqLen <= 0. Sample indices and steps are taken modulo 2^32.
  void batch(int64_t step, int64_t sampleBegin, int64_t count, int64_t seqLen, int32_t *tokens,
             int32_t *labels) const;

private:
  int64_t vocab_;
  uint64_t seed_;
  int numSuccessors_;
  /// Cumulative thresholds on a 32-bit word: successor k iff word < thresholds_[k] (first k).
  std::array<uint64_t, kMaxSuccessors> thresholds_{};
  std::vector<int32_t> successors_; // [vocab][numSuccessors_]
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_SYNTHETICTASK_H
