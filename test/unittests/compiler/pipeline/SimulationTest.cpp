//===- SimulationTest.cpp - the mts schedule simulator --------------------===//

#include "dialects/mts/IR/MTSSimulation.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mtc::mts;

namespace {

/// Two stages, one micro-batch; stage 0 waits for the gradient before it sends the
/// activation when `deadlock` is set.
std::string twoStages(bool deadlock) {
  std::string send = "      mts.send_activation chunk 0 mb 0 to 1\n";
  std::string recv = "      mts.recv_gradient chunk 0 mb 0 from 1\n";
  return R"(mts.schedule "1f1b" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0, 1] {
    mts.stage 0 {
      mts.forward chunk 0 mb 0
)" + (deadlock ? recv + send : send + recv) +
         R"(      mts.backward chunk 0 mb 0
      mts.reduce_gradients
      mts.optimizer_step
    }
    mts.stage 1 {
      mts.recv_activation chunk 1 mb 0 from 0
      mts.forward chunk 1 mb 0
      mts.backward chunk 1 mb 0
      mts.send_gradient chunk 1 mb 0 to 0
      mts.reduce_gradients
      mts.optimizer_step
    }
  })";
}

class SimulationTest : public ::testing::Test {
protected:
  SimulationTest() { context.loadDialect<MTSDialect>(); }

  /// Parses without verifying, so that a deadlocked schedule reaches the simulator.
  ScheduleOp parse(const std::string &source) {
    ParserConfig config(&context, /*verifyAfterParse=*/false);
    module = parseSourceString<ModuleOp>(source, config);
    if (!module)
      return nullptr;
    return *module->getOps<ScheduleOp>().begin();
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(SimulationTest, TaskCostsAndTransferLatencyGiveTheTimeline) {
  ScheduleOp schedule = parse(twoStages(false));
  ASSERT_TRUE(schedule);
  TaskCosts costs;
  costs.forward = 1;
  costs.backward = 2;
  costs.transfer = 0.5;
  ScheduleSimulation run = simulateSchedule(schedule, costs);
  ASSERT_FALSE(run.deadlocked());
  // Stage 0: F [0, 1), sends at 1; stage 1 receives at 1.5, F [1.5, 2.5), BW [2.5, 4.5),
  // sends at 4.5; stage 0 receives at 5, BW [5, 7).
  EXPECT_DOUBLE_EQ(run.span, 7);
  EXPECT_EQ(run.stages[0].starts, (llvm::SmallVector<double>{0, 1, 5, 5, 7, 7}));
  EXPECT_EQ(run.stages[1].starts, (llvm::SmallVector<double>{1.5, 1.5, 2.5, 4.5, 4.5, 4.5}));
  EXPECT_DOUBLE_EQ(run.stages[0].busy, 3);
  EXPECT_DOUBLE_EQ(run.stages[0].idle, 4);
  EXPECT_DOUBLE_EQ(run.stages[1].idle, 4);
  EXPECT_DOUBLE_EQ(run.stages[0].bubbleFraction, 4.0 / 7);
  EXPECT_DOUBLE_EQ(run.bubbleFraction(), 4.0 / 7);
  EXPECT_EQ(run.stages[0].peakInFlight, 1);
}

TEST_F(SimulationTest, ADeadlockSaysWhereEveryStageIsBlocked) {
  ScheduleOp schedule = parse(twoStages(true));
  ASSERT_TRUE(schedule);
  ScheduleSimulation run = simulateSchedule(schedule);
  ASSERT_TRUE(run.deadlocked());
  ASSERT_TRUE(run.stages[0].blockedAt && run.stages[1].blockedAt);
  EXPECT_TRUE(isa<RecvGradientOp>(run.stages[0].blockedAt));
  EXPECT_TRUE(isa<RecvActivationOp>(run.stages[1].blockedAt));
  // Stage 0 ran its forward; stage 1 nothing.
  EXPECT_EQ(run.stages[0].starts.size(), 1u);
  EXPECT_TRUE(run.stages[1].starts.empty());
}

} // namespace
