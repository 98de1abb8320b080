//===- CollectiveBenchmarkTest.cpp - Gloo's all-reduce with a forked peer -===//

#include "runtime/comm/CollectiveBenchmark.h"

#include <gtest/gtest.h>

namespace mtc::rt {
namespace {

TEST(CollectiveBenchmarkTest, TimesEverySize) {
  Expected<std::vector<CollectiveSample>> samples = benchmarkLoopbackAllReduce({8, 4096}, 3);
  ASSERT_TRUE(samples) << samples.error().message();
  ASSERT_EQ(samples->size(), 2u);
  EXPECT_EQ((*samples)[0].bytes, 8u);
  EXPECT_EQ((*samples)[1].bytes, 4096u);
  for (const CollectiveSample &s : *samples) {
    EXPECT_GT(s.seconds, 0);
    EXPECT_LT(s.seconds, 10);
    EXPECT_GT(s.meanSeconds, 0);
    EXPECT_LT(s.meanSeconds, 10);
  }
}

TEST(CollectiveBenchmarkTest, RefusesNoIterations) {
  Expected<std::vector<CollectiveSample>> samples = benchmarkLoopbackAllReduce({8}, 0);
  ASSERT_FALSE(samples);
  EXPECT_EQ(samples.error().message(), "at least one iteration");
}

} // namespace
} // namespace mtc::rt
