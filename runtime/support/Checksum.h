//===- Checksum.h - CRC-32C (Castagnoli) ------------------------*- C++ -*-===//
//
// CRC-32C as used by iSCSI, ext4, Btrfs and many storage formats: reflected polynomial
// 0x1EDC6F41 (0x82F63B78 reversed), initial value and final xor 0xFFFFFFFF. Software
// implementation, slicing-by-8 over tables built at compile time (about 1-2 GB/s per core,
// plenty for plans and checkpoints). Streaming: feed any split of the input to `update`.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SUPPORT_CHECKSUM_H
#define MTC_RUNTIME_SUPPORT_CHECKSUM_H

#include "runtime/support/Error.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace mtc::rt {

/// Incremental CRC-32C: `Crc32c c; c.update(a, n); c.update(b, m); c.value()` equals
/// `crc32c` of the concatenation.
class Crc32c {
public:
  void update(const void *data, size_t size);
  void update(std::string_view bytes) { update(bytes.data(), bytes.size()); }
  /// The CRC of everything fed so far (does not end the stream).
  uint32_t value() const { return ~state_; }
  void reset() { state_ = 0xFFFFFFFFu; }

private:
  uint32_t state_ = 0xFFFFFFFFu;
};

/// CRC-32C of one buffer.
uint32_t crc32c(const void *data, size_t size);
inline uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }

/// CRC-32C of a file's contents, read in chunks.
Expected<uint32_t> crc32cFile(const std::filesystem::path &path);

} // namespace mtc::rt

#endif // MTC_RUNTIME_SUPPORT_CHECKSUM_H
