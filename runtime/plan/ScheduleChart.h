//===- ScheduleChart.h - A pipeline schedule as a picture -------*- C++ -*-===//
//
// `mtc inspect PLAN --schedule` draws one schedule of the plan's pipeline from the compute
// tasks' `start` slots (the compiler's unit-time simulation: F = B = W = 1, BW = 2), without
// simulating again:
//
//   - a text grid: a row per stage, a column per time slot, each compute task's letter (F, B
//     for the whole backward or its input half, W for the weight half) and micro-batch in the
//     slots it covers ("." where the stage idles), with the chunk after a ':' when stages hold
//     several chunks; each row ends with the stage's theoretical bubble and in-flight bound;
//   - an SVG of the same: a box per compute task, coloured by kind.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_PLAN_SCHEDULECHART_H
#define MTC_RUNTIME_PLAN_SCHEDULECHART_H

#include "runtime/plan/PipelineSchedule.h"

#include <string>

namespace mtc::rt {

/// The text grid of `schedule`, one of `plan`'s schedules (lines end in '\n').
std::string scheduleGrid(const PipelinePlan &plan, const PipelineSchedule &schedule);

/// The same schedule as a standalone SVG document.
std::string scheduleSvg(const PipelinePlan &plan, const PipelineSchedule &schedule);

} // namespace mtc::rt

#endif // MTC_RUNTIME_PLAN_SCHEDULECHART_H
