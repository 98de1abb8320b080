//===- GptIndexCacheTest.cpp - Megatron's .npy cache of the GPT indices ---===//
//
// An entry written and read back gives the indices built without it; its files are named and
// typed as Megatron's; a dataset, seed or sample count of its own gets its own entry; and every
// entry that is there but cannot be used is an error naming the file, never indices that
// differ from the built ones.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/GptIndexCache.h"

#include "runtime/data/NpyFile.h"

#include "test/unittests/runtime/data/DatasetFiles.h"

#include <gtest/gtest.h>

#include <cstring>
#include <sys/stat.h>

using namespace mtc::rt;
using mtc::rt::test::readBytes;
using mtc::rt::test::TempDir;
using mtc::rt::test::writeBytes;

namespace {

/// A request over documents of lengths 3, 5, 7, ... (40 of them), split [0, 30).
struct Fixture {
  std::vector<int32_t> lengths;
  GptIndexRequest request;

  explicit Fixture(int64_t numSamples = 100, int64_t seqLen = 8) {
    for (int32_t i = 0; i < 40; ++i)
      lengths.push_back(3 + 2 * i % 17);
    request.datasetPath = "corpus";
    request.split = "75,25";
    request.documents = {0, 30};
    request.sequenceLengths = lengths;
    request.seqLen = seqLen;
    request.numSamples = numSamples;
    request.seed = 1234;
  }
  GptSampleIndex built() const {
    Expected<GptSampleIndex> index = buildGptSampleIndex(lengths, request.documents, request.seqLen,
                                                         request.numSamples, request.seed);
    EXPECT_TRUE(index.ok()) << index.error().message();
    return *index;
  }
};

void expectSame(const GptSampleIndex &a, const GptSampleIndex &b) {
  EXPECT_EQ(a.numEpochs, b.numEpochs);
  EXPECT_EQ(a.separateFinalEpoch, b.separateFinalEpoch);
  EXPECT_EQ(a.documentIndex, b.documentIndex);
  EXPECT_EQ(a.sampleIndex, b.sampleIndex);
  EXPECT_EQ(a.shuffleIndex, b.shuffleIndex);
}

TEST(GptIndexCache, BuildsWritesThenLoadsTheSameIndices) {
  TempDir dir;
  // 100 samples of 9 tokens over 30 documents: 3 epochs, the last shuffled apart.
  Fixture f;
  const GptSampleIndex expected = f.built();
  ASSERT_TRUE(expected.separateFinalEpoch);
  Expected<CachedGptIndex> first = cachedGptSampleIndex(dir / "cache", f.request);
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_FALSE(first->loaded);
  expectSame(first->index, expected);
  Expected<CachedGptIndex> second = cachedGptSampleIndex(dir / "cache", f.request);
  ASSERT_TRUE(second.ok()) << second.error().message();
  EXPECT_TRUE(second->loaded);
  expectSame(second->index, expected);

  // Megatron's names and dtypes.
  const GptIndexFiles &files = second->files;
  EXPECT_EQ(files.hash.size(), 32u);
  EXPECT_EQ(files.documentIndex,
            dir / "cache" / (files.hash + "-GPTDataset-train-document_index.npy"));
  EXPECT_EQ(files.description.filename(), files.hash + "-GPTDataset-train-description.txt");
  EXPECT_EQ(readNpyFile(files.documentIndex)->dtype(), NpyDType::I32);
  EXPECT_EQ(readNpyFile(files.sampleIndex)->dtype(), NpyDType::I32);
  EXPECT_EQ(readNpyFile(files.sampleIndex)->shape(),
            (std::vector<int64_t>{expected.numSamples() + 1, 2}));
  EXPECT_EQ(readNpyFile(files.shuffleIndex)->dtype(), NpyDType::U32);
  EXPECT_EQ(readBytes(files.description), describeGptIndex(f.request));
}

TEST(GptIndexCache, TheDescriptionHoldsWhatDecidesTheIndices) {
  Fixture f;
  const std::string base = describeGptIndex(f.request);
  EXPECT_NE(base.find("\"class\": \"GPTDataset\""), std::string::npos) << base;
  EXPECT_NE(base.find("\"random_seed\": 1234"), std::string::npos) << base;
  EXPECT_NE(base.find("\"sequence_lengths_crc32c\": "), std::string::npos) << base;
  auto differs = [&](auto change) {
    Fixture g;
    change(g);
    return describeGptIndex(g.request) != base &&
           gptIndexFiles("d", describeGptIndex(g.request), DataSplit::Train).hash !=
               gptIndexFiles("d", base, DataSplit::Train).hash;
  };
  EXPECT_TRUE(differs([](Fixture &g) { g.request.seed = 1; }));
  EXPECT_TRUE(differs([](Fixture &g) { g.request.numSamples = 101; }));
  EXPECT_TRUE(differs([](Fixture &g) { g.request.seqLen = 9; }));
  EXPECT_TRUE(differs([](Fixture &g) { g.request.documents = {1, 30}; }));
  EXPECT_TRUE(differs([](Fixture &g) { g.request.which = DataSplit::Valid; }));
  EXPECT_TRUE(differs([](Fixture &g) { g.request.datasetPath = "other"; }));
  // The same prefix rewritten with other lengths (same count and total) is another entry.
  EXPECT_TRUE(differs(
      [](Fixture &g) { std::swap(g.lengths[0], g.lengths[1]), ++g.lengths[5], --g.lengths[6]; }));
  // A length outside the split does not change the split's indices, only the count does.
  EXPECT_FALSE(differs([](Fixture &g) { ++g.lengths[35]; }));
}

/// The cache entry of `f` in `dir`, written; its files.
GptIndexFiles writeEntry(const TempDir &dir, const Fixture &f) {
  Expected<CachedGptIndex> cached = cachedGptSampleIndex(dir.path(), f.request);
  EXPECT_TRUE(cached.ok()) << cached.error().message();
  return cached->files;
}

std::string loadError(const TempDir &dir, const Fixture &f) {
  Expected<CachedGptIndex> cached = cachedGptSampleIndex(dir.path(), f.request);
  EXPECT_FALSE(cached.ok());
  return cached.ok() ? "" : cached.error().message();
}

std::string deleteHint(const GptIndexFiles &files) {
  return concat(": the cache entry is stale or corrupt; delete its files '", files.prefix.string(),
                "*' and rerun to rebuild it");
}

/// `path` rewritten as an array of `dtype` and `shape` holding `values`.
void rewrite(const std::filesystem::path &path, NpyDType dtype, std::vector<int64_t> shape,
             const std::vector<int64_t> &values) {
  std::string data;
  for (int64_t v : values) {
    if (dtype == NpyDType::I64)
      data.append(reinterpret_cast<const char *>(&v), 8);
    else {
      uint32_t x = uint32_t(v);
      data.append(reinterpret_cast<const char *>(&x), 4);
    }
  }
  ASSERT_TRUE(writeNpyFile(path, dtype, shape, data).ok());
}

std::vector<int64_t> values(const std::filesystem::path &path) {
  Expected<NpyArray> array = readNpyFile(path);
  EXPECT_TRUE(array.ok());
  std::vector<int64_t> out;
  for (int64_t i = 0; i < array->size(); ++i)
    out.push_back(array->integerAt(i));
  return out;
}

TEST(GptIndexCache, RefusesBrokenEntries) {
  TempDir dir;
  Fixture f;
  const GptIndexFiles files = writeEntry(dir, f);
  const GptSampleIndex index = f.built();
  const std::string hint = deleteHint(files);
  const std::string documents = readBytes(files.documentIndex);
  const std::string samples = readBytes(files.sampleIndex);
  const std::string shuffle = readBytes(files.shuffleIndex);
  const std::string description = readBytes(files.description);
  auto restore = [&] {
    writeBytes(files.documentIndex, documents);
    writeBytes(files.sampleIndex, samples);
    writeBytes(files.shuffleIndex, shuffle);
    writeBytes(files.description, description);
  };
  auto expectMessage = [&](const std::string &message) {
    EXPECT_EQ(loadError(dir, f), concat("--data-cache-path: ", message, hint));
    restore();
    EXPECT_TRUE(cachedGptSampleIndex(dir.path(), f.request)->loaded);
  };
  auto expectError = [&](const std::filesystem::path &path, const std::string &why) {
    EXPECT_EQ(loadError(dir, f), concat("--data-cache-path: ", path, ": ", why, hint));
    restore();
    EXPECT_TRUE(cachedGptSampleIndex(dir.path(), f.request)->loaded);
  };
  const int64_t n = index.numSamples();
  const int64_t d = int64_t(index.documentIndex.size());

  // Truncated, cut in its header, not .npy at all.
  writeBytes(files.shuffleIndex, shuffle.substr(0, shuffle.size() - 3));
  expectMessage(concat(files.shuffleIndex, ": truncated: ", n * 4 - 3,
                       " bytes of data where its "
                       "shape (1-dimensional, ",
                       n, " elements of uint32) needs ", n * 4));
  writeBytes(files.sampleIndex, samples.substr(0, 20));
  expectMessage(concat(files.sampleIndex, ": truncated in its header (20 bytes, "
                                          "the header ends at byte 128)"));
  writeBytes(files.documentIndex, "garbage");
  expectMessage(concat(files.documentIndex, ": not a .npy file (no \\x93NUMPY magic)"));
  // Wrong dtype, wrong shape.
  rewrite(files.documentIndex, NpyDType::U32, {d}, std::vector<int64_t>(size_t(d), 0));
  expectError(files.documentIndex, "its dtype is uint32, not int32 or int64");
  rewrite(files.sampleIndex, NpyDType::I64, {2 * (n + 1)},
          std::vector<int64_t>(size_t(2 * (n + 1)), 0));
  expectError(files.sampleIndex, concat("its shape is (", 2 * (n + 1), ",), not the (", n + 1,
                                        ", 2) of this split's indices"));
  rewrite(files.shuffleIndex, NpyDType::I64, {n - 1}, std::vector<int64_t>(size_t(n - 1), 0));
  expectError(files.shuffleIndex,
              concat("its shape is (", n - 1, ",), not the (", n, ",) of this split's indices"));
  // Right layout, wrong values: a document outside the split, counts off, a sample index that
  // does not follow, a shuffle that is not a permutation or mixes the final epoch in.
  std::vector<int64_t> docs = values(files.documentIndex);
  std::vector<int64_t> bad = docs;
  bad[3] = 30;
  rewrite(files.documentIndex, NpyDType::I32, {d}, bad);
  expectError(files.documentIndex, "element 3 is 30, outside the split's documents [0, 29]");
  bad = docs;
  bad[0] = bad[0] == 0 ? 1 : 0;
  rewrite(files.documentIndex, NpyDType::I32, {d}, bad);
  expectError(files.documentIndex, "its entries are not the split's 30 documents once in each of "
                                   "2 epochs (their sums differ)");
  bad = docs;
  bad[size_t(d) - 1] = bad[size_t(d) - 2]; // the final epoch holds one twice, another never
  rewrite(files.documentIndex, NpyDType::I32, {d}, bad);
  EXPECT_NE(loadError(dir, f).find("are not the split's documents once each, the final epoch "
                                   "shuffled apart (their sums differ)" +
                                   hint),
            std::string::npos);
  restore();
  std::vector<int64_t> rows = values(files.sampleIndex);
  std::vector<int64_t> badRows = rows;
  badRows[1] = 1;
  rewrite(files.sampleIndex, NpyDType::I64, {n + 1, 2}, badRows);
  expectError(files.sampleIndex, "row 0 has offset 1");
  badRows = rows;
  ASSERT_GT(rows[8], 0);
  badRows[10] = rows[8] - 1;
  rewrite(files.sampleIndex, NpyDType::I32, {n + 1, 2}, badRows);
  expectError(files.sampleIndex,
              concat("row 5 starts at position ", rows[8] - 1, ", after row 4's ", rows[8],
                     " or past the document index"));
  badRows = rows;
  badRows[size_t(2 * n)] = d;
  rewrite(files.sampleIndex, NpyDType::I64, {n + 1, 2}, badRows);
  expectError(files.sampleIndex,
              concat("row ", n, " starts at position ", d, ", after row ", n - 1, "'s ",
                     rows[size_t(2 * n - 2)], " or past the document index"));
  // Two samples of one document that are not seqLen apart.
  for (int64_t r = 1; r < n; ++r)
    if (rows[size_t(2 * r)] == rows[size_t(2 * r - 2)]) {
      badRows = rows;
      badRows[size_t(2 * r + 1)] += 1;
      rewrite(files.sampleIndex, NpyDType::I64, {n + 1, 2}, badRows);
      expectError(files.sampleIndex,
                  concat("row ", r, " has offset ", rows[size_t(2 * r + 1)] + 1, ", not ",
                         rows[size_t(2 * r + 1)], " (a sample of the same document)"));
      break;
    }
  std::vector<int64_t> order = values(files.shuffleIndex);
  order[1] = order[0];
  rewrite(files.shuffleIndex, NpyDType::U32, {n}, order);
  expectError(files.shuffleIndex, concat("sample ", order[0], " appears twice (element 1)"));
  order = values(files.shuffleIndex);
  std::swap(order[0], order[size_t(n) - 1]);
  rewrite(files.shuffleIndex, NpyDType::I64, {n}, order);
  EXPECT_NE(loadError(dir, f).find("are shuffled apart" + hint), std::string::npos);
  restore();
  order = values(files.shuffleIndex);
  order[0] = n;
  rewrite(files.shuffleIndex, NpyDType::U32, {n}, order);
  expectError(files.shuffleIndex,
              concat("element 0 is ", n, ", outside the samples [0, ", n - 1, "]"));

  // The description edited; a file missing; a directory or a FIFO in a file's place.
  writeBytes(files.description, description + " ");
  expectError(files.description, "it describes other indices than this run's (an edited file, "
                                 "or a hash collision)");
  std::filesystem::remove(files.sampleIndex);
  expectError(files.sampleIndex, "missing, though the entry's description.txt is there");
  std::filesystem::remove(files.shuffleIndex);
  std::filesystem::create_directory(files.shuffleIndex);
  EXPECT_EQ(loadError(dir, f), concat("--data-cache-path: ", files.shuffleIndex,
                                      " is a directory, not a regular file", hint));
  std::filesystem::remove(files.shuffleIndex);
  restore();
  std::filesystem::remove(files.documentIndex);
  ASSERT_EQ(::mkfifo(files.documentIndex.c_str(), 0644), 0);
  EXPECT_EQ(loadError(dir, f), concat("--data-cache-path: ", files.documentIndex,
                                      " is a FIFO (named pipe), not a regular file", hint));
  std::filesystem::remove(files.documentIndex);
  restore();
  EXPECT_TRUE(cachedGptSampleIndex(dir.path(), f.request)->loaded);
}

TEST(GptIndexCache, WithoutTheDescriptionTheEntryIsRebuilt) {
  TempDir dir;
  Fixture f;
  const GptIndexFiles files = writeEntry(dir, f);
  // An interrupted write leaves arrays without the description: built and written again.
  std::filesystem::remove(files.description);
  writeBytes(files.shuffleIndex, "half-written");
  Expected<CachedGptIndex> again = cachedGptSampleIndex(dir.path(), f.request);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_FALSE(again->loaded);
  expectSame(again->index, f.built());
  EXPECT_TRUE(cachedGptSampleIndex(dir.path(), f.request)->loaded);
}

TEST(GptIndexCache, ReportsADirectoryItCannotWrite) {
  TempDir dir;
  writeBytes(dir / "file", "x");
  Fixture f;
  Expected<CachedGptIndex> cached = cachedGptSampleIndex(dir / "file" / "cache", f.request);
  ASSERT_FALSE(cached.ok());
  EXPECT_EQ(cached.error().message(), concat("--data-cache-path: cannot create the directory ",
                                             dir / "file" / "cache", ": Not a directory"))
      << cached.error().message();
  // A description in the way of the entry's directory... a directory where the description goes.
  const GptIndexFiles files =
      gptIndexFiles(dir / "c", describeGptIndex(f.request), DataSplit::Train);
  std::filesystem::create_directories(files.description);
  Expected<CachedGptIndex> blocked = cachedGptSampleIndex(dir / "c", f.request);
  ASSERT_FALSE(blocked.ok());
  EXPECT_NE(blocked.error().message().find("is a directory, not a regular file"), std::string::npos)
      << blocked.error().message();
}

TEST(GptIndexCache, EveryValidEntryLoads) {
  TempDir dir;
  for (int64_t seqLen : {2, 3, 8, 19, 64})
    for (int64_t samples : {0, 1, 5, 37, 100, 400})
      for (uint32_t seed : {0u, 7u}) {
        Fixture f(samples, seqLen);
        f.request.seed = seed;
        ASSERT_TRUE(cachedGptSampleIndex(dir.path(), f.request).ok());
        Expected<CachedGptIndex> loaded = cachedGptSampleIndex(dir.path(), f.request);
        ASSERT_TRUE(loaded.ok()) << seqLen << " " << samples << ": " << loaded.error().message();
        EXPECT_TRUE(loaded->loaded);
        expectSame(loaded->index, f.built());
      }
}

TEST(GptIndexCache, AnEmptyOrderAndOneEpoch) {
  TempDir dir;
  for (int64_t samples : {0, 1, 20}) {
    Fixture f(samples);
    Expected<CachedGptIndex> built = cachedGptSampleIndex(dir.path(), f.request);
    ASSERT_TRUE(built.ok()) << built.error().message();
    Expected<CachedGptIndex> loaded = cachedGptSampleIndex(dir.path(), f.request);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message();
    EXPECT_TRUE(loaded->loaded);
    expectSame(loaded->index, f.built());
  }
}

} // namespace
