//===- GptDataset.h - Megatron's GPT sample order over an indexed dataset -*- C++ -*-===//
//
// The samples Megatron-LM's GPTDataset trains on, in its order, for one split of an indexed
// dataset (IndexedDataset.h). Megatron's sequences are its GPT "documents"; with
// `--split 969,30,1` the train split is sequences [0, round(0.969 S)), valid the next
// 3 %, test the rest. For a split of N documents and T tokens, samples of L + 1 tokens
// (the tokens and, shifted by one, the labels) and a number of samples wanted:
//
//   - epochs E: the fewest with E T >= samples L + 1;
//   - the document index: the split's documents repeated E times and shuffled as one array,
//     except that when E > 1 and the last epoch contributes fewer than 80 % of an epoch's
//     samples ("separate final epoch"), the first E - 1 epochs are shuffled together and the
//     last on its own after them;
//   - the sample index: the documents of the document index laid end to end and cut into
//     (E T - 1) / L samples of L + 1 tokens, consecutive samples sharing one token; entry k
//     is the (document index position, offset) where sample k starts;
//   - the shuffle index: the samples' permutation, shuffled whole, or with a separate final
//     epoch the samples before the last epoch's and the last epoch's each on their own;
//   - sample k of training is samples[shuffle[k]].
//
// Every shuffle is numpy's legacy RandomState(seed).shuffle (NumpyRandom.h), one generator
// for the document shuffles then the sample shuffles, as Megatron's. Megatron trains on
// train_iters x global_batch_size samples; the runtime's step s reads samples
// [s B, (s + 1) B) of a global batch of B. Every rank builds the indices when it starts (a
// few bytes per sample and per document), or with a cache directory (Megatron's
// --data-cache-path) loads them from the .npy files of an earlier run (GptIndexCache.h).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_GPTDATASET_H
#define MTC_RUNTIME_DATA_GPTDATASET_H

#include "runtime/data/IndexedDataset.h"
#include "runtime/support/Error.h"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt {

/// Megatron's default `--split` for `--data-path`.
inline constexpr std::string_view kMegatronDefaultSplit = "969, 30, 1";

/// A range [begin, end) of a dataset's documents (its sequences).
struct DocumentRange {
  int64_t begin = 0;
  int64_t end = 0;
  friend bool operator==(const DocumentRange &, const DocumentRange &) = default;
};

enum class DataSplit { Train = 0, Valid = 1, Test = 2 };

/// "train", "valid" or "test", Megatron's names.
std::string_view splitName(DataSplit split);

/// Megatron's split string ("969, 30, 1", "90,5,5", "1"): up to three non-negative numbers
/// (anything between them separates them), missing ones 0, normalised to sum 1.
Expected<std::array<double, 3>> parseSplit(std::string_view split);

/// The documents of each split of `numDocuments` as Megatron assigns them (the cumulative
/// fractions times the count, rounded half to even); none for a split of weight 0.
std::array<std::optional<DocumentRange>, 3> splitDocuments(const std::array<double, 3> &weights,
                                                           int64_t numDocuments);

/// What the indices of a split hold, from the inputs alone (no shuffle drawn).
struct GptIndexShape {
  int64_t numEpochs = 0;
  bool separateFinalEpoch = false;
  /// With a separate final epoch: the samples before the final epoch's, shuffled apart from
  /// the rest.
  int64_t samplesBeforeFinalEpoch = 0;
  /// The samples cut from the epochs, (E T - 1) / L.
  int64_t numSamples = 0;
  /// E x the documents.
  int64_t documentIndexSize = 0;
};

/// The shape of the indices for `numDocuments` documents of `tokensPerEpoch` tokens, samples
/// of seqLen + 1 tokens, at least `numSamples` samples. Fails when the documents hold fewer
/// than 2 tokens or seqLen < 2 (Megatron asserts both), or when the counts overflow.
Expected<GptIndexShape> gptIndexShape(int64_t tokensPerEpoch, int64_t numDocuments, int64_t seqLen,
                                      int64_t numSamples);

/// Megatron's build_sample_idx (drop_last_partial_sequence, add_extra_token_to_sequence):
/// the documents of `documentIndex` (of lengths `sequenceLengths`, all of them valid indices)
/// laid end to end and cut into `numSamples` samples of seqLen + 1 tokens, as (position,
/// offset) pairs, numSamples + 1 of them. The document index must hold the tokens.
std::vector<int64_t> buildSampleIndex(std::span<const int32_t> sequenceLengths,
                                      std::span<const int32_t> documentIndex, int64_t seqLen,
                                      int64_t numSamples);

/// Megatron's three indices for one split.
struct GptSampleIndex {
  int64_t numEpochs = 0;
  bool separateFinalEpoch = false;
  /// Documents (sequence numbers of the dataset), epoch after epoch, shuffled.
  std::vector<int32_t> documentIndex;
  /// (document index position, offset) of sample k at [2k], [2k + 1]; samples + 1 entries.
  std::vector<int64_t> sampleIndex;
  /// The training order of the samples.
  std::vector<int64_t> shuffleIndex;

