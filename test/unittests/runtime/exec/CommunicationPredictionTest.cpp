//===- CommunicationPredictionTest.cpp - Bytes a rank should send per step ===//
//
// predictedCommunicationBytes on in-memory plans: the compiler's per-call figures scaled by
// the micro-batches a rank runs, the ring all-reduce of replicated gradients and the loss,
// tensor-parallel shards, and the distributed optimizer's reduce-scatter.
// predictedStageCommunicationBytes on a two-stage pipeline: the chunk functions' figures per
// task, the messages, the tied embedding's sum over its stages, the stage's data-parallel
// reduction, the optimizer step and an MoE model's tokens per expert.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/CommunicationPrediction.h"

#include "runtime/exec/PipelineStage.h"
#include "test/unittests/runtime/exec/ExecTestPlan.h"
#include "test/unittests/runtime/exec/ToyPipelinePlan.h"

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
  plan.predictions.communicationBytes = Predictions::CommunicationBytes{1000, 10, {}};
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

// The toy pipeline (ToyPipelinePlan.h) with the compiler's figures, chunk 0 handing chunk 1
// activations of [batch=2, hidden=4] (32 bytes), the tied `wte` [6, 4] (96 bytes) on both
// stages, and GPipe's task lists for 2 micro-batches.
Plan pipelinePlan() {
  Plan plan = toyPipelinePlan({});
  plan.x86Kernels->chunks[0].forward->outputs.push_back(KernelBuffer{
      BufferKind::Activation, "activation", PlanDType::F32, {{"batch", 2}, {"hidden", 4}}});
  plan.pipeline->sharedParams = {{"wte", {0, 1}}};
  plan.predictions.communicationBytes = Predictions::CommunicationBytes{
      0, 0,
      {{"chunk0.forward", 100}, {"chunk0.backward", 200}, {"chunk1.forward", 1000},
       {"chunk1.backward", 2000}, {"stage0.grad_squares", 3}, {"stage0.optimizer_step", 7},
       {"stage1.grad_squares", 30}, {"stage1.optimizer_step", 70}}};
  auto task = [](TaskOp op, int32_t chunk, int32_t microBatch, int32_t peer = -1) {
    return ScheduleTask{op, chunk, microBatch, peer};
  };
  PipelineSchedule gpipe;
  gpipe.microBatches = 2;
  gpipe.stages.resize(2);
  for (int32_t i : {0, 1}) {
    gpipe.stages[0].tasks.push_back(task(TaskOp::Forward, 0, i));
    gpipe.stages[0].tasks.push_back(task(TaskOp::SendActivation, 0, i, 1));
    gpipe.stages[1].tasks.push_back(task(TaskOp::RecvActivation, 1, i, 0));
    gpipe.stages[1].tasks.push_back(task(TaskOp::Forward, 1, i));
  }
  for (int32_t i : {0, 1}) {
    gpipe.stages[1].tasks.push_back(task(TaskOp::Backward, 1, i));
    gpipe.stages[1].tasks.push_back(task(TaskOp::SendGradient, 1, i, 0));
    gpipe.stages[0].tasks.push_back(task(TaskOp::RecvGradient, 0, i, 1));
    gpipe.stages[0].tasks.push_back(task(TaskOp::Backward, 0, i));
  }
  for (StageTasks *stage : {&gpipe.stages[0], &gpipe.stages[1]}) {
    stage->tasks.push_back(task(TaskOp::ReduceGradients, 0, 0));
    stage->tasks.push_back(task(TaskOp::OptimizerStep, 0, 0));
  }
  plan.pipeline->schedules = {gpipe};
  return plan;
}

double stageBytes(const Plan &plan, int64_t stage, int64_t dataParallelSize) {
  Expected<StageHoldings> holdings = stageHoldings(plan, stage);
  EXPECT_TRUE(holdings) << holdings.error().message();
  std::optional<double> bytes = predictedStageCommunicationBytes(
      plan, stagePlan(plan, *holdings), plan.pipeline->schedules[0], stage, dataParallelSize);
  EXPECT_TRUE(bytes.has_value());
  return bytes.value_or(-1);
}

