//===- GradientShardingTest.cpp - The distributed optimizer's reduce-scatter ---===//
//
// reduceScatterGradients (runtime/exec/GradientSharding.h) on 2 and 4 thread-ranks: every rank
// ends with its data-parallel block of the sum of all ranks' gradients, along a middle
// dimension (not contiguous in memory) and the outermost one together in one call, equal to
// a serial computation; and reduceScatterGradientInPlace (ZeRO-2), one gradient at a time
// through a staging buffer, the shard landing in that buffer. The values are small integers,
// so every order of summation is exact.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/GradientSharding.h"

#include "../comm/CommTestUtil.h"

#include <gtest/gtest.h>

namespace mtc::rt::test {
namespace {

/// Rank r's gradient value at flat index i of tensor t (small integers).
float value(int rank, size_t tensor, int64_t i) {
  return static_cast<float>((i * 7 + rank * 13 + int64_t(tensor) * 5) % 23 - 11);
}

/// Serially: block c (dim `dim`, n ways) of the sum over `ranks` ranks of tensor `tensor`.
std::vector<float> expectedShard(const std::vector<int64_t> &shape, size_t dim, int64_t n,
                                 int64_t c, size_t tensor, int ranks) {
  int64_t elements = 1;
  for (int64_t s : shape)
    elements *= s;
  std::vector<float> out;
  for (int64_t i = 0; i < elements; ++i) { // row-major: the block's elements in order
    int64_t index = i, coordinate = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      if (d == dim)
        coordinate = index % shape[d];
      index /= shape[d];
    }
    int64_t block = shape[dim] / n;
    if (coordinate < c * block || coordinate >= (c + 1) * block)
      continue;
    float sum = 0;
    for (int r = 0; r < ranks; ++r)
      sum += value(r, tensor, i);
    out.push_back(sum);
  }
  return out;
}

void checkReduceScatter(int n) {
  // Two gradients in one buffer (after an unrelated 3 elements): [2, 8, 3] along its middle
  // dim, then [4, 5] along its outermost.
  std::vector<GradientShardSpec> specs = {
      {"mid", {2, 8, 3}, 1, 3, 0, size_t(48 / n)},
      {"outer", {4, 5}, 0, 51, size_t(48 / n), size_t(20 / n)},
  };
  size_t total = totalShardElements(specs);
  ASSERT_EQ(total, size_t(68 / n));
  TestJob job;
  std::vector<std::vector<float>> shards(n);
  std::vector<std::string> errors(n);
  runRanks(n, [&](int rank) {
    std::unique_ptr<GlooCommunicator> dp = job.connect(rank, n, concat("rs", n));
    ASSERT_TRUE(dp);
    std::vector<float> grads(71, -100.0f);
    for (size_t t = 0; t < specs.size(); ++t)
      for (int64_t i = 0; i < int64_t(specs[t].shardElements) * n; ++i)
        grads[specs[t].gradOffset + size_t(i)] = value(rank, t, i);
    std::vector<float> packed(total * size_t(n)), out(total, -1.0f);
    Error err = reduceScatterGradients(dp.get(), n, specs, grads.data(), packed.data(), out.data());
    errors[rank] = err.message();
    shards[rank] = out;
    // One reduce-scatter call; each rank sends (n - 1) / n of the packed gradients.
    EXPECT_EQ(dp->counters().totalBytesSent(), uint64_t(n - 1) * total * sizeof(float));
  });
  for (int c = 0; c < n; ++c) {
    EXPECT_EQ(errors[c], "") << "rank " << c;
    std::vector<float> expected = expectedShard({2, 8, 3}, 1, n, c, 0, n);
    std::vector<float> outer = expectedShard({4, 5}, 0, n, c, 1, n);
    expected.insert(expected.end(), outer.begin(), outer.end());
    EXPECT_EQ(shards[c], expected) << "rank " << c;
  }
}

TEST(GradientShardingTest, ReduceScatterAlongAMiddleDimTwoRanks) { checkReduceScatter(2); }

TEST(GradientShardingTest, ReduceScatterAlongAMiddleDimFourRanks) { checkReduceScatter(4); }

void checkInPlace(int n) {
  // [2, 8, 3] along its middle dim, at an offset in its buffer.
  GradientShardSpec spec{"mid", {2, 8, 3}, 1, 0, 0, size_t(48 / n)};
  TestJob job;
  std::vector<std::vector<float>> shards(n);
  std::vector<std::string> errors(n);
  runRanks(n, [&](int rank) {
    std::unique_ptr<GlooCommunicator> dp = job.connect(rank, n, concat("inplace", n));
    ASSERT_TRUE(dp);
    std::vector<float> buffer(5 + 48, -100.0f), staging(48, -1.0f);
    for (int64_t i = 0; i < 48; ++i)
      buffer[5 + size_t(i)] = value(rank, 0, i);
    Error err = reduceScatterGradientInPlace(dp.get(), n, spec, buffer.data() + 5,
                                             staging.data(), staging.data());
    errors[rank] = err.message();
    shards[rank].assign(staging.begin(), staging.begin() + 48 / n);
    EXPECT_EQ(buffer[4], -100.0f) << "only the gradient is rearranged";
    EXPECT_EQ(dp->counters().totalBytesSent(), uint64_t(n - 1) * size_t(48 / n) * sizeof(float));
  });
  for (int c = 0; c < n; ++c) {
    EXPECT_EQ(errors[c], "") << "rank " << c;
    EXPECT_EQ(shards[c], expectedShard({2, 8, 3}, 1, n, c, 0, n)) << "rank " << c;
  }
}

TEST(GradientShardingTest, InPlaceReduceScatterTwoRanks) { checkInPlace(2); }

TEST(GradientShardingTest, InPlaceReduceScatterFourRanks) { checkInPlace(4); }

TEST(GradientShardingTest, OneRankKeepsTheWholeGradient) {
  std::vector<GradientShardSpec> specs = {{"g", {2, 4}, 1, 0, 0, 8}};
  std::vector<float> grads(8), packed(8), out(8);
  for (int i = 0; i < 8; ++i)
    grads[size_t(i)] = float(i);
  Error err = reduceScatterGradients(nullptr, 1, specs, grads.data(), packed.data(), out.data());
  ASSERT_TRUE(err.ok()) << err.message();
  EXPECT_EQ(out, grads);
  Error bad = reduceScatterGradients(nullptr, 2, specs, grads.data(), packed.data(), out.data());
  EXPECT_EQ(bad.message(),
            "internal error: the data-parallel group has 1 ranks, but the gradients are sharded 2 "
            "ways");
  std::vector<float> shard(8);
  ASSERT_TRUE(
      reduceScatterGradientInPlace(nullptr, 1, specs[0], grads.data(), packed.data(), shard.data())
          .ok());
  EXPECT_EQ(shard, grads);
  EXPECT_EQ(
      reduceScatterGradientInPlace(nullptr, 2, specs[0], grads.data(), packed.data(), shard.data())
          .message(),
      bad.message());
}

} // namespace
} // namespace mtc::rt::test
