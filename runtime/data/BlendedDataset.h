//===- BlendedDataset.h - Megatron's blend of indexed datasets ----*- C++ -*-===//
//
// `--data-path 0.3 A 0.7 B`: the samples of several indexed datasets, interleaved in
// proportion to their weights, in the order Megatron-LM's BlendedMegatronDatasetBuilder and
// BlendedDataset give them for a split of N samples (N: the train samples, or the valid or
// test split's, each split blended on its own):
//
//   - the weights are normalised (w / sum(w), numpy's float64 sum, GptDataset.h's split
//     arithmetic);
//   - dataset i contributes ceil(N w_i) samples, so the blend holds sum_i ceil(N w_i) >= N;
//     its own GPT order (GptDataset.h: the prefix's documents of the split, its epochs and
//     shuffles, the same seed) is built for ceil(ceil(N w_i) x 1.005) samples, Megatron's
//     `mid_level_dataset_surplus` of 0.005;
//   - sample k of the blend is sample dataset_sample_index[k] of dataset dataset_index[k],
//     the indices of helpers.cpp's build_blending_indices over the weights normalised once
//     more: each sample goes to the dataset whose count lags most behind its share,
//     w_i max(k, 1) - count_i (the first on a tie), and is that dataset's next sample.
//
// Prefixes without weights (`--data-path A B C`) blend one epoch of each, weighted by the
// samples of that epoch, into min(N, their sum) samples, as Megatron's blend of prefixes
// alone. A weighted blend of one prefix (`--data-path 1 A`) is a blend, as in Megatron: its
// order differs from `--data-path A`'s, which is that prefix's GPT order alone.
//
// This is Megatron-Core's arithmetic since its 0.11 release (February 2025); older releases
// built ceil(N w_i x 1.005) samples of each and blended exactly that many.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_BLENDEDDATASET_H
#define MTC_RUNTIME_DATA_BLENDEDDATASET_H

#include "runtime/data/GptDataset.h"
#include "runtime/support/Error.h"

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace mtc::rt {

/// Megatron's default `--mid-level-dataset-surplus`.
inline constexpr double kMegatronMidLevelSurplus = 0.005;

/// The most datasets Megatron blends (its dataset index is an int16 array).
inline constexpr int64_t kMaxBlendedDatasets = 32766;

/// What `--data-path` names, as Megatron's get_blend_from_list reads it: one prefix; weights
/// and prefixes in pairs (`0.3 A 0.7 B`); or several prefixes without weights.
struct DataBlend {
  std::vector<std::string> prefixes;
  /// One per prefix, as given; empty when none were.
  std::vector<double> weights;

  /// One prefix without a weight: that dataset's GPT order, no blend.
  bool single() const { return prefixes.size() == 1 && weights.empty(); }
  /// "'A'", "0.3 'A', 0.7 'B'" or "'A', 'B'" for messages.
  std::string describe() const;
};

/// `words` as a blend (`flag`'s values, for the messages). Fails, naming the words, on none; on
/// weights and prefixes not in pairs (an odd count with a number among them, a number where a
/// prefix belongs or a word where a weight belongs); on a weight that is not a positive finite
/// number; on an empty prefix; and on more than kMaxBlendedDatasets datasets. Numbers are what
/// Python's float() reads (a dataset whose prefix is a number is named with a directory: `./2024`).
/// A prefix given twice is two datasets, as in Megatron.
Expected<DataBlend> parseDataBlend(std::span<const std::string> words,
                                   std::string_view flag = "--data-path");

/// The sum of `values` as numpy's float64 sum adds them (pairwise, eight partial sums in
/// blocks of at most 128).
double numpySum(std::span<const double> values);

/// Megatron's normalize(): each weight over numpy's sum of them.
std::vector<double> normalizeWeights(std::span<const double> weights);

/// Megatron's _get_size_per_split_per_dataset for one split of `size` samples:
/// ceil(ceil(size x w) x (1 + surplus)) for each of the normalised `weights` (surplus 0: the
/// samples each dataset contributes; Megatron's surplus: the samples its order is built for).
std::vector<int64_t> samplesPerDataset(std::span<const double> weights, int64_t size,
                                       double surplus);

/// helpers.cpp's build_blending_indices: for each of `size` samples, the dataset it comes from
/// and that dataset's sample.
struct BlendingIndex {
  std::vector<int16_t> dataset;
  std::vector<int64_t> sample;
};
Expected<BlendingIndex> buildBlendingIndex(std::span<const double> weights, int64_t size);

/// The samples of a blend in Megatron's order: a stateless TokenSource.
class BlendedDataset {
public:
  /// `options` as for one dataset (GptDataset::Options) but for `blend`'s prefixes (its
  /// `prefix` is not read), numSamples being the samples of the blend for its split.
  static Expected<BlendedDataset> open(const DataBlend &blend, const GptDataset::Options &options,
                                       double surplus = kMegatronMidLevelSurplus);

  const std::vector<GptDataset> &datasets() const { return datasets_; }
  const BlendingIndex &index() const { return index_; }
  /// The weights the blending index follows (normalised twice, as Megatron's).
  const std::vector<double> &weights() const { return weights_; }
  /// The samples each dataset's order was built for (0: one epoch).
  const std::vector<int64_t> &samplesBuilt() const { return samplesBuilt_; }
  /// The samples the blend takes from each dataset.
  const std::vector<int64_t> &samplesDrawn() const { return drawn_; }
  /// The samples of the blend.
  int64_t size() const { return int64_t(index_.dataset.size()); }

  /// The seqLen + 1 tokens of sample `k` of the blend.
  Error sample(int64_t k, std::vector<int64_t> &tokens) const;
  /// As GptDataset::batch, over the blend's order.
  Error batch(int64_t step, int64_t sampleBegin, int64_t count, int64_t seqLen, int32_t *tokens,
              int32_t *labels) const;

  /// "blend of 2 indexed datasets (train split: 320 samples of 65 tokens; seed 1234): 0.3
  /// 'A' (97 samples of ...), 0.7 'B' (...)", with a cache ending "; blending indices loaded
  /// from 'DIR/HASH-BlendedDataset-train-*'" or "; blending indices cached in '...'".
  std::string describe() const;
  /// "" without a cache, else "; blending indices loaded from 'DIR/HASH-BlendedDataset-
  /// train-*'" or "; blending indices cached in '...'" (BlendIndexCache.h).
  std::string describeIndexOrigin() const;

private:
  BlendedDataset() = default;
  /// Dataset and sample of sample `k` of the blend, checked.
  Expected<std::pair<const GptDataset *, int64_t>> locate(int64_t k) const;

  DataBlend blend_;
  GptDataset::Options options_;
  std::vector<GptDataset> datasets_;
  std::vector<double> weights_;
  std::vector<int64_t> samplesBuilt_;
  std::vector<int64_t> drawn_;
  BlendingIndex index_;
  /// With a cache: the blending indices' entry (`DIR/HASH-BlendedDataset-SPLIT-`) and whether
  /// they were loaded from it (else built and written).
  std::filesystem::path cacheEntry_;
  bool indexLoaded_ = false;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_BLENDEDDATASET_H
