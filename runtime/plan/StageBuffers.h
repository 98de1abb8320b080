//===- StageBuffers.h - What a pipeline stage's task list holds --*- C++ -*-===//
//
// The buffers one pipeline stage holds while it runs its task list (PipelineSchedule.h) as
// the runtime runs it (runtime/exec/PipelineTrainer.h and ScheduleExecutor.h): what each
// chunk's forward keeps for its backward (residuals, part of them for the weight half of a
// split backward), what a split backward's input half stashes for its weight half, and the
// messages: each received activation or gradient from when its receive is posted (up to
// kReceiveLookahead compute tasks ahead) until the task that consumes it has returned, each
// sent one from the task that writes it until it is known to have arrived (sendReleases,
// PipelineSchedule.h: before the compute task reading the peer's next message back, else
// the step's end). A forward whose next chunk is on
// the same stage writes straight into that chunk's input, a backward into the previous
// chunk's output gradient.
//
// One walk serves the compiler's predicted stage memory in a plan (compiler/plan/
// PipelinePlan.cpp, from the chunk functions' buffer sizes) and the layout search's
// composed memory (compiler/costmodel/LayoutSearch.cpp, from one layer's sizes), so the two
// cannot disagree on what the schedule keeps.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_PLAN_STAGEBUFFERS_H
#define MTC_RUNTIME_PLAN_STAGEBUFFERS_H

#include "runtime/plan/PipelineSchedule.h"

#include <cstdint>
#include <vector>

namespace mtc::rt {

/// Per chunk (indexed by chunk; missing entries count as 0): the bytes of the residuals a
/// forward keeps, of those the weight half of a split backward reads (a part of them), of
/// the stash the input half leaves for the weight half, and of the activation the forward
/// hands the next chunk (the last chunk's, none).
struct ChunkBufferBytes {
  std::vector<int64_t> residual, weightResidual, stash, activation;
};

struct StageBufferPeaks {
  /// The most bytes of residuals and stash held at once.
  int64_t saved = 0;
  /// The most bytes of every buffer held at once: residuals, stash and messages.
  int64_t held = 0;
};

/// Walks the task list of `stage` of `stages` (a schedule's lists: where its sends are freed
/// depends on its peers' lists), whose chunks sit on the stages `chunkStages`.
StageBufferPeaks simulateStageBuffers(const std::vector<StageTasks> &stages, int64_t stage,
                                      const std::vector<int64_t> &chunkStages,
                                      const ChunkBufferBytes &bytes);

} // namespace mtc::rt

#endif // MTC_RUNTIME_PLAN_STAGEBUFFERS_H
