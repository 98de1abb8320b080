//===- PipelineSchedule.h - The plan's pipeline schedule as data -*- C++ -*-===//
//
// A plan compiled with pipeline parallelism carries, in plan.json's "pipeline" object
// (docs/plan-format.md, "Pipeline"), the task list every stage runs in one step, for every
// micro-batch count the runtime may choose. `parsePipeline` reads and checks it so that a
// corrupt or hand-edited plan is refused with the field it got wrong, before any rank runs:
//
//   - shapes: `chunk_layers` and `chunk_stages` have stages x virtual_stages entries, every
//     stage holds virtual_stages chunks, every schedule has one task list per stage;
//   - tasks: a known op, a chunk of this stage, a micro-batch below the schedule's count, a
//     peer that is the stage of the neighbouring chunk, a `start` slot on compute tasks, the
//     slots of a stage's compute tasks in list order without overlap and within the
//     schedule's total work (so that a chart of them stays small);
//   - completeness and order on each stage: one F and one BW (or B and W) per chunk and
//     micro-batch, each after what it consumes (a receive, or the local chunk before it), one
//     send/recv per crossing between stages, one `reduce_gradients` after the last backward
//     and one `optimizer_step` last; at most `in_flight` activations held;
//   - between stages: the receives from a peer in the order that peer sends (NCCL's
//     send/recv have no tags), and no deadlock when every stage runs its list with
//     non-blocking sends and blocking receives (simulated).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_PLAN_PIPELINESCHEDULE_H
#define MTC_RUNTIME_PLAN_PIPELINESCHEDULE_H

#include "runtime/support/Error.h"
#include "runtime/support/Json.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt {

enum class TaskOp {
  Forward,
  Backward,
  BackwardInput,
  BackwardWeight,
  SendActivation,
  RecvActivation,
  SendGradient,
  RecvGradient,
  ReduceGradients,
  OptimizerStep
};
inline constexpr size_t kNumTaskOps = 10;

struct ScheduleTask {
  TaskOp op;
  int32_t chunk = 0;
  int32_t microBatch = 0;
  int32_t peer = -1;
  int64_t start = -1; // compute tasks: unit-time slot
};

struct StageTasks {
  double bubbleFraction = 0;
  int64_t inFlight = 0;
  /// `activation_bytes`: the compiler's prediction of the activations the stage holds at once
  /// (absent: -1).
  int64_t activationBytes = -1;
  /// `peak_bytes`: the compiler's prediction of the stage's peak memory per rank
  /// (PipelineTrainer::peakBytes; absent, as in a plan without kernels: -1).
  int64_t peakBytes = -1;
  std::vector<ScheduleTask> tasks;
};

struct PipelineSchedule {
  int64_t microBatches = 0;
  std::vector<StageTasks> stages;
};

struct PipelinePlan {
  int64_t stages = 1, virtualStages = 1;
  std::string schedule; // as in plan.json
  std::vector<int64_t> chunkLayers, chunkStages;
  /// `shared_params`: the model parameters several chunks read (a tied embedding), each with
  /// those chunks (ascending, at least two): their gradient parts are summed.
  struct SharedParam {
    std::string name;
    std::vector<int64_t> chunks;
  };
  std::vector<SharedParam> sharedParams;
  std::vector<PipelineSchedule> schedules;
  /// The stages holding a chunk of `shared`, ascending, each once.
  std::vector<int64_t> stagesOf(const SharedParam &shared) const;
  /// The schedule for m micro-batches, or an error naming the m values there are.
  Expected<const PipelineSchedule *> forMicroBatches(int64_t m) const;
};

/// Reads and checks plan.json's "pipeline" object (see the file comment). Errors name the
/// field: "pipeline.schedules[0].stages[1].tasks[4].op: unknown op string \"fwd\"
/// (expected ...)".
Expected<PipelinePlan> parsePipeline(const JsonValue &pipeline);

/// "forward", "backward", "backward_input", ..., as in plan.json.
std::string_view taskOpName(TaskOp);
/// What a task is, for messages: "backward chunk 1 micro-batch 3" (the step-wide tasks by
/// their op alone).
std::string describeTask(const ScheduleTask &task);
std::optional<TaskOp> parseTaskOp(std::string_view name);

/// F, B, W and BW: the tasks that run a chunk's compiled function.
bool isComputeTask(TaskOp op);
/// The time slots a compute task takes in the schedule's unit-time simulation: 2 for a whole
/// backward, 1 for forward, backward_input and backward_weight.
int64_t unitSlots(TaskOp op);
/// The four send/recv ops.
bool isSendTask(TaskOp op);
bool isRecvTask(TaskOp op);

/// How many compute tasks ahead a stage posts its receives (runtime/exec/ScheduleExecutor.h):
/// enough for a message to arrive while the stage computes, few enough that the
/// communicator's timeout, which runs from the posting, measures the wait for the peer
/// rather than this stage's own work.
inline constexpr size_t kReceiveLookahead = 2;
/// The end of the receive window before task `current` of `tasks`: the receives before the
/// (kReceiveLookahead + 1)-th compute task from `current` on are posted by then.
size_t receiveWindowEnd(const std::vector<ScheduleTask> &tasks, size_t current);

/// Where stage `stage` of `stages` (a schedule's lists) frees the buffer of each of its
/// sends: for each task index k of its list, when task k is a send, the index of the compute
/// task of the list before which the send is known to have arrived, or the list's size (the
/// step's end; also for the tasks that are no send). A send S to stage Y has arrived once
/// this stage has received a message M that Y sent after the compute task that read S: Y's
/// first send back to this stage after that task. The executor waits for M before the
/// compute task that reads it, so that is where S is released (its wait then returns at
/// once: no wait is added that could deadlock). Without such an M (a forward-only list, the
/// last messages of a step) S is held to the step's end.
std::vector<size_t> sendReleases(const std::vector<StageTasks> &stages, int64_t stage);

/// The most (chunk, micro-batch) pairs whose forward has run and whose backward (BW, or B)
/// has not, at any point of `tasks`: the activations a stage holds at once.
int64_t peakInFlight(const std::vector<ScheduleTask> &tasks);

} // namespace mtc::rt

#endif // MTC_RUNTIME_PLAN_PIPELINESCHEDULE_H
