//===- ScheduleTest.cpp - every generated schedule verifies and runs ------===//
//
// Generates every kind for P in 1..8, V in 1..3, m in 1..32: admissible parameters give
// a schedule that passes the mts verifier (deadlock simulation included) and whose
// simulation matches the closed forms of its kind; the rest give the kind's error.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/Schedules.h"
#include "dialects/mts/IR/MTSSimulation.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

using namespace mlir;
using namespace mtc;
using namespace mtc::mts;

namespace {

constexpr ScheduleKind allKinds[] = {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                                     ScheduleKind::Interleaved, ScheduleKind::ZBH1};

class ScheduleTest : public ::testing::Test {
protected:
  ScheduleTest() {
    context.loadDialect<MTSDialect>();
    module = ModuleOp::create(UnknownLoc::get(&context));
  }

  /// Builds a schedule into the module; on failure, `error` holds the diagnostic.
  FailureOr<ScheduleOp> build(ScheduleKind kind, int64_t stages, int64_t virtualStages,
                              int64_t microBatches) {
    error.clear();
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      error = diag.str();
      return success();
    });
    OpBuilder builder = OpBuilder::atBlockEnd(module->getBody());
    return pipeline::buildSchedule(builder, builder.getUnknownLoc(), kind, stages, virtualStages,
                                   microBatches);
  }

  /// Verifies `schedule`; on failure, `error` holds the diagnostic.
  LogicalResult verifySchedule(ScheduleOp schedule) {
    error.clear();
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      error = diag.str();
      return success();
    });
    return mlir::verify(schedule);
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::string error;
};

bool admissible(ScheduleKind kind, int64_t stages, int64_t virtualStages, int64_t microBatches) {
  if (kind == ScheduleKind::Interleaved)
    return virtualStages >= 2 && microBatches % stages == 0;
  return virtualStages == 1;
}

std::string describe(ScheduleKind kind, int64_t stages, int64_t virtualStages,
                     int64_t microBatches) {
  return (stringifyScheduleKind(kind) + " P=" + std::to_string(stages) +
          " V=" + std::to_string(virtualStages) + " m=" + std::to_string(microBatches))
      .str();
}

TEST_F(ScheduleTest, EveryAdmissibleScheduleVerifiesAndRunsToTheEnd) {
  int64_t generated = 0;
  for (ScheduleKind kind : allKinds) {
    for (int64_t stages = 1; stages <= 8; ++stages) {
      for (int64_t virtualStages = 1; virtualStages <= 3; ++virtualStages) {
        for (int64_t microBatches = 1; microBatches <= 32; ++microBatches) {
          SCOPED_TRACE(describe(kind, stages, virtualStages, microBatches));
          FailureOr<ScheduleOp> schedule = build(kind, stages, virtualStages, microBatches);
          if (!admissible(kind, stages, virtualStages, microBatches)) {
            EXPECT_TRUE(failed(schedule));
            if (kind != ScheduleKind::Interleaved)
              EXPECT_NE(error.find("runs one chunk per stage"), std::string::npos) << error;
            else if (virtualStages < 2)
              EXPECT_NE(error.find("needs at least 2 virtual stages"), std::string::npos) << error;
            else
              EXPECT_NE(error.find("to be a multiple of the stage count"), std::string::npos)
                  << error;
            continue;
          }
          ASSERT_TRUE(succeeded(schedule)) << error;
          ASSERT_TRUE(succeeded(verifySchedule(*schedule))) << error;
          ScheduleSimulation run = simulateSchedule(*schedule);
          EXPECT_FALSE(run.deadlocked());
          // Every stage runs 3 units of work per (chunk, micro-batch) it holds.
          for (const StageSimulation &stage : run.stages)
            EXPECT_DOUBLE_EQ(stage.busy, 3.0 * virtualStages * microBatches);
          ++generated;
          schedule->erase();
        }
      }
    }
  }
  // gpipe, 1f1b and zb-h1: 8 * 32 each; interleaved: V in {2, 3} and m a multiple of P.
  int64_t interleaved = 0;
  for (int64_t stages = 1; stages <= 8; ++stages)
    interleaved += 2 * (32 / stages);
  EXPECT_EQ(generated, 3 * 8 * 32 + interleaved);
}

TEST_F(ScheduleTest, GPipeAnd1F1BHaveTheClassicBubbleAndInFlightCounts) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
    for (int64_t stages = 1; stages <= 8; ++stages) {
      for (int64_t microBatches = 1; microBatches <= 32; ++microBatches) {
        SCOPED_TRACE(describe(kind, stages, 1, microBatches));
        FailureOr<ScheduleOp> schedule = build(kind, stages, 1, microBatches);
        ASSERT_TRUE(succeeded(schedule)) << error;
        ScheduleSimulation run = simulateSchedule(*schedule);
        double bubble = double(stages - 1) / double(microBatches + stages - 1);
        EXPECT_DOUBLE_EQ(run.span, 3.0 * (microBatches + stages - 1));
        for (auto [stage, simulated] : llvm::enumerate(run.stages)) {
          EXPECT_NEAR(simulated.bubbleFraction, bubble, 1e-12) << "stage " << stage;
          int64_t inFlight = kind == ScheduleKind::GPipe
                                 ? microBatches
                                 : std::min<int64_t>(stages - stage, microBatches);
          EXPECT_EQ(simulated.peakInFlight, inFlight) << "stage " << stage;
        }
        EXPECT_NEAR(run.bubbleFraction(), bubble, 1e-12);
        schedule->erase();
      }
    }
  }
}

