//===- BlendIndexCacheTest.cpp - Megatron's .npy cache of a blend's indices ===//
//
// An entry written and read back gives the blending indices built without it, in Megatron's
// files and dtypes; other weights, another size or another dataset's description are another
// entry; and an entry that is there but cannot be used is an error naming the file and telling
// to delete it, never other indices.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/BlendIndexCache.h"

#include "runtime/data/NpyFile.h"
#include "runtime/support/TemporaryFiles.h"

#include "test/unittests/runtime/data/DatasetFiles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

using namespace mtc::rt;
using mtc::rt::test::TempDir;

namespace {

BlendIndexRequest request(int64_t size = 1000) {
  BlendIndexRequest r;
  r.which = DataSplit::Valid;
  r.datasets = {R"({"class": "GPTDataset", "dataset_path": "a"})",
                R"({"class": "GPTDataset", "dataset_path": "b"})",
                R"({"class": "GPTDataset", "dataset_path": "c"})"};
  r.weights = normalizeWeights(std::vector<double>{0.2, 0.5, 0.3});
  r.size = size;
  r.datasetSamples = {size, size, size};
  return r;
}

std::string contents(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void overwrite(const std::filesystem::path &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

TEST(BlendIndexCache, BuildsWritesThenLoadsTheSameIndices) {
  TempDir dir;
  BlendIndexRequest r = request();
  Expected<BlendingIndex> built = buildBlendingIndex(r.weights, r.size);
  ASSERT_TRUE(built.ok());
  Expected<CachedBlendIndex> first = cachedBlendingIndex(dir.path() / "cache", r);
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_FALSE(first->loaded);
  EXPECT_EQ(first->index.dataset, built->dataset);
  EXPECT_EQ(first->index.sample, built->sample);
  // Megatron's names and dtypes.
  const std::string base = first->files.hash + "-BlendedDataset-valid-";
  EXPECT_EQ(first->files.prefix, dir.path() / "cache" / base);
  EXPECT_EQ(first->files.hash.size(), 32u);
  Expected<NpyArray> datasets = readNpyFile(dir.path() / "cache" / (base + "dataset_index.npy"));
  Expected<NpyArray> samples =
      readNpyFile(dir.path() / "cache" / (base + "dataset_sample_index.npy"));
  ASSERT_TRUE(datasets.ok() && samples.ok());
  EXPECT_EQ(datasets->dtype(), NpyDType::I16);
  EXPECT_EQ(samples->dtype(), NpyDType::I64);
  EXPECT_EQ(datasets->shape(), std::vector<int64_t>{1000});
  EXPECT_EQ(samples->integerAt(999), built->sample[999]);
  std::string description = contents(first->files.description);
  EXPECT_NE(description.find("\"class\": \"BlendedDataset\""), std::string::npos);
  EXPECT_NE(description.find("\"dataset_path\": \"b\""), std::string::npos);
  // Loaded the second time.
  Expected<CachedBlendIndex> second = cachedBlendingIndex(dir.path() / "cache", r);
  ASSERT_TRUE(second.ok()) << second.error().message();
  EXPECT_TRUE(second->loaded);
  EXPECT_EQ(second->index.dataset, built->dataset);
  EXPECT_EQ(second->index.sample, built->sample);
}

TEST(BlendIndexCache, WhatTheIndicesDependOnNamesTheEntry) {
  BlendIndexRequest r = request();
  const std::string hash = blendIndexFiles("d", *describeBlendIndex(r), r.which).hash;
  auto hashOf = [](const BlendIndexRequest &other) {
    return blendIndexFiles("d", *describeBlendIndex(other), other.which).hash;
  };
  BlendIndexRequest weights = r;
  weights.weights[0] = std::nextafter(weights.weights[0], 1.0); // one ulp
  EXPECT_NE(hashOf(weights), hash);
  BlendIndexRequest size = request(1001);
  EXPECT_NE(hashOf(size), hash);
  BlendIndexRequest data = r;
  data.datasets[2] = R"({"class": "GPTDataset", "dataset_path": "c", "num_samples": 7})";
  EXPECT_NE(hashOf(data), hash);
  BlendIndexRequest split = r;
  split.which = DataSplit::Test;
  EXPECT_NE(blendIndexFiles("d", *describeBlendIndex(split), split.which).prefix,
            blendIndexFiles("d", *describeBlendIndex(r), r.which).prefix);
}

TEST(BlendIndexCache, ADamagedEntryIsAnErrorNamingTheFile) {
  TempDir dir;
  BlendIndexRequest r = request();
  Expected<CachedBlendIndex> written = cachedBlendingIndex(dir.path(), r);
  ASSERT_TRUE(written.ok());
  const BlendIndexFiles files = written->files;
  const std::string datasets = contents(files.datasetIndex),
                    samples = contents(files.datasetSampleIndex),
                    description = contents(files.description);
  auto expectError = [&](const std::filesystem::path &file, const std::string &why) {
    Expected<CachedBlendIndex> read = cachedBlendingIndex(dir.path(), r);
    ASSERT_FALSE(read.ok());
    const std::string message = read.error().message();
    EXPECT_NE(message.find(file.filename().string()), std::string::npos) << message;
    EXPECT_NE(message.find(why), std::string::npos) << message;
    EXPECT_NE(message.find("delete its files '" + files.prefix.string() + "*'"),
              std::string::npos)
        << message;
  };
  auto restore = [&] {
    overwrite(files.datasetIndex, datasets);
    overwrite(files.datasetSampleIndex, samples);
    overwrite(files.description, description);
  };
  // A truncated array.
  overwrite(files.datasetSampleIndex, samples.substr(0, samples.size() - 8));
  expectError(files.datasetSampleIndex, "");
  restore();
  // A dataset out of the blend (the last element's int16 set to 3).
  {
    std::string bad = datasets;
    int16_t three = 3;
    std::memcpy(bad.data() + bad.size() - 2, &three, 2);
    overwrite(files.datasetIndex, bad);
    expectError(files.datasetIndex, "element 999 is dataset 3, outside the blend's [0, 2]");
    restore();
  }
  // A sample that is not its dataset's next.
  {
    std::string bad = samples;
    int64_t v;
    std::memcpy(&v, bad.data() + bad.size() - 8, 8);
    ++v;
    std::memcpy(bad.data() + bad.size() - 8, &v, 8);
    overwrite(files.datasetSampleIndex, bad);
    expectError(files.datasetSampleIndex, "element 999 is sample");
    restore();
  }
  // Another dtype (int64 dataset index, as numpy's default).
  {
    std::vector<int64_t> wide(written->index.dataset.begin(), written->index.dataset.end());
    const int64_t shape[] = {int64_t(wide.size())};
    ASSERT_TRUE(writeNpyFile(files.datasetIndex, NpyDType::I64, shape,
                             std::string_view(reinterpret_cast<const char *>(wide.data()),
                                              wide.size() * 8))
                    .ok());
    expectError(files.datasetIndex, "its dtype is int64, not int16");
    restore();
  }
  // An edited description, a missing array.
  overwrite(files.description, description + " ");
  expectError(files.description, "it describes other indices than this run's");
  restore();
  std::filesystem::remove(files.datasetIndex);
  expectError(files.datasetIndex, "missing, though the entry's description.txt is there");
  restore();
  // Restored, it loads again; without its description (an interrupted write) it is rebuilt.
  Expected<CachedBlendIndex> again = cachedBlendingIndex(dir.path(), r);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_TRUE(again->loaded);
  std::filesystem::remove(files.description);
  overwrite(files.datasetIndex, "junk");
  Expected<CachedBlendIndex> rebuilt = cachedBlendingIndex(dir.path(), r);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.error().message();
  EXPECT_FALSE(rebuilt->loaded);
  EXPECT_EQ(rebuilt->index.dataset, written->index.dataset);
  EXPECT_TRUE(cachedBlendingIndex(dir.path(), r)->loaded);
}

TEST(BlendIndexCache, AnOversampledBlendIsNotKept) {
  TempDir dir;
  BlendIndexRequest r = request();
  r.datasetSamples = {10, 1000, 1000}; // dataset 0 gets 200
  Expected<CachedBlendIndex> cached = cachedBlendingIndex(dir.path(), r);
  ASSERT_TRUE(cached.ok());
  EXPECT_FALSE(cached->loaded);
  EXPECT_FALSE(std::filesystem::exists(cached->files.description));
}

TEST(BlendIndexCache, ACacheDirectoryThatIsAFileIsAnError) {
  TempDir dir;
  overwrite(dir.path() / "file", "x");
  Expected<CachedBlendIndex> cached = cachedBlendingIndex(dir.path() / "file", request());
  ASSERT_FALSE(cached.ok());
  EXPECT_NE(cached.error().message().find("is a regular file, not a directory"),
            std::string::npos)
      << cached.error().message();
}

} // namespace
