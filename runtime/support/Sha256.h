//===- Sha256.h - SHA-256 (FIPS 180-4) --------------------------*- C++ -*-===//
//
// SHA-256 as specified by FIPS 180-4 (section 6.2), written from the standard: 512-bit blocks,
// big-endian message schedule, the 64 round constants and the initial hash value of
// section 5.3.3, and the padding of section 5.1.1 (a 1 bit, zeros, the 64-bit message length
// in bits). Plans list the SHA-256 of each file in their MANIFEST (docs/plan-format.md) and
// safetensors exports record the SHA-256 of plan.json.
//
// Streaming: feed any split of the input to `update`, then `finalize` once (the object is
// then reset and may be reused). Software only (a few hundred MB/s per core), plenty for
// plans.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SUPPORT_SHA256_H
#define MTC_RUNTIME_SUPPORT_SHA256_H

#include "runtime/support/Error.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace mtc::rt {

/// A SHA-256 digest (32 bytes, in the standard's big-endian byte order).
using Sha256Digest = std::array<uint8_t, 32>;

/// Incremental SHA-256: `Sha256 h; h.update(a); h.update(b); h.finalize()` equals
/// `sha256(a + b)`.
class Sha256 {
public:
  Sha256() { reset(); }

  void update(const void *data, size_t size);
  void update(std::string_view bytes) { update(bytes.data(), bytes.size()); }

  /// Pads, returns the digest of everything fed since the last reset, and resets.
  Sha256Digest finalize();
  /// finalize() as 64 lowercase hex digits.
  std::string finalizeHex();

  /// Starts a new message.
  void reset();

private:
  void processBlock(const uint8_t *block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;     // bytes in buffer_ (< 64)
  uint64_t totalBytes_ = 0; // message length so far
};

/// The digest of one buffer.
Sha256Digest sha256(std::string_view bytes);

/// Lowercase hex of a digest (64 characters).
std::string toHex(const Sha256Digest &digest);

/// The SHA-256 of `bytes` as 64 lowercase hex digits.
std::string sha256Hex(std::string_view bytes);

/// A file's SHA-256 and size, read in chunks (the file is never held in memory whole).
struct FileDigest {
  std::string sha256Hex; // 64 lowercase hex digits
  uint64_t size = 0;     // bytes hashed
};

/// Hashes a file's contents. Errors name the path ("cannot open 'x': ...").
Expected<FileDigest> sha256File(const std::filesystem::path &path);

} // namespace mtc::rt

#endif // MTC_RUNTIME_SUPPORT_SHA256_H
