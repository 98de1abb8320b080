//===- Sha256Test.cpp - SHA-256 against FIPS 180-4 vectors ----------------===//

#include "runtime/support/Sha256.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <string>

using namespace mtc::rt;
using mtc::rt::test::TempDir;
using mtc::rt::test::writeBytes;

namespace {

// The message digests of FIPS 180-4's examples (NIST CSRC "SHA256.pdf", "SHA2_Additional.pdf")
// and the long-message vector of FIPS 180-2 appendix B.3.
constexpr const char *kEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr const char *kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char *k448Bits = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
constexpr const char *k896Bits = "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1";
constexpr const char *kMillionA =
    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

const std::string k448Message = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
const std::string k896Message = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                                "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";

TEST(Sha256Test, FipsVectors) {
  EXPECT_EQ(sha256Hex(""), kEmpty);
  EXPECT_EQ(sha256Hex("abc"), kAbc);
  ASSERT_EQ(k448Message.size() * 8, 448u);
  EXPECT_EQ(sha256Hex(k448Message), k448Bits);
  ASSERT_EQ(k896Message.size() * 8, 896u);
  EXPECT_EQ(sha256Hex(k896Message), k896Bits);
  EXPECT_EQ(sha256Hex(std::string(1000000, 'a')), kMillionA);
}

TEST(Sha256Test, DigestBytesAndHex) {
  Sha256Digest d = sha256("abc");
  EXPECT_EQ(d[0], 0xba);
  EXPECT_EQ(d[31], 0xad);
  EXPECT_EQ(toHex(d), kAbc);
}

TEST(Sha256Test, StreamingInOddChunks) {
  std::string million(1000000, 'a');
  for (size_t chunk : {1u, 3u, 7u, 55u, 56u, 63u, 64u, 65u, 127u, 1000u, 4093u}) {
    Sha256 h;
    for (size_t pos = 0; pos < million.size(); pos += chunk)
      h.update(std::string_view(million).substr(pos, chunk));
    EXPECT_EQ(h.finalizeHex(), kMillionA) << "chunk " << chunk;
  }
  // Uneven, varying splits of the 896-bit message.
  Sha256 h;
  size_t pos = 0, step = 1;
  while (pos < k896Message.size()) {
    h.update(std::string_view(k896Message).substr(pos, step));
    pos += step;
    step = step * 3 % 17 + 1;
  }
  EXPECT_EQ(h.finalizeHex(), k896Bits);
}

TEST(Sha256Test, PaddingBoundaries) {
  // Lengths around the 55/56/64-byte padding boundaries: streaming byte by byte must match the
  // one-shot digest, and every length gives a different digest.
  std::string previous;
  for (size_t n = 50; n <= 130; ++n) {
    std::string msg(n, 'x');
    Sha256 h;
    for (char c : msg)
      h.update(&c, 1);
    std::string streamed = h.finalizeHex();
    EXPECT_EQ(streamed, sha256Hex(msg)) << n;
    EXPECT_NE(streamed, previous) << n;
    previous = streamed;
  }
}

TEST(Sha256Test, FinalizeResets) {
  Sha256 h;
  h.update("garbage");
  h.finalize();
  h.update("abc");
  EXPECT_EQ(h.finalizeHex(), kAbc);
  EXPECT_EQ(h.finalizeHex(), kEmpty);
  h.update("partial");
  h.reset();
  h.update("abc");
  EXPECT_EQ(h.finalizeHex(), kAbc);
}

TEST(Sha256Test, Files) {
  TempDir dir;
  writeBytes(dir / "a", std::string(1000000, 'a'));
  Expected<FileDigest> d = sha256File(dir / "a");
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->sha256Hex, kMillionA);
  EXPECT_EQ(d->size, 1000000u);

  writeBytes(dir / "empty", "");
  d = sha256File(dir / "empty");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->sha256Hex, kEmpty);
  EXPECT_EQ(d->size, 0u);

  d = sha256File(dir / "missing");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("cannot open"), std::string::npos) << d.error().message();
  EXPECT_NE(d.error().message().find("missing"), std::string::npos);

  d = sha256File(dir.path());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message(), "'" + dir.path().string() + "' is a directory, not a regular file");
}

} // namespace