  int64_t numSamples() const { return int64_t(sampleIndex.size() / 2) - 1; }
};

/// Builds the indices for the documents `documents` of sequences of lengths
/// `sequenceLengths`, samples of seqLen + 1 tokens, at least `numSamples` samples, seed
/// `seed`. Fails when the documents hold fewer than 2 tokens or seqLen < 2 (Megatron asserts
/// both), or when the indices would not fit in memory.
Expected<GptSampleIndex> buildGptSampleIndex(std::span<const int32_t> sequenceLengths,
                                             DocumentRange documents, int64_t seqLen,
                                             int64_t numSamples, uint32_t seed);

/// Training samples from an indexed dataset in Megatron's order: a stateless TokenSource.
class GptDataset {
public:
  struct Options {
    std::filesystem::path prefix;
    /// The split string and the split read.
    std::string split = std::string(kMegatronDefaultSplit);
    DataSplit which = DataSplit::Train;
    /// Tokens per sample (the labels add one), samples per step, samples trained on.
    int64_t seqLen = 0;
    int64_t globalBatch = 0;
    int64_t numSamples = 0;
    /// Megatron's --seed (numpy's RandomState takes 32 bits).
    uint64_t seed = 0;
    /// Token ids must be below it (0: not checked).
    int64_t vocab = 0;
    /// Megatron's --data-cache-path: the directory of the indices' .npy files (empty: none;
    /// GptIndexCache.h).
    std::filesystem::path cachePath;
  };

  /// Where the indices came from.
  enum class IndexOrigin { Built, Loaded, BuiltAndCached };

  static Expected<GptDataset> open(const Options &options);
  /// What `open` checks before it builds the order (the split string, the seed, the files, a
  /// split with documents holding at least the 2 tokens of a sample), with its errors: for a
  /// launcher, before it starts the ranks that open the dataset.
  static Error check(const Options &options);
  /// Whether `--split` gives split `options.which` of `options.prefix` any documents (a split
  /// of weight 0, or one too small for a document, has none). Fails as `check` does on the
  /// split string and the files.
  static Expected<bool> splitHasDocuments(const Options &options);

  const IndexedDataset &dataset() const { return dataset_; }
  const GptSampleIndex &index() const { return index_; }
  DocumentRange documents() const { return documents_; }
  int64_t tokensPerEpoch() const { return tokensPerEpoch_; }
  int64_t seqLen() const { return options_.seqLen; }
  IndexOrigin indexOrigin() const { return origin_; }
  /// With a cache: its files' common prefix, `DIR/HASH-GPTDataset-SPLIT-`.
  const std::filesystem::path &cacheEntry() const { return cacheEntry_; }
  /// With a cache: its entry's description.txt (a blend's entry includes it).
  const std::string &cacheDescription() const { return cacheDescription_; }
  /// "" without a cache, else "; indices loaded from 'DIR/HASH-GPTDataset-train-*'" or
  /// "; indices cached in '...'".
  std::string describeIndexOrigin() const;

  /// The seqLen + 1 tokens of sample `k` of the training order (after the shuffle).
  Error sample(int64_t k, std::vector<int64_t> &tokens) const;

  /// Sample `k`'s first seqLen tokens to `tokens[0, seqLen)` and its last seqLen to
  /// `labels[0, seqLen)`, each checked against the vocabulary; `window` is scratch.
  Error tokensAndLabels(int64_t k, int64_t seqLen, int32_t *tokens, int32_t *labels,
                        std::vector<int64_t> &window) const;

  /// Samples [sampleBegin, sampleBegin + count) of `step` (sample step * globalBatch +
  /// sampleBegin + i of the order): tokens the first seqLen of each, labels the last.
  Error batch(int64_t step, int64_t sampleBegin, int64_t count, int64_t seqLen, int32_t *tokens,
              int32_t *labels) const;

  /// "indexed dataset 'p' (train split: documents [0, 969) of 1000, 123456 tokens, 2 epochs)",
  /// with a cache "...; indices loaded from 'DIR/HASH-GPTDataset-train-*')".
  std::string describe() const;

private:
  GptDataset(IndexedDataset dataset) : dataset_(std::move(dataset)) {}
  /// The dataset and its documents of the split, checked, without the order.
  static Expected<GptDataset> openSplit(const Options &options);
  /// "indexed dataset 'p': the train split (--split '...', N documents)".
  std::string splitContext() const;

  IndexedDataset dataset_;
  Options options_;
  DocumentRange documents_;
  int64_t tokensPerEpoch_ = 0;
  GptSampleIndex index_;
  IndexOrigin origin_ = IndexOrigin::Built;
  std::filesystem::path cacheEntry_;
  std::string cacheDescription_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_GPTDATASET_H
