//===- TextDataset.cpp - Byte-level language modelling over a file --------===//

#include "runtime/data/TextDataset.h"

#include "runtime/support/Philox.h"

#include <vector>

namespace mtc::rt {

Expected<TextDataset> TextDataset::open(const std::filesystem::path &path, uint64_t seed) {
  Expected<RegularFile> file = openInputFile(path);
  if (!file)
    return file.takeError().withContext("text dataset");
  if (file->size == 0)
    return makeError("text dataset ", path, ": the file is empty");
  TextDataset d;
  d.path_ = path;
  d.seed_ = seed;
  d.file_ = std::move(file->handle);
  d.size_ = file->size;
  return d;
}

uint64_t TextDataset::windowStart(int64_t step, int64_t sample, int64_t seqLen) const {
  if (size_ == 0)
    return 0;
  uint64_t window = uint64_t(seqLen) + 1;
  // Fits: any start in [0, size - window]. Too short: any start, read cyclically.
  uint64_t choices = seqLen >= 0 && window <= size_ ? size_ - window + 1 : size_;
  auto w = philoxStream(seed_, kTextWindowTensorId, uint64_t(sample), uint32_t(uint64_t(step)));
  uint64_t r = (uint64_t(w[1]) << 32) | w[0];
  return r % choices; // bias below choices / 2^64
}

Error TextDataset::batch(int64_t step, int64_t sampleBegin, int64_t count, int64_t seqLen,
                         int32_t *tokens, int32_t *labels) const {
  if (count <= 0 || seqLen <= 0 || size_ == 0)
    return Error::success();
  const uint64_t window = uint64_t(seqLen) + 1;
  const std::string name = concat("text dataset ", path_);
  // A file shorter than a window is read whole once and used cyclically.
  const bool cyclic = window > size_;
  std::vector<uint8_t> bytes(cyclic ? size_ : window);
  if (cyclic)
    if (Error err = readExactlyAt(file_.get(), 0, bytes.data(), bytes.size(), name); !err.ok())
      return err;
  for (int64_t i = 0; i < count; ++i) {
    uint64_t start = windowStart(step, sampleBegin + i, seqLen);
    int32_t *tok = tokens + i * seqLen;
    int32_t *lab = labels + i * seqLen;
    if (!cyclic) {
      if (Error err = readExactlyAt(file_.get(), start, bytes.data(), bytes.size(), name);
          !err.ok())
        return err;
      for (int64_t t = 0; t < seqLen; ++t) {
        tok[t] = bytes[size_t(t)];
        lab[t] = bytes[size_t(t) + 1];
      }
    } else {
      uint64_t pos = start;
      for (int64_t t = 0; t < seqLen; ++t) {
        tok[t] = bytes[pos];
        pos = pos + 1 == size_ ? 0 : pos + 1;
        lab[t] = bytes[pos];
      }
    }
  }
  return Error::success();
}

} // namespace mtc::rt
