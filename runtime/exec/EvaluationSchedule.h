//===- EvaluationSchedule.h - Forward-only task lists for evaluation -*- C++ -*-===//
//
// Evaluation of a pipeline plan (mtrun --eval-interval, PipelineTrainer::evaluate) runs only
// the forward of every chunk and micro-batch: no backward, no gradients, no optimizer. Its
// task lists are the runtime's own, derived from the plan's pipeline (the chunks, and the
// stage that runs each), so that the ScheduleExecutor runs them over the same links as the
// training steps. Stage s's list is, for every micro-batch i in order and every chunk c of
// the stage in increasing order:
//
//   recv_activation c i   when chunk c - 1 runs on another stage
//   forward c i
//   send_activation c i   when chunk c + 1 runs on another stage
//
// Every stage runs its forwards in the one order (i, c), and each forward reads only the
// output of (i, c - 1), which comes earlier in it: with sends that never block and receives
// that do, no stage waits for a task that waits for it, and the messages on each link go in
// the order they are received. Interleaved (chunk c on stage c % P) and V-shaped (zb-v)
// placements alike: consecutive chunks on one stage hand over locally.
//
// A forward's `start` is its unit-time slot (it starts when its stage is free and the previous
// chunk's forward of its micro-batch has ended) and `bubble_fraction` each stage's idle share
// of the span of those slots, as the plan's schedules give them for training.
//
// The executor counts a forward's activations as held until its backward, which evaluation
// never runs, so a list's `in_flight` is its number of forwards; the StageCompute drops what
// a forward saves for its backward as soon as it returns.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_EVALUATIONSCHEDULE_H
#define MTC_RUNTIME_EXEC_EVALUATIONSCHEDULE_H

#include "runtime/plan/PipelineSchedule.h"
#include "runtime/support/Error.h"

#include <cstdint>

namespace mtc::rt {

/// The forward-only task lists of `pipeline`'s stages for `microBatches` micro-batches (see
/// the file comment). Fails when the pipeline's chunk placement is not one of its stages'.
Expected<PipelineSchedule> evaluationSchedule(const PipelinePlan &pipeline, int64_t microBatches);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_EVALUATIONSCHEDULE_H