TEST_F(ScheduleTest, InterleavedBubbleShrinksWithTheVirtualStages) {
  // Megatron: the bubble is (P-1)/(V*m) of the ideal time, i.e. every stage idles P-1
  // chunk passes (3 units each) against 3*V*m units of work: (P-1)/(V*m+P-1) of the span.
  // Exact for m > P; with m = P every forward is in the warm-up and the bubble is larger.
  for (int64_t stages = 2; stages <= 8; ++stages) {
    for (int64_t virtualStages = 2; virtualStages <= 3; ++virtualStages) {
      for (int64_t microBatches = stages; microBatches <= 32; microBatches += stages) {
        SCOPED_TRACE(describe(ScheduleKind::Interleaved, stages, virtualStages, microBatches));
        FailureOr<ScheduleOp> schedule =
            build(ScheduleKind::Interleaved, stages, virtualStages, microBatches);
        ASSERT_TRUE(succeeded(schedule)) << error;
        ScheduleSimulation run = simulateSchedule(*schedule);
        double theory = double(stages - 1) / double(virtualStages * microBatches + stages - 1);
        double oneFOneB = double(stages - 1) / double(microBatches + stages - 1);
        if (microBatches > stages)
          EXPECT_NEAR(run.bubbleFraction(), theory, 1e-12);
        else
          EXPECT_GE(run.bubbleFraction(), theory - 1e-12);
        EXPECT_LT(run.bubbleFraction(), oneFOneB);
        // Megatron's warm-up: (P-s-1)*2 + (V-1)*P forwards, plus the first steady one.
        for (auto [stage, simulated] : llvm::enumerate(run.stages)) {
          int64_t total = virtualStages * microBatches;
          int64_t warmup = microBatches == stages
                               ? total
                               : std::min<int64_t>((stages - stage - 1) * 2 +
                                                       (virtualStages - 1) * stages + 1,
                                                   total);
          EXPECT_EQ(simulated.peakInFlight, warmup) << "stage " << stage;
        }
        schedule->erase();
      }
    }
  }
}

TEST_F(ScheduleTest, ZBH1IdlesAThirdOf1F1BWithTheSameInFlightCounts) {
  TaskCosts equal; // F = B = W = 1, so a 1F1B backward (BW) is 2
  for (int64_t stages = 1; stages <= 8; ++stages) {
    for (int64_t microBatches = 1; microBatches <= 32; ++microBatches) {
      SCOPED_TRACE(describe(ScheduleKind::ZBH1, stages, 1, microBatches));
      FailureOr<ScheduleOp> zb = build(ScheduleKind::ZBH1, stages, 1, microBatches);
      FailureOr<ScheduleOp> baseline = build(ScheduleKind::OneFOneB, stages, 1, microBatches);
      ASSERT_TRUE(succeeded(zb) && succeeded(baseline)) << error;
      ScheduleSimulation zbRun = simulateSchedule(*zb, equal);
      ScheduleSimulation baselineRun = simulateSchedule(*baseline, equal);
      EXPECT_LE(zbRun.span, baselineRun.span);
      if (microBatches >= stages)
        EXPECT_DOUBLE_EQ(zbRun.span, 3.0 * microBatches + stages - 1);
      for (auto [stage, zbStage, baselineStage] :
           llvm::enumerate(zbRun.stages, baselineRun.stages)) {
        if (microBatches >= stages) {
          EXPECT_DOUBLE_EQ(baselineStage.idle, 3.0 * (stages - 1)) << "stage " << stage;
          EXPECT_DOUBLE_EQ(zbStage.idle, baselineStage.idle / 3) << "stage " << stage;
        }
        EXPECT_EQ(zbStage.peakInFlight, baselineStage.peakInFlight) << "stage " << stage;
      }
      zb->erase();
      baseline->erase();
    }
  }
}

TEST_F(ScheduleTest, BadParametersAreErrorsNamingThem) {
  EXPECT_TRUE(failed(build(ScheduleKind::OneFOneB, 0, 1, 4)));
  EXPECT_EQ(error, "a pipeline schedule needs positive stages, virtual stages and "
                   "micro-batches, not 0, 1 and 4");
  EXPECT_TRUE(failed(build(ScheduleKind::ZBH1, 2, 2, 4)));
  EXPECT_EQ(error, "the zb-h1 schedule runs one chunk per stage, not 2 virtual stages (use "
                   "'interleaved' for more)");
  EXPECT_TRUE(failed(build(ScheduleKind::Interleaved, 2, 1, 4)));
  EXPECT_EQ(error, "the interleaved schedule needs at least 2 virtual stages, not 1 (with one "
                   "chunk per stage use 1f1b)");
  EXPECT_TRUE(failed(build(ScheduleKind::Interleaved, 4, 2, 6)));
  EXPECT_EQ(error, "the interleaved schedule needs the micro-batch count (6) to be a multiple "
                   "of the stage count (4), as Megatron's interleaved schedule does");
  EXPECT_TRUE(module->getBody()->empty()); // nothing built
}

} // namespace
