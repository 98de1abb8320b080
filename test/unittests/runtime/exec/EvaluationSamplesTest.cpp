//===- EvaluationSamplesTest.cpp - What a run's evaluations read ----------===//
//
// The valid split's order size (Megatron's eval_samples, with and without --skip-train) and
// the whole-split reading of --full-validation: how many global batches a split size gives,
// the left-out remainder, and that dealing those batches' micro-batches over data-parallel
// ranks as Trainer::evaluate does reads every evaluated sample exactly once.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/EvaluationSamples.h"

#include <gtest/gtest.h>

#include <vector>

using namespace mtc::rt;

namespace {

TEST(EvaluationSamplesTest, OrderIsMegatronsEvalSamples) {
  // 20 iterations, an evaluation every 5 and one at the end: 5 x 2 batches of 16.
  Expected<int64_t> samples = validationOrderSamples(20, 5, 2, 16, false);
  ASSERT_TRUE(samples) << samples.error().message();
  EXPECT_EQ(*samples, 160);
  // 19 iterations: evaluations at 5, 10, 15 and the end.
  samples = validationOrderSamples(19, 5, 2, 16, false);
  ASSERT_TRUE(samples);
  EXPECT_EQ(*samples, 128);
  // --skip-train: one evaluation, whatever the iterations and the interval.
  samples = validationOrderSamples(20, 0, 3, 16, true);
  ASSERT_TRUE(samples) << samples.error().message();
  EXPECT_EQ(*samples, 48);
  samples = validationOrderSamples(0, 0, 1, 8, true);
  ASSERT_TRUE(samples);
  EXPECT_EQ(*samples, 8);
}

TEST(EvaluationSamplesTest, OrderRefusesTooManySamplesAndBadCounts) {
  Expected<int64_t> huge = validationOrderSamples(int64_t(1) << 30, 1, int64_t(1) << 20, 16, false);
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().message().find("more than the 281474976710656 validation samples"),
            std::string::npos)
      << huge.error().message();
  EXPECT_FALSE(validationOrderSamples(20, 5, 0, 16, false));
  EXPECT_FALSE(validationOrderSamples(20, 0, 2, 16, false));
  EXPECT_FALSE(validationOrderSamples(20, 5, 2, 0, false));
  EXPECT_FALSE(validationOrderSamples(-1, 5, 2, 16, false));
}

TEST(EvaluationSamplesTest, FullValidationReadsWholeBatches) {
  Expected<FullValidation> full = fullValidation(100, 16);
  ASSERT_TRUE(full) << full.error().message();
  EXPECT_EQ(full->splitSamples, 100);
  EXPECT_EQ(full->batches, 6);
  EXPECT_EQ(full->evaluatedSamples, 96);
  EXPECT_EQ(full->droppedSamples, 4);
  // A split of whole batches loses nothing.
  full = fullValidation(64, 16);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->batches, 4);
  EXPECT_EQ(full->droppedSamples, 0);
  // One batch exactly, and one sample short of two.
  full = fullValidation(16, 16);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->batches, 1);
  full = fullValidation(31, 16);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->batches, 1);
  EXPECT_EQ(full->droppedSamples, 15);
}

TEST(EvaluationSamplesTest, FullValidationRefusesASplitShortOfOneBatch) {
  Expected<FullValidation> full = fullValidation(15, 16);
  ASSERT_FALSE(full);
  EXPECT_NE(full.error().message().find("the valid split holds 15 samples, fewer than one "
                                        "global batch of 16"),
            std::string::npos)
      << full.error().message();
  EXPECT_FALSE(fullValidation(0, 16));
  EXPECT_FALSE(fullValidation(16, 0));
}

// The batches' micro-batches dealt as Trainer::evaluate deals them (micro-batch m of every
// batch to data-parallel rank m % dp): each evaluated sample is read once, by one rank, and
// no rank reads a left-out sample.
TEST(EvaluationSamplesTest, DataParallelRanksShareEverySampleOnce) {
  const int64_t samples = 150, microBatch = 4;
  for (int64_t microBatches : {2, 4, 8})
    for (int dp : {1, 2, 4}) {
      if (microBatches % dp != 0)
        continue;
      const int64_t globalBatch = microBatches * microBatch;
      Expected<FullValidation> full = fullValidation(samples, globalBatch);
      ASSERT_TRUE(full);
      std::vector<int> reads(size_t(samples), 0);
      std::vector<int64_t> perRank(size_t(dp), 0);
      for (int rank = 0; rank < dp; ++rank)
        for (int64_t b = 0; b < full->batches; ++b)
          for (int64_t m = rank; m < microBatches; m += dp)
            for (int64_t i = 0; i < microBatch; ++i) {
              ++reads[size_t(b * globalBatch + m * microBatch + i)];
              ++perRank[size_t(rank)];
            }
      for (int64_t k = 0; k < samples; ++k)
        EXPECT_EQ(reads[size_t(k)], k < full->evaluatedSamples ? 1 : 0)
            << "sample " << k << ", global batch " << globalBatch << ", dp " << dp;
      for (int rank = 0; rank < dp; ++rank)
        EXPECT_EQ(perRank[size_t(rank)], full->evaluatedSamples / dp);
    }
}

} // namespace
