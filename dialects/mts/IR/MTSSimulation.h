//===- MTSSimulation.h - run a schedule with task costs ----------*- C++ -*-===//
//
// Runs an `mts.schedule` on a model of the machine: each stage runs its tasks in order,
// a compute task takes its cost, a send takes no time and does not block, a receive
// waits until its matching send (by order between the two stages) has run plus the
// transfer latency. The verifier uses it to find deadlocks, the plan writer for the
// schedule's bubble fractions and start slots, the cost model for step times.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_DIALECTS_MTS_IR_MTSSIMULATION_H
#define MTC_DIALECTS_MTS_IR_MTSSIMULATION_H

#include "dialects/mts/IR/MTSOps.h"
#include "llvm/ADT/SmallVector.h"

namespace mtc::mts {

/// The time each task takes. The defaults are the unit times of the plan's theory:
/// F = B = W = 1, BW = B + W.
struct TaskCosts {
  double forward = 1;
  double backward = 2;
  double backwardInput = 1;
  double backwardWeight = 1;
  /// From a send to the moment its receive can complete.
  double transfer = 0;

  double of(TaskKind kind) const;
};

struct StageSimulation {
  /// Time spent in compute tasks, and the rest of the span.
  double busy = 0;
  double idle = 0;
  /// idle / span (0 for an empty schedule).
  double bubbleFraction = 0;
  /// The most (chunk, micro-batch) pairs whose forward had run and whose backward
  /// (B or BW) had not: the activations the stage holds at its peak.
  int64_t peakInFlight = 0;
  /// When each task of the stage started, in the stage's order (a receive: when its data
  /// was there).
  llvm::SmallVector<double> starts;
  /// The task the stage could not run (its matching send never ran); null when it ran
  /// to the end.
  mlir::Operation *blockedAt = nullptr;
};

struct ScheduleSimulation {
  /// When the last task of any stage ended.
  double span = 0;
  llvm::SmallVector<StageSimulation> stages;

  bool deadlocked() const;
  /// The idle time of all stages over P * span.
  double bubbleFraction() const;
};

/// Runs `schedule`, which must have passed the verifier's structural checks (stages in
/// order, tasks with peers in range); it need not be free of deadlock: a deadlocked run
/// stops and says where every stage is blocked.
ScheduleSimulation simulateSchedule(ScheduleOp schedule, const TaskCosts &costs = {});

} // namespace mtc::mts

#endif // MTC_DIALECTS_MTS_IR_MTSSIMULATION_H
