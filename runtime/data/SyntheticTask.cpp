//===- SyntheticTask.cpp - The built-in learnable data task ---------------===//

#include "runtime/data/SyntheticTask.h"

#include "runtime/support/Philox.h"

#include <algorithm>
#include <cmath>

namespace mtc::rt {

namespace {

constexpr std::array<double, SyntheticTask::kMaxSuccessors> kProbabilities = {0.4, 0.3, 0.2, 0.1};

/// A uniform integer in [0, n) from a 32-bit word (multiply-high; bias below n / 2^32).
uint32_t below(uint32_t word, uint64_t n) { return uint32_t((uint64_t(word) * n) >> 32); }

} // namespace

SyntheticTask::SyntheticTask(int64_t vocab, uint64_t seed)
    : vocab_(std::clamp<int64_t>(vocab, 1, kMaxVocab)), seed_(seed) {
  numSuccessors_ = int(std::min<int64_t>(kMaxSuccessors, vocab_));
  double total = 0;
  for (int k = 0; k < numSuccessors_; ++k)
    total += kProbabilities[k];
  double cumulative = 0;
  for (int k = 0; k < numSuccessors_; ++k) {
    cumulative += kProbabilities[k] / total;
    thresholds_[k] = k + 1 == numSuccessors_ ? (uint64_t(1) << 32)
                                             : uint64_t(std::llround(cumulative * 4294967296.0));
  }

  // Successors of token a: numSuccessors_ distinct tokens by Floyd's sampling, then a
  // Fisher-Yates shuffle so the probability ranks are random too. 7 words, from the 8 words
  // of elements 2a and 2a + 1 of the chain stream.
  successors_.resize(size_t(vocab_) * numSuccessors_);
  const uint64_t v = uint64_t(vocab_);
  for (uint64_t a = 0; a < v; ++a) {
    auto w0 = philoxStream(seed_, kSyntheticChainTensorId, 2 * a);
    auto w1 = philoxStream(seed_, kSyntheticChainTensorId, 2 * a + 1);
    uint32_t words[8] = {w0[0], w0[1], w0[2], w0[3], w1[0], w1[1], w1[2], w1[3]};
    int32_t *succ = &successors_[a * numSuccessors_];
    int n = 0;
    for (uint64_t j = v - numSuccessors_; j < v; ++j) {
      int32_t t = int32_t(below(words[n], j + 1));
      if (std::find(succ, succ + n, t) != succ + n)
        t = int32_t(j);
      succ[n++] = t;
    }
    for (int i = numSuccessors_ - 1; i > 0; --i)
      std::swap(succ[i], succ[below(words[4 + (numSuccessors_ - 1 - i)], uint64_t(i) + 1)]);
  }
}

Expected<SyntheticTask> SyntheticTask::create(int64_t vocab, uint64_t seed) {
  if (vocab < 2 || vocab > kMaxVocab)
    return makeError("synthetic task: vocabulary size ", vocab, " is outside [2, ", kMaxVocab, "]");
  return SyntheticTask(vocab, seed);
}

double SyntheticTask::successorProbability(int k) const {
  if (k < 0 || k >= numSuccessors_)
    return 0;
  uint64_t lo = k == 0 ? 0 : thresholds_[k - 1];
  return double(thresholds_[k] - lo) / 4294967296.0;
}

double SyntheticTask::transitionProbability(int32_t from, int32_t to) const {
  if (from < 0 || from >= vocab_)
    return 0;
  std::span<const int32_t> succ = successors(from);
  for (int k = 0; k < numSuccessors_; ++k)
    if (succ[k] == to)
      return successorProbability(k);
  return 0;
}

double SyntheticTask::entropyRate() const {
  double h = 0;
  for (int k = 0; k < numSuccessors_; ++k) {
    double p = successorProbability(k);
    if (p > 0)
      h -= p * std::log(p);
  }
  return h;
}

double SyntheticTask::uniformLoss() const { return std::log(double(vocab_)); }

void SyntheticTask::batch(int64_t step, int64_t sampleBegin, int64_t count, int64_t seqLen,
                          int32_t *tokens, int32_t *labels) const {
  if (count <= 0 || seqLen <= 0)
    return;
  const uint32_t step32 = uint32_t(uint64_t(step));
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t sample = uint64_t(sampleBegin + i) & 0xFFFFFFFFu;
    int32_t *tok = tokens + i * seqLen;
    int32_t *lab = labels + i * seqLen;
    int32_t x = 0;
    for (int64_t t = 0; t <= seqLen; ++t) {
      uint32_t word = philoxStream(seed_, kSyntheticSampleTensorId,
                                   (sample << 32) | (uint64_t(t) & 0xFFFFFFFFu), step32)[0];
      if (t == 0) {
        x = int32_t(below(word, uint64_t(vocab_)));
      } else {
        int k = 0;
        while (k + 1 < numSuccessors_ && word >= thresholds_[k])
          ++k;
        x = successors_[size_t(x) * numSuccessors_ + k];
      }
      if (t < seqLen)
        tok[t] = x;
      if (t > 0)
        lab[t - 1] = x;
    }
  }
}

} // namespace mtc::rt
