//===- MTSOps.h - mts dialect operations -------------------------*- C++ -*-===//

#ifndef MTC_DIALECTS_MTS_IR_MTSOPS_H
#define MTC_DIALECTS_MTS_IR_MTSOPS_H

#include "dialects/mts/IR/MTSDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"

#include <optional>

namespace mtc::mts {
class StageOp;
} // namespace mtc::mts

#define GET_OP_CLASSES
#include "dialects/mts/IR/MTSOps.h.inc"

namespace mtc::mts {

/// The schedules the generators make (`kind` of `mts.schedule`, "schedule" in the plan).
enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZBH1 };

std::optional<ScheduleKind> symbolizeScheduleKind(llvm::StringRef name);
llvm::StringRef stringifyScheduleKind(ScheduleKind kind);
/// "gpipe, 1f1b, interleaved or zb-h1", for error messages.
llvm::StringRef scheduleKindNames();

/// What a task op does, one value per task op.
enum class TaskKind {
  Forward,
  Backward,
  BackwardInput,
  BackwardWeight,
  SendActivation,
  RecvActivation,
  SendGradient,
  RecvGradient,
  ReduceGradients,
  OptimizerStep,
};

/// A task op's fields, so the verifier, the simulator and the plan writer handle every
/// kind alike. `chunk` and `microBatch` are -1 for the once-per-step tasks, `peer` is -1
/// for all but sends and receives.
struct Task {
  TaskKind kind;
  int64_t chunk = -1;
  int64_t microBatch = -1;
  int64_t peer = -1;
};

/// The task `op` is; none for an op that is not a task.
std::optional<Task> getTask(mlir::Operation *op);

/// The task op's name without the dialect ("forward", "send_activation", ...): the
/// mnemonic, and the "op" of the plan's task.
llvm::StringRef stringifyTaskKind(TaskKind kind);

bool isComputeTask(TaskKind kind);
bool isSendTask(TaskKind kind);
bool isRecvTask(TaskKind kind);

/// Creates the op of `task` at the builder's insertion point.
mlir::Operation *createTask(mlir::OpBuilder &builder, mlir::Location loc, const Task &task);

} // namespace mtc::mts

#endif // MTC_DIALECTS_MTS_IR_MTSOPS_H
