//===- ScheduleExecutor.h - One pipeline stage's task list, run for a step -*- C++ -*-===//
//
// A plan with pipeline parallelism gives every stage a task list per step (PipelineSchedule.h).
// The executor runs one stage's list: it calls the stage's compiled functions through a
// `StageCompute` (forward, backward or its input and weight halves, per chunk and micro-batch;
// the gradient reduction; the optimizer step) and moves activations and gradients between
// stages over the links made from the pipeline group (PipelineLinks.h: a communicator per
// direction between two stages, so that no receive waits for a send's completion):
//
//   - Receives are posted early: before each task, the receives ahead in the list, up to two
//     compute tasks ahead, whose buffers are free are posted (in list order, which keeps the
//     order of the messages from each peer), so a message arrives while the stage computes;
//     the task that consumes it waits for it only then.
//   - Sends never block the list: a send is posted and the executor goes on. Before a task
//     writes the buffer of a send still in flight (a StageCompute may reuse a few buffers),
//     and before the step ends, it waits for that send.
//   - A send's buffer is given back (StageCompute::sent) at a fixed point of the list: before
//     the compute task that reads the first message the peer sent back after reading the
//     send (sendReleases, PipelineSchedule.h), where the send has arrived and waiting for it
//     returns at once; so a stage's memory is the same on every run, as predicted.
//   - The activations held (forwards done whose backward has not run) never exceed the
//     stage's `in_flight`: a forward that would hold more is an error, not a silent overrun.
//   - A send or receive that fails, or finds no peer within the communicator's timeout
//     (mtrun --comm-timeout), fails the step with the stage, task, micro-batch and peer:
//       stage 1: recv_activation chunk 1 micro-batch 3 from stage 0 failed: gloo recv ...
//
// Buffers: `StageCompute::message` names the memory of each send and receive. A receive's
// buffer belongs to the executor from when it is posted until its consuming task (the forward
// of that chunk and micro-batch for an activation, its backward for a gradient) has returned;
// a send's buffer from its producing task until it is given back (above; the compute frees
// those never given back after the step). Two buffers the executor
// holds at once must not overlap (the executor posts a receive late rather than into a buffer
// it still holds).
//
// Time: the executor measures the stage's busy time (its compute tasks), the time it waits for
// messages, and the span from the step's start to the end of its last compute task;
// `measureBubbleFractions` turns them into each stage's measured bubble fraction, the
// counterpart of the schedule's `bubble_fraction`. With a TraceRecorder it records every
// compute task and every wait as a span (Trace.h).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_SCHEDULEEXECUTOR_H
#define MTC_RUNTIME_EXEC_SCHEDULEEXECUTOR_H

#include "runtime/comm/Communicator.h"
#include "runtime/exec/PipelineLinks.h"
#include "runtime/exec/Trace.h"
#include "runtime/plan/PipelineSchedule.h"
#include "runtime/support/Error.h"

#include <cstddef>
#include <span>
#include <vector>

namespace mtc::rt {

/// The memory of one message: `count` elements of `type`.
struct MessageBuffer {
  void *data = nullptr;
  size_t count = 0;
  MtcElementType type = MTC_F32;
};

/// A stage's compiled functions and buffers, as the executor calls them.
class StageCompute {
public:
  virtual ~StageCompute();
  /// Runs a compute task (forward, backward, backward_input, backward_weight) of its chunk and
  /// micro-batch. A forward reads the chunk's input (the buffer of recv_activation of the same
  /// chunk and micro-batch, or the previous chunk's output when that chunk is on this stage,
  /// or the data for chunk 0) and writes the buffer of its send_activation, if any; a backward
  /// reads the buffer of its recv_gradient (or the next chunk's input gradient on this stage,
  /// or the loss for the last chunk) and writes the buffer of its send_gradient, if any.
  virtual Error compute(const ScheduleTask &task) = 0;
  /// The buffer of a send or receive task (see the file comment for who owns it when).
  virtual Expected<MessageBuffer> message(const ScheduleTask &task) = 0;
  /// The stage's reduce_gradients and optimizer_step tasks.
  virtual Error reduceGradients() = 0;
  virtual Error optimizerStep() = 0;
  /// The executor is done with the buffer of the send task `send` (it has arrived,
  /// sendReleases): the compute may free it. The buffers of the sends never released so are
  /// the compute's to free after the step.
  virtual void sent(const ScheduleTask &send) { (void)send; }
};

/// What one stage measured in one step, in seconds.
struct StageStepTimes {
  double busy = 0;        // compute tasks
  double computeSpan = 0; // from the step's start to the end of the last compute task
};

class ScheduleExecutor {
public:
  /// The executor of stage `stage` of `schedule`. `links` are this stage's links (made for
  /// schedules including this one; may be null for a one-stage schedule), `trace` an optional
  /// recorder; the schedule, links and recorder must outlive the executor. Fails when the links
  /// do not fit the schedule.
  static Expected<ScheduleExecutor> create(const PipelineSchedule &schedule, int stage,
                                           const PipelineLinks *links,
                                           TraceRecorder *trace = nullptr);

  /// Runs the stage's list once (one optimizer step). On failure the step is abandoned
  /// (messages in flight are waited for, bounded by the communicator's timeout).
  Expected<StageStepTimes> runStep(StageCompute &compute);

private:
  ScheduleExecutor(const StageTasks &tasks, int stage, const PipelineLinks *links,
                   TraceRecorder *trace, std::vector<std::vector<size_t>> releasedAt)
      : tasks_(&tasks), stage_(stage), links_(links), trace_(trace),
        releasedAt_(std::move(releasedAt)) {}

  const StageTasks *tasks_;
  int stage_;
  const PipelineLinks *links_;
  TraceRecorder *trace_;
  /// Per task of the list: the sends released before it runs (sendReleases).
  std::vector<std::vector<size_t>> releasedAt_;
};

/// Every stage's measured bubble fraction over `steps` (this stage's times), indexed by stage:
/// 1 - busy / span, where each step's span is the longest compute span of any stage that step
/// (the makespan the schedule's theoretical `bubble_fraction` is measured against).
/// Collective over `pipeline` (null: one stage).
Expected<std::vector<double>> measureBubbleFractions(Communicator *pipeline,
                                                     std::span<const StageStepTimes> steps);

/// The log line that puts the measured bubble fractions (one per stage) next to the
/// schedule's: "pipeline bubble: stage 0 0.262 (schedule 0.273), stage 1 ...".
std::string describeBubbles(const PipelineSchedule &schedule, std::span<const double> measured);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_SCHEDULEEXECUTOR_H
