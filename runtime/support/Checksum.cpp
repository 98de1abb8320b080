//===- Checksum.cpp - CRC-32C (Castagnoli) --------------------------------===//

#include "runtime/support/Checksum.h"
#include "runtime/support/FileChunks.h"

#include <array>
#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace mtc::rt {
namespace {

constexpr uint32_t kPolyReflected = 0x82F63B78u;

// tables[0] is the classic byte-at-a-time table; tables[k][b] is the CRC contribution of byte
// b followed by k zero bytes, which lets the main loop consume 8 bytes per step.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables makeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int k = 0; k < 8; ++k)
      c = (c & 1u) ? (c >> 1) ^ kPolyReflected : c >> 1;
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b)
    for (int k = 1; k < 8; ++k)
      t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  return t;
}

constexpr Tables kTables = makeTables();
static_assert(kTables[0][1] == 0xF26B8303u, "CRC-32C table");

inline uint32_t load32le(const unsigned char *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

} // namespace

void Crc32c::update(const void *data, size_t size) {
  const auto *p = static_cast<const unsigned char *>(data);
  uint32_t c = state_;
  while (size >= 8) {
    uint32_t lo = load32le(p) ^ c;
    uint32_t hi = load32le(p + 4);
    c = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
        kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    p += 8;
    size -= 8;
  }
  while (size--)
    c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xFFu];
  state_ = c;
}

uint32_t crc32c(const void *data, size_t size) {
  Crc32c c;
  c.update(data, size);
  return c.value();
}

Expected<uint32_t> crc32cFile(const std::filesystem::path &path) {
  Crc32c crc;
  if (Error err = readFileChunks(path,
                                 [&](const char *data, size_t size) {
                                   crc.update(data, size);
                                   return Error::success();
                                 });
      !err.ok())
    return err;
  return crc.value();
}

} // namespace mtc::rt
