//===- ScheduleChart.cpp - A pipeline schedule as a picture ---------------===//

#include "runtime/plan/ScheduleChart.h"

#include <algorithm>
#include <cstdio>

namespace mtc::rt {

namespace {

/// "F", "B" or "W" (the whole backward and its input half are both B: a schedule has one or
/// the other).
char letter(TaskOp op) {
  switch (op) {
  case TaskOp::Forward:
    return 'F';
  case TaskOp::BackwardWeight:
    return 'W';
  default:
    return 'B';
  }
}

std::string label(const PipelinePlan &plan, const ScheduleTask &t) {
  std::string s = concat(letter(t.op), t.microBatch);
  if (plan.virtualStages > 1)
    s.append(concat(':', t.chunk));
  return s;
}

/// The last slot any stage is busy in, plus one.
int64_t makespan(const PipelineSchedule &schedule) {
  int64_t end = 0;
  for (const StageTasks &s : schedule.stages)
    for (const ScheduleTask &t : s.tasks)
      if (isComputeTask(t.op))
        end = std::max(end, t.start + unitSlots(t.op));
  return end;
}

std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string padRight(std::string s, size_t width) {
  if (s.size() < width)
    s.append(width - s.size(), ' ');
  return s;
}

} // namespace

std::string scheduleGrid(const PipelinePlan &plan, const PipelineSchedule &schedule) {
  const int64_t slots = makespan(schedule);
  // Every cell as wide as the widest label (and the slot numbers of the header).
  size_t width = concat(slots > 0 ? slots - 1 : 0).size();
  for (const StageTasks &s : schedule.stages)
    for (const ScheduleTask &t : s.tasks)
      if (isComputeTask(t.op))
        width = std::max(width, label(plan, t).size());
  const std::string rowName = concat("stage ", schedule.stages.size() - 1);

  std::string out = concat(plan.schedule, ": ", plan.stages, " stage",
                           plan.stages == 1 ? "" : "s");
  if (plan.virtualStages > 1)
    out.append(concat(" x ", plan.virtualStages, " chunks"));
  out.append(concat(", ", schedule.microBatches, " micro-batch",
                    schedule.microBatches == 1 ? "" : "es", ", ", slots, " slots (F forward, B "
                    "backward, W weight gradient; a whole backward takes 2 slots)\n"));
  out.append(padRight("slot", rowName.size()));
  std::string header;
  for (int64_t i = 0; i < slots; ++i)
    header.append(" ").append(padRight(concat(i), width));
  header.erase(header.find_last_not_of(' ') + 1);
  out.append(header).append("\n");
  for (size_t st = 0; st < schedule.stages.size(); ++st) {
    const StageTasks &stage = schedule.stages[st];
    std::vector<std::string> cells(static_cast<size_t>(slots), ".");
    for (const ScheduleTask &t : stage.tasks)
      if (isComputeTask(t.op))
        for (int64_t k = 0; k < unitSlots(t.op); ++k)
          cells[static_cast<size_t>(t.start + k)] = label(plan, t);
    out.append(padRight(concat("stage ", st), rowName.size()));
    for (const std::string &c : cells)
      out.append(" ").append(padRight(c, width));
    out.append(concat("  bubble ", fixed(stage.bubbleFraction, 3), ", in flight ",
                      stage.inFlight, "\n"));
  }
  return out;
}

std::string scheduleSvg(const PipelinePlan &plan, const PipelineSchedule &schedule) {
  constexpr int kSlot = 36, kRow = 30, kLeft = 70, kTop = 30;
  const int64_t slots = makespan(schedule);
  const size_t rows = schedule.stages.size();
  const int64_t width = kLeft + slots * kSlot + 10, height = kTop + int64_t(rows) * kRow + 10;
  std::string out = concat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", width, "\" height=\"", height,
      "\" font-family=\"monospace\" font-size=\"12\">\n", "<title>", plan.schedule, ": ",
      plan.stages, " stages, ", schedule.microBatches, " micro-batches</title>\n",
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
  out.append(concat("<text x=\"", kLeft, "\" y=\"18\">", plan.schedule, ", ",
                    schedule.microBatches, " micro-batches (F forward, B backward, W weight "
                    "gradient)</text>\n"));
  for (size_t st = 0; st < rows; ++st) {
    const StageTasks &stage = schedule.stages[st];
    int64_t y = kTop + int64_t(st) * kRow;
    out.append(concat("<text x=\"4\" y=\"", y + 19, "\">stage ", st, "</text>\n"));
    for (const ScheduleTask &t : stage.tasks) {
      if (!isComputeTask(t.op))
        continue;
      const char *fill = t.op == TaskOp::Forward          ? "#6fa8dc"
                         : t.op == TaskOp::BackwardWeight ? "#f6b26b"
                         : t.op == TaskOp::BackwardInput  ? "#93c47d"
                                                          : "#6aa84f";
      int64_t x = kLeft + t.start * kSlot, w = unitSlots(t.op) * kSlot;
      out.append(concat("<rect x=\"", x, "\" y=\"", y + 2, "\" width=\"", w - 2,
                        "\" height=\"", kRow - 4, "\" fill=\"", fill,
                        "\" stroke=\"#333\"><title>", taskOpName(t.op), " chunk ", t.chunk,
                        " micro-batch ", t.microBatch, " (slot ", t.start, ")</title></rect>\n"));
      out.append(concat("<text x=\"", x + 4, "\" y=\"", y + 19, "\">", label(plan, t),
                        "</text>\n"));
    }
  }
  out.append("</svg>\n");
  return out;
}

} // namespace mtc::rt
