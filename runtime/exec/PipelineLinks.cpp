//===- PipelineLinks.cpp - The point-to-point links between pipeline stages ---===//

#include "runtime/exec/PipelineLinks.h"

namespace mtc::rt {

Expected<PipelineLinks> PipelineLinks::create(Communicator &pipeline,
                                              std::span<const PipelineSchedule> schedules) {
  const size_t stages = static_cast<size_t>(pipeline.size());
  std::vector<char> sends(stages * stages, 0); // sends[a * stages + b]: a sends to b
  for (const PipelineSchedule &schedule : schedules) {
    if (schedule.stages.size() != stages)
      return makeError("the pipeline group has ", stages, " ranks, but the schedule for ",
                       schedule.microBatches, " micro-batches has ", schedule.stages.size(),
                       " stages");
    for (size_t a = 0; a < stages; ++a)
      for (const ScheduleTask &t : schedule.stages[a].tasks)
        if (isSendTask(t.op))
          sends[a * stages + static_cast<size_t>(t.peer)] = 1;
  }
  PipelineLinks links;
  links.stage_ = pipeline.rank();
  links.to_.resize(stages);
  links.from_.resize(stages);
  for (size_t a = 0; a < stages; ++a)
    for (size_t b = 0; b < stages; ++b) {
      if (!sends[a * stages + b])
        continue;
      Expected<std::unique_ptr<Communicator>> link =
          pipeline.subgroup({static_cast<int>(a), static_cast<int>(b)});
      if (!link)
        return link.takeError().withContext(
            concat("connecting the pipeline link from stage ", a, " to stage ", b));
      if (static_cast<size_t>(links.stage_) == a)
        links.to_[b] = std::move(*link);
      else if (static_cast<size_t>(links.stage_) == b)
        links.from_[a] = std::move(*link);
    }
  return links;
}

uint64_t PipelineLinks::bytesSent() const {
  uint64_t total = 0;
  for (const auto *side : {&to_, &from_})
    for (const std::unique_ptr<Communicator> &link : *side)
      if (link)
        total += link->counters().totalBytesSent();
  return total;
}

} // namespace mtc::rt
