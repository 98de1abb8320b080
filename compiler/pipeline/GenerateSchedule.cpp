//===- GenerateSchedule.cpp - the mts-generate-schedule pass --------------===//

#include "compiler/pipeline/Passes.h"
#include "compiler/pipeline/Schedules.h"

namespace mtc::pipeline {
#define GEN_PASS_DEF_MTSGENERATESCHEDULEPASS
#include "compiler/pipeline/Passes.h.inc"
} // namespace mtc::pipeline

using namespace mlir;
using namespace mtc;

namespace {
struct MTSGenerateSchedulePass
    : pipeline::impl::MTSGenerateSchedulePassBase<MTSGenerateSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<mts::ScheduleKind> scheduleKind = mts::symbolizeScheduleKind(kind);
    if (!scheduleKind) {
      module.emitError() << "unknown schedule '" << kind << "' (expected "
                         << mts::scheduleKindNames() << ")";
      return signalPassFailure();
    }
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    if (failed(pipeline::buildSchedule(builder, module.getLoc(), *scheduleKind, stages,
                                       virtualStages, microBatches)))
      signalPassFailure();
  }
};
} // namespace
