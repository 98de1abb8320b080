//===- ChecksumTest.cpp - CRC-32C ----------------------------------------===//

#include "runtime/support/Checksum.h"
#include "runtime/support/FileChunks.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

using namespace mtc::rt;

namespace {

/// Bit-at-a-time CRC-32C straight from the definition, as the reference.
uint32_t crc32cBitwise(const unsigned char *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k)
      c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

TEST(ChecksumTest, CheckValue) {
  // The "check" value of the CRC-32C/ISCSI catalogue entry.
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0x00000000u);
  EXPECT_EQ(crc32c("a"), 0xC1D04330u);
}

TEST(ChecksumTest, Rfc3720Vectors) {
  // RFC 3720 (iSCSI) appendix B.4.
  std::vector<unsigned char> buf(32, 0x00);
  EXPECT_EQ(crc32c(buf.data(), buf.size()), 0x8A9136AAu);
  std::fill(buf.begin(), buf.end(), 0xFF);
  EXPECT_EQ(crc32c(buf.data(), buf.size()), 0x62A8AB43u);
  std::iota(buf.begin(), buf.end(), 0);
  EXPECT_EQ(crc32c(buf.data(), buf.size()), 0x46DD794Eu);
  for (int i = 0; i < 32; ++i)
    buf[i] = static_cast<unsigned char>(31 - i);
  EXPECT_EQ(crc32c(buf.data(), buf.size()), 0x113FDB5Cu);
}

TEST(ChecksumTest, MatchesBitwiseReferenceAtAllLengthsAndAlignments) {
  std::vector<unsigned char> data(1100);
  uint32_t x = 12345;
  for (auto &b : data) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(x >> 24);
  }
  for (size_t offset = 0; offset < 8; ++offset)
    for (size_t len = 0; len <= 1024; len += (len < 64 ? 1 : 37))
      ASSERT_EQ(crc32c(data.data() + offset, len), crc32cBitwise(data.data() + offset, len))
          << "offset " << offset << " length " << len;
}

TEST(ChecksumTest, StreamingEqualsOneShot) {
  std::string text;
  for (int i = 0; i < 300; ++i)
    text += "The quick brown fox jumps over the lazy dog " + std::to_string(i) + "\n";
  const uint32_t whole = crc32c(text);
  for (size_t split = 0; split <= text.size(); split += 97) {
    Crc32c c;
    c.update(text.substr(0, split));
    c.update(text.substr(split));
    ASSERT_EQ(c.value(), whole) << "split at " << split;
  }
  // Many tiny pieces.
  Crc32c c;
  for (char ch : text)
    c.update(&ch, 1);
  EXPECT_EQ(c.value(), whole);
  // value() does not end the stream; reset() starts over.
  Crc32c d;
  d.update("1234");
  (void)d.value();
  d.update("56789");
  EXPECT_EQ(d.value(), 0xE3069283u);
  d.reset();
  EXPECT_EQ(d.value(), 0u);
  d.update("123456789");
  EXPECT_EQ(d.value(), 0xE3069283u);
}

TEST(ChecksumTest, File) {
  test::TempDir dir;
  std::string bytes(200000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>(i * 31 + (i >> 9));
  test::writeBytes(dir / "blob", bytes);
  Expected<uint32_t> crc = crc32cFile(dir / "blob");
  ASSERT_TRUE(crc) << crc.error().message();
  EXPECT_EQ(*crc, crc32c(bytes));

  Expected<uint32_t> missing = crc32cFile(dir / "missing");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("missing"), std::string::npos);
  EXPECT_NE(missing.error().message().find("No such file"), std::string::npos)
      << missing.error().message();
}

// A consumer's error stops the reading at that chunk and is what readFileChunks returns.
TEST(FileChunksTest, ConsumerErrorStopsReading) {
  test::TempDir dir;
  test::writeBytes(dir / "blob", std::string(300000, 'x'));
  size_t chunks = 0, bytes = 0;
  Error err = readFileChunks(dir / "blob", [&](const char *, size_t size) {
    ++chunks;
    bytes += size;
    return chunks == 2 ? makeError("stop at chunk 2") : Error::success();
  });
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message(), "stop at chunk 2");
  EXPECT_EQ(chunks, 2u);
  EXPECT_LT(bytes, 300000u);

  bytes = 0;
  Error whole = readFileChunks(dir / "blob", [&](const char *, size_t size) {
    bytes += size;
    return Error::success();
  });
  ASSERT_TRUE(whole.ok()) << whole.message();
  EXPECT_EQ(bytes, 300000u);
}

} // namespace
