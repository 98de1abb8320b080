//===- TextDataset.h - Byte-level language modelling over a file -*- C++ -*-===//
//
// Any text or binary file as a training set with the byte-level tokenizer: token = byte,
// vocabulary 256. Sample `s` of step `n` is the window of seqLen + 1 bytes starting at an
// offset drawn by Philox from (seed, n, s) (reserved tensor id kTextWindowTensorId), uniform
// over [0, size - seqLen - 1]; tokens are its first seqLen bytes, labels the last seqLen.
// Files shorter than seqLen + 1 bytes are read cyclically (the window starts anywhere and
// wraps around). The file stays open and each window is read with pread: a file truncated
// while in use is an error naming it (a mapping would kill the process with SIGBUS), and
// only a regular file is accepted (a FIFO would block, support/RegularFile.h).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_TEXTDATASET_H
#define MTC_RUNTIME_DATA_TEXTDATASET_H

#include "runtime/support/Error.h"
#include "runtime/support/RegularFile.h"

#include <cstdint>
#include <filesystem>

namespace mtc::rt {

inline constexpr uint32_t kTextWindowTensorId = 0xFFFF0003u;

class TextDataset {
public:
  static constexpr int64_t kVocab = 256;

  /// Opens `path`. A missing, unreadable, empty or non-regular file is an error naming it.
  static Expected<TextDataset> open(const std::filesystem::path &path, uint64_t seed = 0);

  int64_t vocab() const { return kVocab; }
  uint64_t seed() const { return seed_; }
  const std::filesystem::path &path() const { return path_; }
  uint64_t size() const { return size_; }

  /// Start offset of sample `sample` of step `step` for windows of seqLen + 1 bytes.
  uint64_t windowStart(int64_t step, int64_t sample, int64_t seqLen) const;

  /// Same contract as SyntheticTask::batch: samples [sampleBegin, sampleBegin + count) of
  /// `step` into tokens/labels [count][seqLen]; nothing happens if count or seqLen <= 0.
  /// Fails when the file cannot be read or ends early (truncated since it was opened).
  Error batch(int64_t step, int64_t sampleBegin, int64_t count, int64_t seqLen, int32_t *tokens,
             int32_t *labels) const;

private:
  TextDataset() = default;

  std::filesystem::path path_;
  uint64_t seed_ = 0;
  FileHandle file_;
  uint64_t size_ = 0; // when opened
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_TEXTDATASET_H
