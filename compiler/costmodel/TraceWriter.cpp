//===- TraceWriter.cpp - the predicted step as a Chrome trace -------------===//

#include "compiler/costmodel/TraceWriter.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mtc::costmodel;
namespace json = llvm::json;

namespace {

llvm::StringRef category(SimTask::Kind kind) {
  switch (kind) {
  case SimTask::Kind::Compute:
    return "compute";
  case SimTask::Kind::Communicate:
    return "collective";
  case SimTask::Kind::Send:
    return "send";
  case SimTask::Kind::Receive:
    return "receive";
  }
  return "task";
}

} // namespace

json::Value mtc::costmodel::simulationTrace(const Simulation &sim) {
  json::Array events;
  for (size_t s = 0; s < sim.stages.size(); ++s) {
    events.push_back(
        json::Object{{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", 0},
                     {"tid", static_cast<int64_t>(s)},
                     {"args", json::Object{{"name", llvm::formatv("stage {0}", s).str()}}}});
    for (auto [task, interval] : llvm::zip_equal(sim.stages[s], sim.timeline.intervals[s])) {
      // A receive that did not wait takes no time: nothing to draw.
      if (interval.end <= interval.start)
        continue;
      events.push_back(json::Object{{"name", task.name},
                                    {"cat", category(task.kind)},
                                    {"ph", "X"},
                                    {"pid", 0},
                                    {"tid", static_cast<int64_t>(s)},
                                    {"ts", interval.start * 1e6},
                                    {"dur", (interval.end - interval.start) * 1e6}});
    }
  }
  return json::Object{
      {"traceEvents", std::move(events)},
      {"displayTimeUnit", "ms"},
      {"otherData", json::Object{{"source", "mtc simulate"}, {"step_seconds", sim.stepSeconds}}}};
}
