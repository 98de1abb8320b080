//===- GradientBufferTest.cpp - A step's gradients and their reduction ----===//
//
// GradientBuffer (runtime/exec/GradientBuffer.h) over a plan of four parameters, two of them
// reduce-scattered by the distributed optimizer (dp2; one along its outermost dim, one along
// a middle dim) and two all-reduced: the layout (all-reduced first, then reduce-scattered,
// each in table order), the accumulation of scratch gradients, the reduction on 2 thread-ranks
// with and without the scratch buffer (the optimizer's gradients are the rank's blocks of the
// sums), a single rank, and the error of a missing data-parallel group; under ZeRO-2 the
// buffers' sizes, two micro-batches reduce-scattered one at a time into the shard
// accumulator, and a pipeline stage's chunk parts (runs of rows) reduce-scattered each on
// its own. The values are small integers, so every order of summation is exact.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/GradientBuffer.h"

#include "../comm/CommTestUtil.h"

#include <gtest/gtest.h>

namespace mtc::rt::test {
namespace {

/// a [rows=4, cols=3] (optimizer: rows over dp), b [cols=3], c [rows=3, four=4] (optimizer:
/// four over dp), d [four=4]; with `dpAxis` false no data-parallel axis (nothing sharded).
Plan gradientPlan(bool dpAxis) {
  Plan plan;
  plan.dir = "grads.plan";
  if (dpAxis) {
    plan.mesh = {MeshAxis{"dp", 2}};
    plan.dataParallelAxis = 0;
  }
  auto param = [&](const char *name, std::vector<Dim> dims, std::optional<size_t> shardDim) {
    ParamInfo p;
    p.name = name;
    p.dims = std::move(dims);
    if (dpAxis && shardDim)
      p.optimizerLayout = ParamLayout{{DimSplit{*shardDim, {0}}}};
    return p;
  };
  plan.params = {param("a", {{"rows", 4}, {"cols", 3}}, 0), param("b", {{"cols", 3}}, {}),
                 param("c", {{"rows", 3}, {"four", 4}}, 1), param("d", {{"four", 4}}, {})};
  return plan;
}

TrainingState stateOf(const Plan &plan) {
  TrainingState s;
  for (const ParamInfo &p : plan.params)
    s.params.push_back({p.name, p.shape(), std::vector<float>(size_t(p.numElements()), 1.0f)});
  return s;
}

GradientBuffer create(const Plan &plan, int64_t dp, bool withScratch) {
  Expected<GradientBuffer> g = GradientBuffer::create(plan, stateOf(plan), dp, withScratch);
  EXPECT_TRUE(g.ok()) << g.error().message();
  return std::move(*g);
}

/// Rank r's gradient of parameter p at element i.
float value(int rank, size_t p, size_t i) {
  return static_cast<float>((int(i) * 5 + rank * 11 + int(p) * 3) % 17 - 8);
}

/// Element (row, col) of the sum over 2 ranks of a [rows x cols] gradient p.
float sum2(size_t p, size_t row, size_t col, size_t cols) {
  return value(0, p, row * cols + col) + value(1, p, row * cols + col);
}

TEST(GradientBufferTest, AllReducedFirstThenReduceScattered) {
  Plan plan = gradientPlan(true);
  GradientBuffer g = create(plan, 2, true);
  // b (3) and d (4) first, then a (12) and c (12).
  float *base = g.grad(1);
  EXPECT_EQ(g.grad(3) - base, 3);
  EXPECT_EQ(g.grad(0) - base, 7);
  EXPECT_EQ(g.grad(2) - base, 19);
  EXPECT_EQ(g.scratch(2) - g.scratch(1), 19);
  EXPECT_EQ(g.bytes(), int64_t(2 * 31 * sizeof(float)));
  // Without the scratch buffer the packed blocks of the reduce-scatter have their own.
  EXPECT_EQ(create(plan, 2, false).bytes(), int64_t((31 + 24) * sizeof(float)));
  // Without a data-parallel axis: table order, nothing packed.
  GradientBuffer plain = create(gradientPlan(false), 1, false);
  EXPECT_EQ(plain.grad(1) - plain.grad(0), 12);
  EXPECT_EQ(plain.grad(3) - plain.grad(0), 27);
  EXPECT_EQ(plain.bytes(), int64_t(31 * sizeof(float)));
  EXPECT_EQ(plain.optimizerGrad(2), plain.grad(2));
}

TEST(GradientBufferTest, AccumulatesTheScratchGradients) {
  Plan plan = gradientPlan(true);
  GradientBuffer g = create(plan, 2, true);
  const int64_t sizes[] = {12, 3, 12, 4};
  for (size_t p = 0; p < 4; ++p)
    for (int64_t i = 0; i < sizes[p]; ++i)
      g.scratch(p)[i] = float(10 * p + size_t(i));
  g.accumulate(2, 3, 4); // c's elements 3..6
  for (size_t p = 0; p < 4; ++p)
    for (int64_t i = 0; i < sizes[p]; ++i) {
      bool added = p == 2 && i >= 3 && i < 7;
      ASSERT_EQ(g.grad(p)[i], added ? float(20 + i) : 0.0f) << "param " << p << " element " << i;
    }
  g.accumulateAll();
  g.accumulateAll();
  for (size_t p = 0; p < 4; ++p)
    for (int64_t i = 0; i < sizes[p]; ++i) {
      bool added = p == 2 && i >= 3 && i < 7;
      ASSERT_EQ(g.grad(p)[i], float(10 * p + size_t(i)) * (added ? 3 : 2))
          << "param " << p << " element " << i;
    }
  g.clear();
  for (size_t p = 0; p < 4; ++p)
    for (int64_t i = 0; i < sizes[p]; ++i)
      ASSERT_EQ(g.grad(p)[i], 0.0f);
  EXPECT_EQ(g.scratch(3)[1], 31.0f) << "clear leaves the scratch gradients";
}

/// Each of 2 ranks fills its gradients and reduces; checks the sums and the rank's shards.
void checkReduce(bool withScratch) {
  Plan plan = gradientPlan(true);
  TestJob job;
  std::vector<std::vector<float>> b(2), d(2), a(2), c(2);
  std::vector<std::ptrdiff_t> aAt(2), cAt(2);
  std::vector<char> same(2); // not vector<bool>: the ranks write their entries concurrently
  runRanks(2, [&](int rank) {
    auto dp = job.connect(rank, 2, concat("grads", withScratch));
    ASSERT_TRUE(dp);
    GradientBuffer g = create(plan, 2, withScratch);
    const int64_t sizes[] = {12, 3, 12, 4};
    for (size_t p = 0; p < 4; ++p)
      for (int64_t i = 0; i < sizes[p]; ++i)
        g.grad(p)[i] = value(rank, p, size_t(i));
    Error err = g.reduce(dp.get(), 0);
    ASSERT_TRUE(err.ok()) << err.message();
    b[rank].assign(g.optimizerGrad(1), g.optimizerGrad(1) + 3);
    d[rank].assign(g.optimizerGrad(3), g.optimizerGrad(3) + 4);
    a[rank].assign(g.optimizerGrad(0), g.optimizerGrad(0) + 6);
    c[rank].assign(g.optimizerGrad(2), g.optimizerGrad(2) + 6);
    same[rank] = g.optimizerGrad(1) == g.grad(1) && g.optimizerGrad(3) == g.grad(3);
    // The shards: at the start of the reduce-scattered group, in table order.
    aAt[rank] = g.optimizerGrad(0) - g.grad(1);
    cAt[rank] = g.optimizerGrad(2) - g.grad(1);
  });
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(concat("rank ", r));
    EXPECT_TRUE(same[r]) << "an all-reduced gradient is where it was accumulated";
    EXPECT_EQ(aAt[r], 7);
    EXPECT_EQ(cAt[r], 13);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(b[r][i], value(0, 1, i) + value(1, 1, i)) << "b " << i;
    for (size_t i = 0; i < 4; ++i)
      EXPECT_EQ(d[r][i], value(0, 3, i) + value(1, 3, i)) << "d " << i;
    // a [4, 3] by rows: rank r holds rows 2r, 2r + 1.
    std::vector<float> aShard, cShard;
    for (size_t row = 2 * size_t(r); row < 2 * size_t(r) + 2; ++row)
      for (size_t col = 0; col < 3; ++col)
        aShard.push_back(sum2(0, row, col, 3));
    // c [3, 4] by its second dim: rank r holds columns 2r, 2r + 1 of every row.
    for (size_t row = 0; row < 3; ++row)
      for (size_t col = 2 * size_t(r); col < 2 * size_t(r) + 2; ++col)
        cShard.push_back(sum2(2, row, col, 4));
    EXPECT_EQ(a[r], aShard);
    EXPECT_EQ(c[r], cShard);
  }
}

TEST(GradientBufferTest, ReducesOverTwoRanksWithScratch) { checkReduce(true); }

TEST(GradientBufferTest, ReducesOverTwoRanksWithoutScratch) { checkReduce(false); }

TEST(GradientBufferTest, ZeroTwoKeepsOnlyShards) {
  Plan plan = gradientPlan(true);
  plan.zeroStage = 2;
  // One micro-batch's 31 gradients, the scratch of the 7 all-reduced ones, the 12 elements of
  // the shards and the staging of the largest sharded gradient (12).
  EXPECT_EQ(create(plan, 2, true).bytes(), int64_t((31 + 7 + 12 + 12) * sizeof(float)));
  EXPECT_EQ(create(plan, 2, false).bytes(), int64_t((31 + 12 + 12) * sizeof(float)));

  // Two micro-batches per rank: the sums are over both ranks and both micro-batches.
  TestJob job;
  std::vector<std::vector<float>> a(2), b(2), c(2);
  std::vector<std::string> errors(2);
  const int64_t sizes[] = {12, 3, 12, 4};
  auto micro = [&](int rank, int m, size_t p, size_t i) {
    return value(rank + 2 * m, p, i); // micro-batch m of rank r: another "rank"'s values
  };
  runRanks(2, [&](int rank) {
    auto dp = job.connect(rank, 2, "zero2");
    ASSERT_TRUE(dp);
    GradientBuffer g = create(plan, 2, true);
    Error err = Error::success();
    for (int m = 0; m < 2 && err.ok(); ++m) {
      for (size_t p = 0; p < 4; ++p)
        for (int64_t i = 0; i < sizes[p]; ++i)
          g.microBatchGrad(p, m == 0)[i] = micro(rank, m, p, size_t(i));
      err = g.addMicroBatch(dp.get(), m == 0, 0);
    }
    if (err.ok())
      err = g.reduce(dp.get(), 0);
    errors[rank] = err.message();
    EXPECT_EQ(g.microBatchGrad(0, false), g.grad(0)) << "a sharded gradient is never scratch";
    EXPECT_EQ(g.microBatchGrad(1, false), g.scratch(1));
    a[rank].assign(g.optimizerGrad(0), g.optimizerGrad(0) + 6);
    b[rank].assign(g.optimizerGrad(1), g.optimizerGrad(1) + 3);
    c[rank].assign(g.optimizerGrad(2), g.optimizerGrad(2) + 6);
  });
  auto total = [&](size_t p, size_t i) {
    float sum = 0;
    for (int r = 0; r < 2; ++r)
      for (int m = 0; m < 2; ++m)
        sum += micro(r, m, p, i);
    return sum;
  };
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(concat("rank ", r));
    EXPECT_EQ(errors[r], "");
    std::vector<float> aShard, bSum, cShard;
    for (size_t i = 6 * size_t(r); i < 6 * size_t(r) + 6; ++i) // a [4, 3] by rows
      aShard.push_back(total(0, i));
    for (size_t i = 0; i < 3; ++i)
      bSum.push_back(total(1, i));
    for (size_t row = 0; row < 3; ++row) // c [3, 4] by its second dim
      for (size_t col = 2 * size_t(r); col < 2 * size_t(r) + 2; ++col)
        cShard.push_back(total(2, row * 4 + col));
    EXPECT_EQ(a[r], aShard);
    EXPECT_EQ(b[r], bSum);
    EXPECT_EQ(c[r], cShard);
  }

