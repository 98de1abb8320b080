//===- IndexedDatasetTest.cpp - Megatron's .idx/.bin token files ----------===//
//
// The writer and the reader round trip, and every corrupt or misplaced file is an error that
// names the file and the problem. Byte equality with Megatron's writer (through a numpy
// reimplementation) is checked by test/tools/mtc-data.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/IndexedDataset.h"

#include "test/unittests/runtime/TempDir.h"

#include <gtest/gtest.h>

#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

using namespace mtc::rt;
using mtc::rt::test::TempDir;
using namespace std::string_literals;

namespace {

/// Documents of sentences: {{a, b}, {c}} is a document of two sequences, then one of one.
using Documents = std::vector<std::vector<std::vector<int64_t>>>;

std::filesystem::path write(const std::filesystem::path &prefix, const Documents &docs,
                            TokenDType dtype = TokenDType::U16) {
  Expected<IndexedDatasetWriter> w = IndexedDatasetWriter::create(prefix, dtype);
  EXPECT_TRUE(w) << w.error().message();
  for (const auto &doc : docs) {
    for (const auto &sequence : doc) {
      EXPECT_TRUE(w->addTokens(sequence).ok());
      EXPECT_TRUE(w->endSequence().ok());
    }
    EXPECT_TRUE(w->endDocument().ok());
  }
  Error err = w->finish();
  EXPECT_TRUE(err.ok()) << err.message();
  return prefix;
}

const Documents kDocs = {{{1, 2, 3}, {4, 5}}, {}, {{6, 7, 8, 9}}, {{10}}};

TEST(IndexedDatasetTest, RoundTrip) {
  TempDir dir;
  for (TokenDType dtype : {TokenDType::U8, TokenDType::U16, TokenDType::I32, TokenDType::I64,
                           TokenDType::F32, TokenDType::F64}) {
    std::filesystem::path prefix = write(dir / std::string(tokenDTypeName(dtype)), kDocs, dtype);
    Expected<IndexedDataset> ds = IndexedDataset::open(prefix);
    ASSERT_TRUE(ds) << ds.error().message();
    EXPECT_EQ(ds->dtype(), dtype);
    EXPECT_EQ(ds->numSequences(), 4);
    EXPECT_EQ(ds->numDocuments(), 4); // the empty document holds no sequence
    EXPECT_EQ(ds->numTokens(), 10);
    EXPECT_EQ(std::vector<int32_t>(ds->sequenceLengths().begin(), ds->sequenceLengths().end()),
              (std::vector<int32_t>{3, 2, 4, 1}));
    const int64_t item = int64_t(tokenDTypeSize(dtype));
    EXPECT_EQ(std::vector<int64_t>(ds->sequencePointers().begin(), ds->sequencePointers().end()),
              (std::vector<int64_t>{0, 3 * item, 5 * item, 9 * item}));
    EXPECT_EQ(std::vector<int64_t>(ds->documentIndices().begin(), ds->documentIndices().end()),
              (std::vector<int64_t>{0, 2, 2, 3, 4}));
    std::vector<int64_t> tokens;
    ASSERT_TRUE(ds->read(2, 1, 3, tokens).ok());
    ASSERT_TRUE(ds->read(0, 0, 3, tokens).ok());
    EXPECT_EQ(tokens, (std::vector<int64_t>{7, 8, 9, 1, 2, 3}));
    EXPECT_EQ(std::filesystem::file_size(binPath(prefix)), uint64_t(10 * item));
    EXPECT_EQ(std::filesystem::file_size(indexPath(prefix)), uint64_t(34 + 12 * 4 + 8 * 5));
    Error outside = ds->read(3, 0, 2, tokens);
    EXPECT_EQ(outside.message(), "indexed dataset '" + prefix.string() +
                                     "': tokens [0, 2) are outside sequence 3 of 1 tokens");
  }
}

TEST(IndexedDatasetTest, WriterRefusesWhatTheDtypeCannotHold) {
  TempDir dir;
  Expected<IndexedDatasetWriter> w = IndexedDatasetWriter::create(dir / "c", TokenDType::U16);
  ASSERT_TRUE(w) << w.error().message();
  std::vector<int64_t> big = {65536};
  EXPECT_EQ(w->addTokens(big).message(), "indexed dataset '" + (dir / "c").string() +
                                             "': token 65536 does not fit its dtype uint16");
}

TEST(IndexedDatasetTest, UnfinishedWriterLeavesNothing) {
  TempDir dir;
  {
    Expected<IndexedDatasetWriter> w = IndexedDatasetWriter::create(dir / "c", TokenDType::U16);
    ASSERT_TRUE(w);
    std::vector<int64_t> tokens = {1, 2, 3};
    ASSERT_TRUE(w->addTokens(tokens).ok());
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

/// Overwrites bytes of a file at `offset`.
void patch(const std::filesystem::path &file, size_t offset, const void *bytes, size_t size) {
  std::string data = test::readBytes(file);
  ASSERT_LE(offset + size, data.size());
  std::memcpy(data.data() + offset, bytes, size);
  test::writeBytes(file, data);
}

template <class T> void patchValue(const std::filesystem::path &file, size_t offset, T value) {
  patch(file, offset, &value, sizeof value);
}

/// The message of opening `prefix`, which must fail.
std::string openError(const std::filesystem::path &prefix) {
  Expected<IndexedDataset> ds = IndexedDataset::open(prefix);
  return ds ? std::string("opened") : ds.error().message();
}

// Offsets in kDocs' .idx: 0 magic, 9 version, 17 dtype, 18 S (4), 26 D (5), 34 lengths,
// 50 pointers, 82 document indices, 122 the end.
TEST(IndexedDatasetTest, CorruptIndex) {
  TempDir dir;
  auto fresh = [&] { return write(dir / "c", kDocs); };
  const std::string idx = "indexed dataset '" + (dir / "c.idx").string() + "': ";

  patch(indexPath(fresh()), 0, "MMIDIDY", 7);
  EXPECT_EQ(openError(dir / "c"), idx + "not a Megatron indexed dataset index (its first bytes "
                                        "are not the magic \"MMIDIDX\\0\\0\")");
  patchValue<uint64_t>(indexPath(fresh()), 9, 2);
  EXPECT_EQ(openError(dir / "c"), idx + "version 2 is not supported (only version 1 is)");
  patchValue<uint8_t>(indexPath(fresh()), 17, 9);
  EXPECT_EQ(openError(dir / "c"), idx + "unknown dtype code 9 (the codes are 1 to 8)");
  patchValue<uint64_t>(indexPath(fresh()), 18, uint64_t(1) << 60);
  EXPECT_EQ(openError(dir / "c"),
            idx + "its header counts 1152921504606846976 sequences and 5 document indices, "
                  "which need more bytes than a file holds, but the file has 122 (truncated?)");
  patchValue<uint64_t>(indexPath(fresh()), 26, 4);
  EXPECT_EQ(openError(dir / "c"), idx + "its header counts 4 sequences and 4 document indices, "
                                        "which need 114 bytes, but the file has 122");
  // A multimodal index: a mode byte per sequence after the document indices.
  fresh();
  test::writeBytes(indexPath(dir / "c"), test::readBytes(indexPath(dir / "c")) + "\0\0\0\0"s);
  EXPECT_EQ(openError(dir / "c"),
            idx + "a multimodal index (a mode byte per sequence), which mtc does not read");
  std::filesystem::resize_file(indexPath(fresh()), 20);
  EXPECT_EQ(openError(dir / "c"), idx + "the file is 20 bytes, shorter than the 34-byte header");

  patchValue<int32_t>(indexPath(fresh()), 34 + 4, -2);
  EXPECT_EQ(openError(dir / "c"), idx + "sequence 1 has a negative length (-2)");
  patchValue<int64_t>(indexPath(fresh()), 50 + 3 * 8, 19);
  EXPECT_EQ(openError(dir / "c"), idx + "sequence 3 (1 tokens at byte 19) lies outside '" +
                                      (dir / "c.bin").string() + "', which is 20 bytes");
  patchValue<int32_t>(indexPath(fresh()), 34 + 2 * 4, 6);
  EXPECT_EQ(openError(dir / "c"), idx + "sequence 2 (6 tokens at byte 10) lies outside '" +
                                      (dir / "c.bin").string() + "', which is 20 bytes");
  patchValue<int64_t>(indexPath(fresh()), 82, 1);
  EXPECT_EQ(openError(dir / "c"), idx + "the first document index is 1, not 0");
  patchValue<int64_t>(indexPath(fresh()), 82 + 2 * 8, 1);
  EXPECT_EQ(openError(dir / "c"), idx + "document index 2 (1) is below the one before it (2)");
  patchValue<int64_t>(indexPath(fresh()), 82 + 4 * 8, 3);
  EXPECT_EQ(openError(dir / "c"), idx + "the last document index is 3, not the number of "
                                        "sequences (4)");
  // No document indices at all: D = 0 and the file ends after the pointers.
  fresh();
  patchValue<uint64_t>(indexPath(dir / "c"), 26, 0);
  std::filesystem::resize_file(indexPath(dir / "c"), 82);
  EXPECT_EQ(openError(dir / "c"),
            idx + "it has no document indices (Megatron writes at least the leading 0)");
}

TEST(IndexedDatasetTest, MisplacedFiles) {
  TempDir dir;
  const std::string prefix = "indexed dataset '" + (dir / "c").string() + "'";
  EXPECT_EQ(openError(dir / "c"), prefix + ": neither '" + (dir / "c.idx").string() + "' nor '" +
                                      (dir / "c.bin").string() + "' exists");
  // The path of a file instead of the prefix.
  write(dir / "c", kDocs);
  EXPECT_EQ(openError(dir / "c.idx"),
            "indexed dataset '" + (dir / "c.idx").string() +
                "': give the prefix of the .idx and .bin files, without the extension: '" +
                (dir / "c").string() + "'");
  EXPECT_EQ(openError(dir / "c.bin"),
            "indexed dataset '" + (dir / "c.bin").string() +
                "': give the prefix of the .idx and .bin files, without the extension: '" +
                (dir / "c").string() + "'");
  // An .idx without its .bin.
  std::filesystem::remove(dir / "c.bin");
  EXPECT_EQ(openError(dir / "c"),
            prefix + ": cannot open '" + (dir / "c.bin").string() + "': No such file or directory");
  // A .bin without its .idx.
  write(dir / "c", kDocs);
  std::filesystem::remove(dir / "c.idx");
  EXPECT_EQ(openError(dir / "c"),
            prefix + ": cannot open '" + (dir / "c.idx").string() + "': No such file or directory");
  // A directory or a FIFO where a file belongs.
  std::filesystem::create_directory(dir / "c.idx");
  EXPECT_EQ(openError(dir / "c"),
            prefix + ": '" + (dir / "c.idx").string() + "' is a directory, not a regular file");
  std::filesystem::remove(dir / "c.idx");
  write(dir / "c", kDocs);
  std::filesystem::remove(dir / "c.bin");
  ASSERT_EQ(::mkfifo((dir / "c.bin").c_str(), 0600), 0);
  EXPECT_EQ(openError(dir / "c"), prefix + ": '" + (dir / "c.bin").string() +
                                      "' is a FIFO (named pipe), not a regular file");
}

// A .bin truncated or rewritten while training is an error naming it, never a SIGBUS.
TEST(IndexedDatasetTest, BinChangedWhileInUse) {
  TempDir dir;
  write(dir / "c", kDocs);
  Expected<IndexedDataset> ds = IndexedDataset::open(dir / "c");
  ASSERT_TRUE(ds) << ds.error().message();
  std::vector<int64_t> tokens;
  ASSERT_TRUE(ds->read(2, 0, 4, tokens).ok());
  ASSERT_EQ(::truncate((dir / "c.bin").c_str(), 8), 0);
  Error err = ds->read(2, 0, 4, tokens);
  EXPECT_EQ(err.message(), "indexed dataset '" + (dir / "c.bin").string() +
                               "' is 8 bytes now but was 20 when it was opened: it was modified "
                               "while in use");
}

TEST(IndexedDatasetTest, FloatTokensMustBeWhole) {
  TempDir dir;
  write(dir / "c", {{{1, 2}}}, TokenDType::F32);
  patchValue<float>(binPath(dir / "c"), 4, 2.5f);
  Expected<IndexedDataset> ds = IndexedDataset::open(dir / "c");
  ASSERT_TRUE(ds) << ds.error().message();
  std::vector<int64_t> tokens;
  EXPECT_EQ(ds->read(0, 0, 2, tokens).message(),
            "indexed dataset '" + (dir / "c.bin").string() +
                "': token 1 of sequence 0 is not a whole number (dtype float32)");
}

} // namespace
