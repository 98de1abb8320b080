//===- TextDataset.cpp - Byte-level language modelling over a file --------===//

#include "runtime/data/TextDataset.h"

#include "runtime/support/Philox.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace mtc::rt {

Expected<TextDataset> TextDataset::open(const std::filesystem::path &path, uint64_t seed) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return makeError("text dataset ", path, ": cannot open: ", errnoCode());
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return makeError("text dataset ", path, ": cannot stat: ", errnoCode(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return makeError("text dataset ", path, ": not a regular file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    return makeError("text dataset ", path, ": the file is empty");
  }
  void *map = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd); // the mapping keeps the file
  if (map == MAP_FAILED)
    return makeError("text dataset ", path, ": cannot map: ", errnoCode(err));
  (void)::madvise(map, size_t(st.st_size), MADV_RANDOM);

  TextDataset d;
  d.path_ = path;
  d.seed_ = seed;
  d.mapping_ = map;
  d.data_ = static_cast<const uint8_t *>(map);
  d.size_ = uint64_t(st.st_size);
  return d;
}

TextDataset::TextDataset(TextDataset &&other) noexcept
    : path_(std::move(other.path_)), seed_(other.seed_), data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)), mapping_(std::exchange(other.mapping_, nullptr)) {}

TextDataset &TextDataset::operator=(TextDataset &&other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    seed_ = other.seed_;
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapping_ = std::exchange(other.mapping_, nullptr);
  }
  return *this;
}

TextDataset::~TextDataset() { release(); }

void TextDataset::release() {
  if (mapping_)
    ::munmap(mapping_, size_t(size_));
  mapping_ = nullptr;
  data_ = nullptr;
  size_ = 0;
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

void TextDataset::batch(int64_t step, int64_t sampleBegin, int64_t count, int64_t seqLen,
                        int32_t *tokens, int32_t *labels) const {
  if (count <= 0 || seqLen <= 0 || size_ == 0)
    return;
  for (int64_t i = 0; i < count; ++i) {
    uint64_t start = windowStart(step, sampleBegin + i, seqLen);
    int32_t *tok = tokens + i * seqLen;
    int32_t *lab = labels + i * seqLen;
    if (start + uint64_t(seqLen) + 1 <= size_) {
      const uint8_t *p = data_ + start;
      for (int64_t t = 0; t < seqLen; ++t) {
        tok[t] = p[t];
        lab[t] = p[t + 1];
      }
    } else {
      uint64_t pos = start;
      for (int64_t t = 0; t < seqLen; ++t) {
        tok[t] = data_[pos];
        pos = pos + 1 == size_ ? 0 : pos + 1;
        lab[t] = data_[pos];
      }
    }
  }
}

} // namespace mtc::rt
