//===- PipelineJSONTest.cpp - the plan's "pipeline" object ----------------===//

#include "compiler/pipeline/PipelineJSON.h"
#include "compiler/pipeline/Schedules.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mtc;
using namespace mtc::mts;

namespace {

class PipelineJSONTest : public ::testing::Test {
protected:
  PipelineJSONTest() {
    context.loadDialect<MTSDialect>();
    module = ModuleOp::create(UnknownLoc::get(&context));
  }

  ScheduleOp build(ScheduleKind kind, int64_t stages, int64_t virtualStages,
                   int64_t microBatches) {
    OpBuilder builder = OpBuilder::atBlockEnd(module->getBody());
    return *pipeline::buildSchedule(builder, builder.getUnknownLoc(), kind, stages, virtualStages,
                                    microBatches);
  }

  /// pipelineToJSON's result printed, or its error.
  std::string toJSON(ArrayRef<ScheduleOp> schedules, ArrayRef<int64_t> chunkLayers) {
    std::string error;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      error = diag.str();
      return success();
    });
    FailureOr<llvm::json::Object> json = pipeline::pipelineToJSON(schedules, chunkLayers);
    if (failed(json))
      return "error: " + error;
    return llvm::formatv("{0:2}", llvm::json::Value(std::move(*json))).str();
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(PipelineJSONTest, OneFOneBOnTwoStagesWithTwoMicroBatches) {
  ScheduleOp schedule = build(ScheduleKind::OneFOneB, 2, 1, 2);
  // Stage 1: F0 [1,2) BW0 [2,4), F1 [4,5) BW1 [5,7); stage 0: F0 [0,1) F1 [1,2), BW0
  // [4,6) and BW1 [7,9) when the gradients arrive: span 9 = 3 (m + P - 1), 3 idle slots.
  EXPECT_EQ(toJSON({schedule}, {2, 1}), R"({
  "chunk_layers": [
    2,
    1
  ],
  "chunk_stages": [
    0,
    1
  ],
  "schedule": "1f1b",
  "schedules": [
    {
      "micro_batches": 2,
      "stages": [
        {
          "bubble_fraction": 0.33333333333333331,
          "in_flight": 2,
          "tasks": [
            {
              "chunk": 0,
              "micro_batch": 0,
              "op": "forward",
              "start": 0
            },
            {
              "chunk": 0,
              "micro_batch": 0,
              "op": "send_activation",
              "peer": 1
            },
            {
              "chunk": 0,
              "micro_batch": 1,
              "op": "forward",
              "start": 1
            },
            {
              "chunk": 0,
              "micro_batch": 1,
              "op": "send_activation",
              "peer": 1
            },
            {
              "chunk": 0,
              "micro_batch": 0,
              "op": "recv_gradient",
              "peer": 1
            },
            {
              "chunk": 0,
              "micro_batch": 0,
              "op": "backward",
              "start": 4
            },
            {
              "chunk": 0,
              "micro_batch": 1,
              "op": "recv_gradient",
              "peer": 1
            },
            {
              "chunk": 0,
              "micro_batch": 1,
              "op": "backward",
              "start": 7
            },
            {
              "op": "reduce_gradients"
            },
            {
              "op": "optimizer_step"
            }
          ]
        },
        {
          "bubble_fraction": 0.33333333333333331,
          "in_flight": 1,
          "tasks": [
            {
              "chunk": 1,
              "micro_batch": 0,
              "op": "recv_activation",
              "peer": 0
            },
            {
              "chunk": 1,
              "micro_batch": 0,
              "op": "forward",
              "start": 1
            },
            {
              "chunk": 1,
              "micro_batch": 0,
              "op": "backward",
              "start": 2
            },
            {
              "chunk": 1,
              "micro_batch": 0,
              "op": "send_gradient",
              "peer": 0
            },
            {
              "chunk": 1,
              "micro_batch": 1,
              "op": "recv_activation",
              "peer": 0
            },
            {
              "chunk": 1,
              "micro_batch": 1,
              "op": "forward",
              "start": 4
            },
            {
              "chunk": 1,
              "micro_batch": 1,
              "op": "backward",
              "start": 5
            },
            {
              "chunk": 1,
              "micro_batch": 1,
              "op": "send_gradient",
              "peer": 0
            },
            {
              "op": "reduce_gradients"
            },
            {
              "op": "optimizer_step"
            }
          ]
        }
      ]
    }
  ],
  "stages": 2,
  "virtual_stages": 1
})");
}

TEST_F(PipelineJSONTest, SchedulesAreWrittenByIncreasingMicroBatchCount) {
  ScheduleOp four = build(ScheduleKind::ZBH1, 2, 1, 4);
  ScheduleOp two = build(ScheduleKind::ZBH1, 2, 1, 2);
  FailureOr<llvm::json::Object> json = pipeline::pipelineToJSON({four, two}, {1, 1});
  ASSERT_TRUE(succeeded(json));
  const llvm::json::Array *schedules = json->getArray("schedules");
  ASSERT_TRUE(schedules && schedules->size() == 2);
  EXPECT_EQ((*schedules)[0].getAsObject()->getInteger("micro_batches"), 2);
  EXPECT_EQ((*schedules)[1].getAsObject()->getInteger("micro_batches"), 4);
  // zb-h1's split backward appears as backward_input and backward_weight.
  std::string text = llvm::formatv("{0}", llvm::json::Value(std::move(*json))).str();
  EXPECT_NE(text.find(R"("op":"backward_weight")"), std::string::npos);
  EXPECT_EQ(text.find(R"("op":"backward")"), std::string::npos);
}

TEST_F(PipelineJSONTest, SchedulesOfDifferentPipelinesOrCountsAreErrors) {
  ScheduleOp oneFOneB = build(ScheduleKind::OneFOneB, 2, 1, 2);
  ScheduleOp gpipe = build(ScheduleKind::GPipe, 2, 1, 4);
  ScheduleOp again = build(ScheduleKind::OneFOneB, 2, 1, 2);
  EXPECT_EQ(toJSON({oneFOneB, gpipe}, {1, 1}),
            "error: 'mts.schedule' op is another pipeline than the plan's first schedule (kind, "
            "stages, virtual stages and chunk placement must agree)");
  EXPECT_EQ(toJSON({oneFOneB, again}, {1, 1}),
            "error: 'mts.schedule' op is a second schedule for 2 micro-batches");
  EXPECT_EQ(toJSON({oneFOneB}, {1, 1, 1}),
            "error: 'mts.schedule' op has 2 chunks, but the plan gives the layers of 3");
}

} // namespace
