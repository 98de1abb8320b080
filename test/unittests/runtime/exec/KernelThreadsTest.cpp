//===- KernelThreadsTest.cpp - How many threads a rank's kernels run on ---===//

#include "runtime/exec/KernelThreads.h"
#include "runtime/exec/Gemm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <map>
#include <vector>

using namespace mtc::rt;

namespace {

EnvironmentLookup environment(std::map<std::string, std::string> variables) {
  return [variables](const std::string &name) -> std::optional<std::string> {
    auto it = variables.find(name);
    if (it == variables.end())
      return std::nullopt;
    return it->second;
  };
}

TEST(KernelThreadsTest, DefaultSharesTheCoresAmongTheNodesRanks) {
  Expected<int> threads = defaultThreadsPerRank(environment({}), 16, 4);
  ASSERT_TRUE(threads) << threads.error().message();
  EXPECT_EQ(*threads, 4);
  threads = defaultThreadsPerRank(environment({}), 16, 3);
  ASSERT_TRUE(threads);
  EXPECT_EQ(*threads, 5);
  // More ranks than cores, or an unknown number of ranks: at least one thread.
  threads = defaultThreadsPerRank(environment({}), 2, 8);
  ASSERT_TRUE(threads);
  EXPECT_EQ(*threads, 1);
  threads = defaultThreadsPerRank(environment({}), 6, 0);
  ASSERT_TRUE(threads);
  EXPECT_EQ(*threads, 6);
}

TEST(KernelThreadsTest, OmpNumThreadsDecidesWhenSet) {
  Expected<int> threads = defaultThreadsPerRank(environment({{"OMP_NUM_THREADS", "3"}}), 16, 4);
  ASSERT_TRUE(threads) << threads.error().message();
  EXPECT_EQ(*threads, 3);
}

TEST(KernelThreadsTest, MalformedOmpNumThreadsIsAnError) {
  for (const char *value : {"", "0", "-2", "two", "4,2", "100000"}) {
    Expected<int> threads =
        defaultThreadsPerRank(environment({{"OMP_NUM_THREADS", value}}), 16, 1);
    ASSERT_FALSE(threads) << value;
    EXPECT_NE(threads.error().message().find("OMP_NUM_THREADS"), std::string::npos);
    EXPECT_NE(threads.error().message().find(std::string("'") + value + "'"), std::string::npos);
  }
}

TEST(KernelThreadsTest, AvailableCoresIsPositive) { EXPECT_GE(availableCores(), 1); }

TEST(KernelThreadsTest, SetsTheOpenMPTeamSizeWithIdleThreadsAsleep) {
  setKernelThreads(3);
  EXPECT_EQ(omp_get_max_threads(), 3);
  EXPECT_EQ(kmp_get_blocktime(), 0);
  setKernelThreads(1);
  EXPECT_EQ(omp_get_max_threads(), 1);
}

/// A GEMM large enough for OpenBLAS to split among threads computes the same bits on one
/// thread and on four.
TEST(KernelThreadsTest, GemmResultDoesNotDependOnThreads) {
  constexpr int64_t n = 256;
  std::vector<float> a(n * n), b(n * n);
  for (int64_t i = 0; i < n * n; ++i) {
    a[i] = static_cast<float>((i * 7 + 3) % 23) / 8.0f - 1.0f;
    b[i] = static_cast<float>((i * 5 + 1) % 19) / 7.0f - 1.3f;
  }
  auto product = [&](int threads) {
    setKernelThreads(threads);
    std::vector<float> c(n * n, 0.5f);
    MemRef3F32 views[] = {{a.data(), a.data(), 0, {1, n, n}, {n * n, n, 1}},
                          {b.data(), b.data(), 0, {1, n, n}, {n * n, n, 1}},
                          {c.data(), c.data(), 0, {1, n, n}, {n * n, n, 1}}};
    _mlir_ciface_mtc_batch_matmul_f32(nullptr, &views[0], &views[1], &views[2]);
    return c;
  };
  std::vector<float> one = product(1);
  std::vector<float> four = product(4);
  setKernelThreads(1);
  EXPECT_EQ(one, four);
}

} // namespace