// The pipeline group's all-reduce of the squared norm and the loss: 2 f64 over 2 stages.
constexpr double kNormAndLossBytes = 16;
constexpr double kWteBytes = 6 * 4 * 4;

TEST(CommunicationPredictionTest, StageSendsItsChunksCollectivesMessagesAndSharedGradients) {
  Plan plan = pipelinePlan();
  // Stage 0: two forwards and backwards of chunk 0, two activations of 32 bytes, wte's
  // all-reduce over the two stages holding it (2 (2 - 1) / 2 of its bytes), its optimizer.
  EXPECT_EQ(stageBytes(plan, 0, 1),
            2 * 100 + 2 * 200 + 2 * 32 + kWteBytes + 3 + 7 + kNormAndLossBytes);
  // Stage 1 sends the activations' gradients (the size of chunk 0's activations).
  EXPECT_EQ(stageBytes(plan, 1, 1),
            2 * 1000 + 2 * 2000 + 2 * 32 + kWteBytes + 30 + 70 + kNormAndLossBytes);
}

TEST(CommunicationPredictionTest, StageReducesItsOwnGradientsOverDataParallelRanks) {
  Plan plan = pipelinePlan();
  // Stage 0 holds wte [6, 4], block.w [1, 4, 6] and block.b [1, 3]: 204 gradient bytes, with
  // the loss all-reduced over 2 data-parallel ranks (2 (2 - 1) / 2 of them).
  double stage0 = 2 * 100 + 2 * 200 + 2 * 32 + kWteBytes + 3 + 7 + kNormAndLossBytes;
  EXPECT_EQ(stageBytes(plan, 0, 2), stage0 + (96 + 96 + 12 + kLossBytes));
  EXPECT_EQ(stageBytes(plan, 0, 4), stage0 + 1.5 * (96 + 96 + 12 + kLossBytes));
}

TEST(CommunicationPredictionTest, StageSharesItsTokensPerExpert) {
  Plan plan = pipelinePlan();
  for (ChunkKernels &chunk : plan.x86Kernels->chunks)
    chunk.forward->outputs.push_back(KernelBuffer{BufferKind::ExpertLoad, "expert_load",
                                                  PlanDType::I64,
                                                  {{"layers", 1}, {"experts", 8}}});
  // Every layer's 8 counts (2 layers) beside the norm and the loss over the 2 stages, as f64.
  double stage0 = 2 * 100 + 2 * 200 + 2 * 32 + kWteBytes + 3 + 7 + kNormAndLossBytes + 2 * 8 * 8;
  EXPECT_EQ(stageBytes(plan, 0, 1), stage0);
  // Over 2 data-parallel ranks, the stage's layer (8 counts) beside the loss.
  EXPECT_EQ(stageBytes(plan, 0, 2), stage0 + (96 + 96 + 12 + kLossBytes) + 8 * 8);
  // Chunks that disagree on their counts: no prediction.
  plan.x86Kernels->chunks[1].forward->outputs.pop_back();
  Expected<StageHoldings> holdings = stageHoldings(plan, 0);
  ASSERT_TRUE(holdings) << holdings.error().message();
  EXPECT_FALSE(predictedStageCommunicationBytes(plan, stagePlan(plan, *holdings),
                                                plan.pipeline->schedules[0], 0, 1));
}

TEST(CommunicationPredictionTest, StageWithoutTheCompilersFiguresHasNoPrediction) {
  Plan plan = pipelinePlan();
  Expected<StageHoldings> holdings = stageHoldings(plan, 1);
  ASSERT_TRUE(holdings) << holdings.error().message();
  Plan tables = stagePlan(plan, *holdings);
  plan.predictions.communicationBytes->pipelineFunctions.erase("chunk1.backward");
  EXPECT_FALSE(predictedStageCommunicationBytes(plan, tables, plan.pipeline->schedules[0], 1, 1));
  plan.predictions.communicationBytes.reset();
  EXPECT_FALSE(predictedStageCommunicationBytes(plan, tables, plan.pipeline->schedules[0], 1, 1));
}

} // namespace
} // namespace mtc::rt::test
