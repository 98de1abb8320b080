//===- TokenSource.h - The training data of a run ----------------*- C++ -*-===//
//
// Either the built-in synthetic task (SyntheticTask.h, the default) or a text file read
// byte by byte (TextDataset.h, `mtrun --data FILE.txt`). Both are stateless: the samples of
// step s depend only on (seed, s, sample index), so a resumed or data-parallel run reads
// exactly the samples a single uninterrupted run reads.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_TOKENSOURCE_H
#define MTC_RUNTIME_DATA_TOKENSOURCE_H

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

  /// Samples [sampleBegin, sampleBegin + count) of `step` (see SyntheticTask::batch). Fails
  /// only when a text file cannot be read (truncated while training, I/O error).
  Error batch(int64_t step, int64_t sampleBegin, int64_t count, int64_t seqLen, int32_t *tokens,
              int32_t *labels) const;
  /// "synthetic Markov task over 256 tokens (best loss 1.2799)", "text 'f.txt' (12345 bytes)".
  std::string describe() const;
  /// The best achievable mean loss, when known (the synthetic task's entropy rate).
  std::optional<double> bestLoss() const;

private:
  explicit TokenSource(std::variant<SyntheticTask, TextDataset> source)
      : source_(std::move(source)) {}
  std::variant<SyntheticTask, TextDataset> source_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_TOKENSOURCE_H