  GradientBuffer lonely = create(plan, 2, false);
  EXPECT_EQ(lonely.addMicroBatch(nullptr, true, 2).message(),
            "step 3: reduce-scatter of the gradient of 'a' over the data-parallel ranks: internal "
            "error: the data-parallel group has 1 ranks, but the gradients are sharded 2 ways");
}

TEST(GradientBufferTest, ZeroTwoTakesChunkParts) {
  // A pipeline stage's chunk calls write runs of whole rows: c [3, 4] (sharded along its
  // second dim) as rows 0-1 and then row 2, each reduce-scattered on its own into the rows'
  // part of the shard; b (all-reduced) accumulates; a (sharded along its rows) only whole.
  Plan plan = gradientPlan(true);
  plan.zeroStage = 2;
  TestJob job;
  std::vector<std::vector<float>> b(2), c(2);
  std::vector<std::string> errors(2);
  runRanks(2, [&](int rank) {
    auto dp = job.connect(rank, 2, "zero2-parts");
    ASSERT_TRUE(dp);
    GradientBuffer g = create(plan, 2, true);
    Error err = Error::success();
    for (auto [begin, count] : {std::pair<size_t, size_t>{0, 8}, {8, 4}}) {
      for (size_t i = begin; i < begin + count; ++i)
        g.microBatchGrad(2, false)[i] = value(rank, 2, i);
      if (err.ok())
        err = g.addPart(dp.get(), 2, begin, count, 0);
    }
    for (int m = 0; m < 2; ++m) {
      for (size_t i = 0; i < 3; ++i)
        g.microBatchGrad(1, false)[i] = value(rank + 2 * m, 1, i);
      if (err.ok())
        err = g.addPart(dp.get(), 1, 0, 3, 0);
    }
    if (err.ok())
      err = g.reduce(dp.get(), 0);
    errors[rank] = err.message();
    std::span<float> shard = g.accumulated(2);
    c[rank].assign(shard.begin(), shard.end());
    EXPECT_EQ(shard.data(), g.optimizerGrad(2));
    EXPECT_EQ(g.accumulated(1).size(), 3u);
    b[rank].assign(g.optimizerGrad(1), g.optimizerGrad(1) + 3);
  });
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(concat("rank ", r));
    EXPECT_EQ(errors[r], "");
    std::vector<float> cShard, bSum;
    for (size_t row = 0; row < 3; ++row)
      for (size_t col = 2 * size_t(r); col < 2 * size_t(r) + 2; ++col)
        cShard.push_back(sum2(2, row, col, 4));
    for (size_t i = 0; i < 3; ++i)
      bSum.push_back(value(0, 1, i) + value(1, 1, i) + value(2, 1, i) + value(3, 1, i));
    EXPECT_EQ(c[r], cShard);
    EXPECT_EQ(b[r], bSum);
  }

  // Runs the shards cannot take on their own are internal errors, before any collective.
  GradientBuffer g = create(plan, 2, true);
  EXPECT_EQ(g.addPart(nullptr, 0, 0, 6, 1).message(),
            "step 2: internal error: elements [0, 6) of the gradient of 'a' cannot be "
            "reduce-scattered on their own (its shards split dimension 0 of 4 rows of 3 "
            "elements)");
  EXPECT_EQ(g.addPart(nullptr, 2, 2, 4, 1).message(),
            "step 2: internal error: elements [2, 6) of the gradient of 'c' cannot be "
            "reduce-scattered on their own (its shards split dimension 1 of 3 rows of 4 "
            "elements)");
}

TEST(GradientBufferTest, OneRankAndAMissingGroup) {
  // A data-parallel axis of size 1: the "shard" is the whole gradient, nothing is summed.
  Plan plan = gradientPlan(true);
  plan.mesh[0].size = 1;
  GradientBuffer one = create(plan, 1, false);
  for (int64_t i = 0; i < 12; ++i)
    one.grad(0)[i] = float(i);
  one.grad(1)[2] = 5.0f;
  Error err = one.reduce(nullptr, 0);
  ASSERT_TRUE(err.ok()) << err.message();
  EXPECT_EQ(one.optimizerGrad(1)[2], 5.0f);
  for (int64_t i = 0; i < 12; ++i)
    ASSERT_EQ(one.optimizerGrad(0)[i], float(i));

  GradientBuffer two = create(gradientPlan(true), 2, true);
  EXPECT_EQ(two.reduce(nullptr, 4).message(),
            "step 5: reduce-scatter of the gradients over the data-parallel ranks: internal "
            "error: the data-parallel group has 1 ranks, but the gradients are sharded 2 ways");
}

} // namespace
} // namespace mtc::rt::test
