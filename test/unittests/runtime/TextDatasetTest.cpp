//===- TextDatasetTest.cpp - Byte-level dataset over a file ---------------===//

#include "runtime/data/TextDataset.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sys/stat.h>
#include <unistd.h>

using namespace mtc::rt;

namespace {

using test::TempDir;

std::string sampleText() {
  std::string s;
  for (int i = 0; i < 200; ++i)
    s += "line " + std::to_string(i) + ": the quick brown fox jumps over the lazy dog.\n";
  return s;
}

TEST(TextDatasetTest, OpenErrorsNameThePath) {
  TempDir dir;
  Expected<TextDataset> missing = TextDataset::open(dir / "nope.txt");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("nope.txt"), std::string::npos);
  EXPECT_NE(missing.error().message().find("No such file"), std::string::npos)
      << missing.error().message();

  test::writeBytes(dir / "empty.txt", "");
  Expected<TextDataset> empty = TextDataset::open(dir / "empty.txt");
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message().find("empty.txt"), std::string::npos);
  EXPECT_NE(empty.error().message().find("the file is empty"), std::string::npos);

  Expected<TextDataset> directory = TextDataset::open(dir.path());
  ASSERT_FALSE(directory);
  EXPECT_NE(directory.error().message().find("is a directory, not a regular file"),
            std::string::npos)
      << directory.error().message();
  EXPECT_NE(directory.error().message().find(dir.path().string()), std::string::npos);

  // A FIFO without a writer would block a plain open(2) forever.
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  Expected<TextDataset> fifo = TextDataset::open(dir / "fifo");
  ASSERT_FALSE(fifo);
  EXPECT_EQ(fifo.error().message(), "text dataset: '" + (dir / "fifo").string() +
                                        "' is a FIFO (named pipe), not a regular file");
}

// A file truncated while in use was a SIGBUS through the mapping; now it is an error that
// says what happened.
TEST(TextDatasetTest, FileTruncatedWhileInUse) {
  TempDir dir;
  test::writeBytes(dir / "corpus.txt", sampleText());
  Expected<TextDataset> d = TextDataset::open(dir / "corpus.txt", 3);
  ASSERT_TRUE(d) << d.error().message();
  std::vector<int32_t> tokens(8 * 64), labels(8 * 64);
  ASSERT_TRUE(d->batch(0, 0, 8, 64, tokens.data(), labels.data()).ok());
  ASSERT_EQ(::truncate((dir / "corpus.txt").c_str(), 10), 0);
  Error err = d->batch(0, 0, 8, 64, tokens.data(), labels.data());
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.message().find("text dataset '" + (dir / "corpus.txt").string() +
                               "' ended at byte 10 while "),
            std::string::npos)
      << err.message();
  EXPECT_NE(err.message().find("it was truncated while in use"), std::string::npos);
}

TEST(TextDatasetTest, UnreadableFile) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root reads files regardless of their permissions";
  TempDir dir;
  test::writeBytes(dir / "secret.txt", "data");
  ::chmod((dir / "secret.txt").c_str(), 0);
  Expected<TextDataset> d = TextDataset::open(dir / "secret.txt");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("secret.txt"), std::string::npos);
  EXPECT_NE(d.error().message().find("Permission denied"), std::string::npos);
}

TEST(TextDatasetTest, WindowsAreSubstringsShiftedByOne) {
  TempDir dir;
  const std::string text = sampleText();
  test::writeBytes(dir / "corpus.txt", text);
  Expected<TextDataset> d = TextDataset::open(dir / "corpus.txt", 42);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->vocab(), 256);
  EXPECT_EQ(d->size(), text.size());
  EXPECT_EQ(d->seed(), 42u);

  const int64_t count = 16, seqLen = 100;
  std::vector<int32_t> tokens(count * seqLen), labels(count * seqLen);
  ASSERT_TRUE(d->batch(5, 0, count, seqLen, tokens.data(), labels.data()).ok());
  for (int64_t s = 0; s < count; ++s) {
    uint64_t start = d->windowStart(5, s, seqLen);
    ASSERT_LE(start + seqLen + 1, text.size());
    for (int64_t t = 0; t < seqLen; ++t) {
      ASSERT_EQ(tokens[s * seqLen + t], (unsigned char)text[start + t]);
      ASSERT_EQ(labels[s * seqLen + t], (unsigned char)text[start + t + 1]);
    }
  }
}

