//===- ScheduleSimulation.cpp - timing each stage's task list -------------===//

#include "compiler/costmodel/ScheduleSimulation.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mtc::costmodel;

llvm::Expected<SimResult>
mtc::costmodel::simulateStages(const std::vector<std::vector<SimTask>> &stages) {
  size_t numStages = stages.size();
  SimResult result;
  result.intervals.resize(numStages);
  result.finish.assign(numStages, 0);
  result.compute.assign(numStages, 0);
  result.communicate.assign(numStages, 0);
  result.waiting.assign(numStages, 0);
  std::vector<size_t> next(numStages, 0);
  std::vector<double> clock(numStages, 0);
  // When each sent message arrives.
  llvm::StringMap<double> arrivals;
  // Run every stage as far as it can go until all are done; a receive whose message has not
  // been sent yet stops its stage until another stage sends it. Every pass without progress
  // means a deadlock.
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t s = 0; s < numStages; ++s) {
      for (; next[s] < stages[s].size(); ++next[s]) {
        const SimTask &task = stages[s][next[s]];
        double start = clock[s];
        if (task.kind == SimTask::Kind::Receive) {
          auto it = arrivals.find(task.message);
          if (it == arrivals.end())
            break;
          double ready = std::max(start, it->second);
          result.waiting[s] += ready - start;
          clock[s] = ready + task.seconds;
          result.communicate[s] += task.seconds;
        } else {
          clock[s] = start + task.seconds;
          if (task.kind == SimTask::Kind::Compute)
            result.compute[s] += task.seconds;
          else
            result.communicate[s] += task.seconds;
          if (task.kind == SimTask::Kind::Send)
            arrivals[task.message] = start + task.transfer;
        }
        result.intervals[s].push_back({start, clock[s]});
        progress = true;
      }
    }
  }
  for (size_t s = 0; s < numStages; ++s) {
    if (next[s] < stages[s].size()) {
      std::string blocked;
      for (size_t t = 0; t < numStages; ++t)
        if (next[t] < stages[t].size())
          blocked += llvm::formatv("{0}stage {1} at '{2}'", blocked.empty() ? "" : ", ", t,
                                   stages[t][next[t]].name)
                         .str();
      return llvm::createStringError("the schedule deadlocks: " + blocked);
    }
    result.finish[s] = clock[s];
    result.stepSeconds = std::max(result.stepSeconds, clock[s]);
  }
  return result;
}
