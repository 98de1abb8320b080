//===- MTSSimulation.cpp - run a schedule with task costs -----------------===//

#include "dialects/mts/IR/MTSSimulation.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>

using namespace mlir;
using namespace mtc::mts;

double TaskCosts::of(TaskKind kind) const {
  switch (kind) {
  case TaskKind::Forward:
    return forward;
  case TaskKind::Backward:
    return backward;
  case TaskKind::BackwardInput:
    return backwardInput;
  case TaskKind::BackwardWeight:
    return backwardWeight;
  default:
    return 0;
  }
}

bool ScheduleSimulation::deadlocked() const {
  return llvm::any_of(stages, [](const StageSimulation &stage) { return stage.blockedAt; });
}

double ScheduleSimulation::bubbleFraction() const {
  if (span <= 0 || stages.empty())
    return 0;
  double idle = 0;
  for (const StageSimulation &stage : stages)
    idle += stage.idle;
  return idle / (span * stages.size());
}

namespace {
/// One stage's progress through its task list.
struct StageRun {
  llvm::SmallVector<std::pair<Operation *, Task>> tasks;
  size_t next = 0;
  double clock = 0;
  int64_t inFlight = 0;
};
} // namespace

ScheduleSimulation mtc::mts::simulateSchedule(ScheduleOp schedule, const TaskCosts &costs) {
  llvm::SmallVector<StageRun> runs;
  for (StageOp stage : schedule.getStageOps()) {
    StageRun &run = runs.emplace_back();
    for (Operation &op : stage.getBody().front())
      if (std::optional<Task> task = getTask(&op))
        run.tasks.push_back({&op, *task});
  }
  ScheduleSimulation result;
  result.stages.resize(runs.size());

  // When each message from stage `a` to stage `b` was sent, in order ((a, b) keys), and
  // how many of them `b` has received.
  llvm::DenseMap<std::pair<int64_t, int64_t>, llvm::SmallVector<double>> sent;
  llvm::DenseMap<std::pair<int64_t, int64_t>, size_t> received;

  // Run every stage as far as it can go until none can move: a stage stops only at a
  // receive whose send has not run, so the order in which stages are visited changes no
  // time.
  bool progress = true;
  while (progress) {
    progress = false;
    for (auto [index, run] : llvm::enumerate(runs)) {
      int64_t self = index;
      StageSimulation &stage = result.stages[index];
      while (run.next < run.tasks.size()) {
        const Task &task = run.tasks[run.next].second;
        if (isRecvTask(task.kind)) {
          const llvm::SmallVector<double> &times = sent[{task.peer, self}];
          size_t &count = received[{task.peer, self}];
          if (count >= times.size())
            break;
          run.clock = std::max(run.clock, times[count] + costs.transfer);
          ++count;
        }
        stage.starts.push_back(run.clock);
        if (isSendTask(task.kind))
          sent[{self, task.peer}].push_back(run.clock);
        double cost = costs.of(task.kind);
        run.clock += cost;
        stage.busy += cost;
        if (task.kind == TaskKind::Forward)
          stage.peakInFlight = std::max(stage.peakInFlight, ++run.inFlight);
        else if (task.kind == TaskKind::Backward || task.kind == TaskKind::BackwardInput)
          --run.inFlight;
        ++run.next;
        progress = true;
      }
    }
  }

  for (auto [run, stage] : llvm::zip_equal(runs, result.stages)) {
    result.span = std::max(result.span, run.clock);
    if (run.next < run.tasks.size())
      stage.blockedAt = run.tasks[run.next].first;
  }
  for (StageSimulation &stage : result.stages) {
    stage.idle = result.span - stage.busy;
    stage.bubbleFraction = result.span > 0 ? stage.idle / result.span : 0;
  }
  return result;
}
