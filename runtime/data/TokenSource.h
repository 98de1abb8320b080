//===- TokenSource.h - The training data of a run ----------------*- C++ -*-===//
//
// The built-in synthetic task (SyntheticTask.h, the default), a text file read byte by byte
// (TextDataset.h, `mtrun --data FILE.txt`), a Megatron indexed dataset in Megatron's sample
// order (GptDataset.h, `mtrun --data-path PREFIX`) or a blend of several (BlendedDataset.h,
// `mtrun --data-path 0.3 A 0.7 B`). All are stateless: the samples of step s
// depend only on (seed, s, sample index), so a resumed or data-parallel run reads exactly the
// samples a single uninterrupted run reads.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_TOKENSOURCE_H
#define MTC_RUNTIME_DATA_TOKENSOURCE_H

#include "runtime/data/BlendedDataset.h"
#include "runtime/data/GptDataset.h"
#include "runtime/data/SyntheticTask.h"
#include "runtime/data/TextDataset.h"
#include "runtime/support/Error.h"

#include <optional>
#include <string>
#include <variant>

namespace mtc::rt {

class TokenSource {
public:
  /// The synthetic task over the model's `vocab` tokens.
  static Expected<TokenSource> synthetic(int64_t vocab, uint64_t seed);
  /// Byte-level tokens of the text file `path`; the model's vocabulary must hold all 256.
  static Expected<TokenSource> text(const std::filesystem::path &path, int64_t vocab,
                                    uint64_t seed);
  /// Split `options.which` of the indexed dataset or the blend `data` in Megatron's order (the
  /// train split for training, the valid split for evaluation), `options.prefix` being
  /// `data`'s; every token id must be below `options.vocab` (checked as the samples are read).
  /// Fails when a blend of prefixes without weights holds fewer than `options.numSamples`.
  static Expected<TokenSource> indexed(const DataBlend &data, const GptDataset::Options &options);

  /// Samples [sampleBegin, sampleBegin + count) of `step` (see SyntheticTask::batch). Fails
  /// only when a file cannot be read (truncated while training, I/O error) or an indexed
  /// dataset's token is outside the vocabulary.
  Error batch(int64_t step, int64_t sampleBegin, int64_t count, int64_t seqLen, int32_t *tokens,
              int32_t *labels) const;
  /// "synthetic Markov task over 256 tokens (best loss 1.2799)", "text 'f.txt' (12345 bytes)",
  /// "indexed dataset 'p' (train split: ...)".
  std::string describe() const;
  /// The best achievable mean loss, when known (the synthetic task's entropy rate).
  std::optional<double> bestLoss() const;

  /// One indexed dataset's order: its samples and the epochs of the split they span.
  struct Order {
    int64_t samples = 0;
    int64_t epochs = 0;
  };
  /// An indexed dataset's order (none for the synthetic task, a text file and a blend, which
  /// have no single split's epochs).
  std::optional<Order> order() const;

private:
  using Source = std::variant<SyntheticTask, TextDataset, GptDataset, BlendedDataset>;
  explicit TokenSource(Source source) : source_(std::move(source)) {}
  Source source_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_TOKENSOURCE_H
