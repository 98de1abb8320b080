//===- EvaluationSchedule.cpp - Forward-only task lists for evaluation ----===//

#include "runtime/exec/EvaluationSchedule.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace mtc::rt {

Expected<PipelineSchedule> evaluationSchedule(const PipelinePlan &pipeline, int64_t microBatches) {
  const std::vector<int64_t> &chunkStages = pipeline.chunkStages;
  const int64_t chunks = static_cast<int64_t>(chunkStages.size());
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (pipeline.stages < 1 || chunks < 1)
    return makeError("the pipeline has ", pipeline.stages, " stages and ", chunks,
                     " chunks: nothing to evaluate with");
  if (microBatches < 1 || microBatches > kMax || chunks > kMax)
    return makeError("cannot evaluate ", microBatches, " micro-batches of ", chunks, " chunks");
  for (int64_t c = 0; c < chunks; ++c)
    if (chunkStages[size_t(c)] < 0 || chunkStages[size_t(c)] >= pipeline.stages)
      return makeError("chunk ", c, " runs on stage ", chunkStages[size_t(c)], ", not one of the ",
                       pipeline.stages, " stages");
  PipelineSchedule schedule;
  schedule.microBatches = microBatches;
  schedule.stages.resize(size_t(pipeline.stages));
  auto stageOf = [&](int64_t c) { return chunkStages[size_t(c)]; };
  // The unit-time slots (one per forward): a forward starts when its stage is free and the
  // previous chunk's forward of the micro-batch has ended.
  std::vector<int64_t> stageFree(size_t(pipeline.stages), 0), chunkEnd(size_t(chunks), 0);
  for (int64_t i = 0; i < microBatches; ++i)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t s = stageOf(c);
      StageTasks &stage = schedule.stages[size_t(s)];
      auto task = [&](TaskOp op, int64_t peer) -> ScheduleTask & {
        return stage.tasks.emplace_back(ScheduleTask{
            op, static_cast<int32_t>(c), static_cast<int32_t>(i), static_cast<int32_t>(peer)});
      };
      if (c > 0 && stageOf(c - 1) != s)
        task(TaskOp::RecvActivation, stageOf(c - 1));
      const int64_t start = std::max(stageFree[size_t(s)], c > 0 ? chunkEnd[size_t(c - 1)] : 0);
      task(TaskOp::Forward, -1).start = start;
      stageFree[size_t(s)] = chunkEnd[size_t(c)] = start + unitSlots(TaskOp::Forward);
      ++stage.inFlight;
      if (c + 1 < chunks && stageOf(c + 1) != s)
        task(TaskOp::SendActivation, stageOf(c + 1));
    }
  // Each stage's idle share of the span from the first forward to the last.
  const int64_t span = *std::max_element(stageFree.begin(), stageFree.end());
  for (StageTasks &stage : schedule.stages)
    stage.bubbleFraction =
        span > 0 ? static_cast<double>(span - stage.inFlight) / static_cast<double>(span) : 0.0;
  return schedule;
}

} // namespace mtc::rt
