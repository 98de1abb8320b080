//===- CommunicationPredictionTest.cpp - Bytes a rank should send per step ===//
//
// predictedCommunicationBytes on in-memory plans: the compiler's per-call figures scaled by
// the micro-batches a rank runs, the ring all-reduce of replicated gradients and the loss,
// tensor-parallel shards, and the distributed optimizer's reduce-scatter.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/CommunicationPrediction.h"

#include "test/unittests/runtime/exec/ExecTestPlan.h"

#include <gtest/gtest.h>

namespace mtc::rt::test {
namespace {

// smallPlan: w [rows=3, cols=4] and b [cols=4], 16 f32 values in all (64 bytes).
constexpr double kLossBytes = sizeof(double);

TEST(CommunicationPredictionTest, OneRankWithoutCompilerFiguresSendsNothing) {
  EXPECT_EQ(predictedCommunicationBytes(smallPlan(), 4, 1), 0.0);
}

TEST(CommunicationPredictionTest, CompilerFiguresCountPerMicroBatchOfThisRank) {
  Plan plan = smallPlan();
  plan.predictions.communicationBytes = Predictions::CommunicationBytes{1000, 10};
  EXPECT_EQ(predictedCommunicationBytes(plan, 4, 1), 4 * 1000.0 + 10);
  // Two data-parallel ranks run two micro-batches each and all-reduce the 64 gradient bytes
  // and the loss in a ring: 2 (dp - 1) / dp of them.
  EXPECT_EQ(predictedCommunicationBytes(plan, 4, 2), 2 * 1000.0 + 10 + (64 + kLossBytes));
}

TEST(CommunicationPredictionTest, RingAllReduceGrowsTowardTwiceTheGradients) {
  Plan plan = smallPlan();
  EXPECT_EQ(predictedCommunicationBytes(plan, 8, 2), 1.0 * (64 + kLossBytes));
  EXPECT_EQ(predictedCommunicationBytes(plan, 8, 4), 1.5 * (64 + kLossBytes));
  EXPECT_EQ(predictedCommunicationBytes(plan, 8, 8), 1.75 * (64 + kLossBytes));
}

TEST(CommunicationPredictionTest, TensorParallelGradientsAreTheRankShards) {
  Plan plan = smallPlan("tp", 4); // w [rows=4, cols=4]
  plan.mesh = {MeshAxis{"tp", 2}};
  plan.params[0].layout.splits = {DimSplit{0, {0}}};
  // w's shard is [2, 4] (32 bytes), b is whole (16 bytes).
  EXPECT_EQ(predictedCommunicationBytes(plan, 2, 2), 32 + 16 + kLossBytes);
}

TEST(CommunicationPredictionTest, DistributedOptimizerReduceScattersItsGradients) {
  Plan plan = smallPlan("zero", 4); // w [rows=4, cols=4] (64 bytes), b [4] (16 bytes)
  plan.mesh = {MeshAxis{"dp", 2}};
  plan.dataParallelAxis = 0;
  plan.params[0].optimizerLayout = ParamLayout{{DimSplit{0, {0}}}};
  // w is reduce-scattered ((dp - 1) / dp of 64 bytes); b and the loss are all-reduced.
  EXPECT_EQ(predictedCommunicationBytes(plan, 2, 2), 0.5 * 64 + (16 + kLossBytes));
}

} // namespace
} // namespace mtc::rt::test
