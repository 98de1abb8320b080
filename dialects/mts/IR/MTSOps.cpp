//===- MTSOps.cpp - mts dialect operations --------------------------------===//
//
// Builders and the uniform view of task ops (`Task`); the schedule's verifier is in
// MTSVerifier.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialects/mts/IR/MTSOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mtc::mts;

#define GET_OP_CLASSES
#include "dialects/mts/IR/MTSOps.cpp.inc"

void ScheduleOp::build(OpBuilder &builder, OperationState &state, StringRef kind,
                       int64_t stages, int64_t virtualStages, int64_t microBatches,
                       ArrayRef<int64_t> chunkStages) {
  state.addAttribute(getKindAttrName(state.name), builder.getStringAttr(kind));
  state.addAttribute(getStagesAttrName(state.name), builder.getI64IntegerAttr(stages));
  state.addAttribute(getVirtualStagesAttrName(state.name),
                     builder.getI64IntegerAttr(virtualStages));
  state.addAttribute(getMicroBatchesAttrName(state.name),
                     builder.getI64IntegerAttr(microBatches));
  state.addAttribute(getChunkStagesAttrName(state.name),
                     builder.getDenseI64ArrayAttr(chunkStages));
  state.addRegion()->emplaceBlock();
}

void StageOp::build(OpBuilder &builder, OperationState &state, int64_t index) {
  state.addAttribute(getIndexAttrName(state.name), builder.getI64IntegerAttr(index));
  state.addRegion()->emplaceBlock();
}

//===----------------------------------------------------------------------===//
// Schedule kinds
//===----------------------------------------------------------------------===//

std::optional<ScheduleKind> mtc::mts::symbolizeScheduleKind(StringRef name) {
  return llvm::StringSwitch<std::optional<ScheduleKind>>(name)
      .Case("gpipe", ScheduleKind::GPipe)
      .Case("1f1b", ScheduleKind::OneFOneB)
      .Case("interleaved", ScheduleKind::Interleaved)
      .Case("zb-h1", ScheduleKind::ZBH1)
      .Default(std::nullopt);
}

StringRef mtc::mts::stringifyScheduleKind(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return "interleaved";
  case ScheduleKind::ZBH1:
    return "zb-h1";
  }
  llvm_unreachable("every schedule kind has a name");
}

StringRef mtc::mts::scheduleKindNames() { return "gpipe, 1f1b, interleaved or zb-h1"; }

//===----------------------------------------------------------------------===//
// Tasks
//===----------------------------------------------------------------------===//

template <typename ComputeOp>
static Task computeTask(TaskKind kind, ComputeOp op) {
  return {kind, static_cast<int64_t>(op.getChunk()), static_cast<int64_t>(op.getMicroBatch())};
}

template <typename TransferOp>
static Task transferTask(TaskKind kind, TransferOp op) {
  return {kind, static_cast<int64_t>(op.getChunk()), static_cast<int64_t>(op.getMicroBatch()),
          static_cast<int64_t>(op.getPeer())};
}

std::optional<Task> mtc::mts::getTask(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<Task>>(op)
      .Case([](ForwardOp op) { return computeTask(TaskKind::Forward, op); })
      .Case([](BackwardOp op) { return computeTask(TaskKind::Backward, op); })
      .Case([](BackwardInputOp op) { return computeTask(TaskKind::BackwardInput, op); })
      .Case([](BackwardWeightOp op) { return computeTask(TaskKind::BackwardWeight, op); })
      .Case([](SendActivationOp op) { return transferTask(TaskKind::SendActivation, op); })
      .Case([](RecvActivationOp op) { return transferTask(TaskKind::RecvActivation, op); })
      .Case([](SendGradientOp op) { return transferTask(TaskKind::SendGradient, op); })
      .Case([](RecvGradientOp op) { return transferTask(TaskKind::RecvGradient, op); })
      .Case([](ReduceGradientsOp) { return Task{TaskKind::ReduceGradients}; })
      .Case([](OptimizerStepOp) { return Task{TaskKind::OptimizerStep}; })
      .Default([](Operation *) { return std::nullopt; });
}

StringRef mtc::mts::stringifyTaskKind(TaskKind kind) {
  switch (kind) {
  case TaskKind::Forward:
    return ForwardOp::getOperationName().drop_front(4);
  case TaskKind::Backward:
    return BackwardOp::getOperationName().drop_front(4);
  case TaskKind::BackwardInput:
    return BackwardInputOp::getOperationName().drop_front(4);
  case TaskKind::BackwardWeight:
    return BackwardWeightOp::getOperationName().drop_front(4);
  case TaskKind::SendActivation:
    return SendActivationOp::getOperationName().drop_front(4);
  case TaskKind::RecvActivation:
    return RecvActivationOp::getOperationName().drop_front(4);
  case TaskKind::SendGradient:
    return SendGradientOp::getOperationName().drop_front(4);
  case TaskKind::RecvGradient:
    return RecvGradientOp::getOperationName().drop_front(4);
  case TaskKind::ReduceGradients:
    return ReduceGradientsOp::getOperationName().drop_front(4);
  case TaskKind::OptimizerStep:
    return OptimizerStepOp::getOperationName().drop_front(4);
  }
  llvm_unreachable("every task kind has an op");
}

bool mtc::mts::isComputeTask(TaskKind kind) {
  return kind == TaskKind::Forward || kind == TaskKind::Backward ||
         kind == TaskKind::BackwardInput || kind == TaskKind::BackwardWeight;
}

bool mtc::mts::isSendTask(TaskKind kind) {
  return kind == TaskKind::SendActivation || kind == TaskKind::SendGradient;
}

bool mtc::mts::isRecvTask(TaskKind kind) {
  return kind == TaskKind::RecvActivation || kind == TaskKind::RecvGradient;
}

Operation *mtc::mts::createTask(OpBuilder &builder, Location loc, const Task &task) {
  uint64_t chunk = task.chunk, microBatch = task.microBatch, peer = task.peer;
  switch (task.kind) {
  case TaskKind::Forward:
    return ForwardOp::create(builder, loc, chunk, microBatch);
  case TaskKind::Backward:
    return BackwardOp::create(builder, loc, chunk, microBatch);
  case TaskKind::BackwardInput:
    return BackwardInputOp::create(builder, loc, chunk, microBatch);
  case TaskKind::BackwardWeight:
    return BackwardWeightOp::create(builder, loc, chunk, microBatch);
  case TaskKind::SendActivation:
    return SendActivationOp::create(builder, loc, chunk, microBatch, peer);
  case TaskKind::RecvActivation:
    return RecvActivationOp::create(builder, loc, chunk, microBatch, peer);
  case TaskKind::SendGradient:
    return SendGradientOp::create(builder, loc, chunk, microBatch, peer);
  case TaskKind::RecvGradient:
    return RecvGradientOp::create(builder, loc, chunk, microBatch, peer);
  case TaskKind::ReduceGradients:
    return ReduceGradientsOp::create(builder, loc);
  case TaskKind::OptimizerStep:
    return OptimizerStepOp::create(builder, loc);
  }
  llvm_unreachable("every task kind has an op");
}
