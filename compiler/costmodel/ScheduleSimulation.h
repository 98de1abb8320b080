//===- ScheduleSimulation.h - timing each stage's task list -----*- C++ -*-===//
//
// Runs the task lists of a step's stages (one list per pipeline stage; a plan without
// pipeline parallelism is one stage) with given task times, as the runtime's executors run
// them: each stage runs its tasks in order; a send does not block (the message arrives
// `transfer` seconds after its send starts), a receive waits for its message. The result is
// when each task ran, so the step time (the last stage to finish) includes the pipeline's
// bubbles, and each stage's idle time is its bubble.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_COSTMODEL_SCHEDULESIMULATION_H
#define MTC_COMPILER_COSTMODEL_SCHEDULESIMULATION_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mtc::costmodel {

struct SimTask {
  enum class Kind { Compute, Communicate, Send, Receive };
  Kind kind = Kind::Compute;
  std::string name;
  /// The time the stage is busy with the task (a send: its start-up; a receive: 0 after
  /// its message arrived).
  double seconds = 0;
  /// Sends and receives: the message's key, equal on the sending and the receiving task,
  /// and (on the send) how long it takes to arrive.
  std::string message;
  double transfer = 0;
};

struct SimInterval {
  double start = 0, end = 0;
};

struct SimResult {
  /// Per stage, per task: when it ran (a receive from when it was reached until its message
  /// arrived).
  std::vector<std::vector<SimInterval>> intervals;
  /// Per stage: when its last task ended; its time busy computing; busy communicating
  /// (collectives and sends), and waiting (receives, the bubble).
  std::vector<double> finish, compute, communicate, waiting;
  double stepSeconds = 0;
};

/// Runs `stages`; fails, naming the stages and their next tasks, if they deadlock (a
/// receive whose message is never sent).
llvm::Expected<SimResult> simulateStages(const std::vector<std::vector<SimTask>> &stages);

} // namespace mtc::costmodel

#endif // MTC_COMPILER_COSTMODEL_SCHEDULESIMULATION_H
