//===- PipelineJSON.cpp - the plan's "pipeline" object --------------------===//

#include "compiler/pipeline/PipelineJSON.h"

#include "dialects/mts/IR/MTSSimulation.h"

#include <cmath>

using namespace mlir;
using namespace mtc;
using namespace mtc::mts;

static llvm::json::Array toJSONArray(ArrayRef<int64_t> values) {
  llvm::json::Array array;
  for (int64_t value : values)
    array.push_back(value);
  return array;
}

llvm::json::Object pipeline::scheduleToJSON(ScheduleOp schedule) {
  ScheduleSimulation run = simulateSchedule(schedule);
  llvm::json::Array stages;
  for (auto [stageOp, simulated] : llvm::zip_equal(schedule.getStageOps(), run.stages)) {
    llvm::json::Array tasks;
    for (auto [op, start] : llvm::zip_equal(stageOp.getBody().front(), simulated.starts)) {
      Task task = *getTask(&op);
      llvm::json::Object entry{{"op", stringifyTaskKind(task.kind)}};
      if (task.chunk >= 0) {
        entry["chunk"] = task.chunk;
        entry["micro_batch"] = task.microBatch;
      }
      if (task.peer >= 0)
        entry["peer"] = task.peer;
      if (isComputeTask(task.kind))
        entry["start"] = static_cast<int64_t>(std::llround(start));
      tasks.push_back(std::move(entry));
    }
    stages.push_back(llvm::json::Object{{"bubble_fraction", simulated.bubbleFraction},
                                        {"in_flight", simulated.peakInFlight},
                                        {"tasks", std::move(tasks)}});
  }
  return llvm::json::Object{{"micro_batches", static_cast<int64_t>(schedule.getMicroBatches())},
                            {"stages", std::move(stages)}};
}

FailureOr<llvm::json::Object> pipeline::pipelineToJSON(ArrayRef<ScheduleOp> schedules,
                                                       ArrayRef<int64_t> chunkLayers) {
  if (schedules.empty())
    return failure();
  ScheduleOp first = schedules.front();
  int64_t chunks = first.getStages() * first.getVirtualStages();
  if (static_cast<int64_t>(chunkLayers.size()) != chunks)
    return first.emitOpError() << "has " << chunks << " chunks, but the plan gives the layers of "
                               << chunkLayers.size();
  SmallVector<ScheduleOp> sorted(schedules);
  llvm::sort(sorted, [](ScheduleOp a, ScheduleOp b) {
    return a.getMicroBatches() < b.getMicroBatches();
  });
  llvm::json::Array entries;
  for (auto [index, schedule] : llvm::enumerate(sorted)) {
    if (schedule.getKind() != first.getKind() || schedule.getStages() != first.getStages() ||
        schedule.getVirtualStages() != first.getVirtualStages() ||
        schedule.getChunkStages() != first.getChunkStages()) {
      InFlightDiagnostic diag = schedule.emitOpError()
                                << "is another pipeline than the plan's first schedule (kind, "
                                   "stages, virtual stages and chunk placement must agree)";
      diag.attachNote(first.getLoc()) << "the first schedule";
      return diag;
    }
    if (index > 0 && sorted[index - 1].getMicroBatches() == schedule.getMicroBatches())
      return schedule.emitOpError() << "is a second schedule for " << schedule.getMicroBatches()
                                    << " micro-batches";
    entries.push_back(scheduleToJSON(schedule));
  }
  return llvm::json::Object{
      {"stages", static_cast<int64_t>(first.getStages())},
      {"virtual_stages", static_cast<int64_t>(first.getVirtualStages())},
      {"schedule", first.getKind()},
      {"chunk_layers", toJSONArray(chunkLayers)},
      {"chunk_stages", toJSONArray(first.getChunkStages())},
      {"schedules", std::move(entries)},
  };
}