TEST(TextDatasetTest, DeterministicPerStepAndSample) {
  TempDir dir;
  test::writeBytes(dir / "corpus.txt", sampleText());
  Expected<TextDataset> a = TextDataset::open(dir / "corpus.txt", 1);
  Expected<TextDataset> b = TextDataset::open(dir / "corpus.txt", 1);
  Expected<TextDataset> c = TextDataset::open(dir / "corpus.txt", 2);
  ASSERT_TRUE(a && b && c);
  const int64_t seqLen = 64;
  std::vector<int32_t> whole(12 * seqLen), wholeL(12 * seqLen);
  ASSERT_TRUE(a->batch(9, 0, 12, seqLen, whole.data(), wholeL.data()).ok());
  // A rank's slice equals the same rows of the whole batch, in another instance too.
  std::vector<int32_t> part(5 * seqLen), partL(5 * seqLen);
  ASSERT_TRUE(b->batch(9, 7, 5, seqLen, part.data(), partL.data()).ok());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + 7 * seqLen));
  EXPECT_TRUE(std::equal(partL.begin(), partL.end(), wholeL.begin() + 7 * seqLen));
  // Other steps, samples and seeds pick other windows.
  int sameStep = 0, sameSeed = 0, sameSample = 0;
  for (int64_t s = 0; s < 50; ++s) {
    sameStep += a->windowStart(9, s, seqLen) == a->windowStart(10, s, seqLen);
    sameSeed += a->windowStart(9, s, seqLen) == c->windowStart(9, s, seqLen);
    sameSample += a->windowStart(9, s, seqLen) == a->windowStart(9, s + 1, seqLen);
  }
  EXPECT_LT(sameStep, 3);
  EXPECT_LT(sameSeed, 3);
  EXPECT_LT(sameSample, 3);
}

TEST(TextDatasetTest, WindowStartsCoverTheFile) {
  TempDir dir;
  test::writeBytes(dir / "corpus.txt", sampleText());
  Expected<TextDataset> d = TextDataset::open(dir / "corpus.txt");
  ASSERT_TRUE(d);
  const int64_t seqLen = 256;
  const uint64_t last = d->size() - seqLen - 1;
  uint64_t lo = UINT64_MAX, hi = 0;
  double sum = 0;
  const int n = 20000;
  for (int s = 0; s < n; ++s) {
    uint64_t start = d->windowStart(0, s, seqLen);
    ASSERT_LE(start, last);
    lo = std::min(lo, start);
    hi = std::max(hi, start);
    sum += double(start);
  }
  EXPECT_LT(lo, last / 100);
  EXPECT_GT(hi, last - last / 100);
  EXPECT_NEAR(sum / n / last, 0.5, 0.01);
  // A window exactly the file's size has one possible start.
  EXPECT_EQ(d->windowStart(3, 3, int64_t(d->size()) - 1), 0u);
}

TEST(TextDatasetTest, ShortFilesAreReadCyclically) {
  TempDir dir;
  test::writeBytes(dir / "abc.txt", "abc");
  Expected<TextDataset> d = TextDataset::open(dir / "abc.txt");
  ASSERT_TRUE(d);
  const int64_t seqLen = 8;
  std::vector<int32_t> tokens(4 * seqLen), labels(4 * seqLen);
  ASSERT_TRUE(d->batch(0, 0, 4, seqLen, tokens.data(), labels.data()).ok());
  for (int64_t s = 0; s < 4; ++s) {
    uint64_t start = d->windowStart(0, s, seqLen);
    ASSERT_LT(start, 3u);
    for (int64_t t = 0; t < seqLen; ++t) {
      ASSERT_EQ(tokens[s * seqLen + t], 'a' + int((start + t) % 3));
      ASSERT_EQ(labels[s * seqLen + t], 'a' + int((start + t + 1) % 3));
    }
  }
}

TEST(TextDatasetTest, BinaryBytesAreTokens0To255) {
  TempDir dir;
  std::string bytes;
  for (int i = 0; i < 256; ++i)
    bytes.push_back(static_cast<char>(i));
  test::writeBytes(dir / "all.bin", bytes);
  Expected<TextDataset> d = TextDataset::open(dir / "all.bin", 3);
  ASSERT_TRUE(d);
  std::vector<int32_t> tokens(255), labels(255);
  ASSERT_TRUE(d->batch(0, 0, 1, 255, tokens.data(), labels.data()).ok());
  for (int t = 0; t < 255; ++t) {
    EXPECT_EQ(tokens[t], t); // the only window of 256 bytes starts at 0
    EXPECT_EQ(labels[t], t + 1);
  }
}

TEST(TextDatasetTest, MoveKeepsTheFile) {
  TempDir dir;
  test::writeBytes(dir / "corpus.txt", sampleText());
  Expected<TextDataset> d = TextDataset::open(dir / "corpus.txt", 8);
  ASSERT_TRUE(d);
  std::vector<int32_t> before(32), beforeL(32), after(32), afterL(32);
  ASSERT_TRUE(d->batch(1, 0, 1, 32, before.data(), beforeL.data()).ok());
  TextDataset moved = std::move(*d);
  ASSERT_TRUE(moved.batch(1, 0, 1, 32, after.data(), afterL.data()).ok());
  EXPECT_EQ(before, after);
  EXPECT_EQ(beforeL, afterL);
  Expected<TextDataset> other = TextDataset::open(dir / "corpus.txt", 8);
  ASSERT_TRUE(other);
  moved = std::move(*other); // move-assignment closes the old file
  ASSERT_TRUE(moved.batch(1, 0, 1, 32, after.data(), afterL.data()).ok());
  EXPECT_EQ(before, after);
  // Degenerate requests write nothing.
  int32_t tok = -1, lab = -1;
  ASSERT_TRUE(moved.batch(1, 0, 0, 32, &tok, &lab).ok());
  ASSERT_TRUE(moved.batch(1, 0, 1, 0, &tok, &lab).ok());
  EXPECT_EQ(tok, -1);
}

} // namespace
