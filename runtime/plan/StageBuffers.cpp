//===- StageBuffers.cpp - What a pipeline stage's task list holds ---------===//

#include "runtime/plan/StageBuffers.h"

#include <algorithm>

namespace mtc::rt {
namespace {

/// Bytes of chunk `chunk` in `bytes`, 0 outside it.
int64_t of(const std::vector<int64_t> &bytes, int64_t chunk) {
  return chunk >= 0 && chunk < static_cast<int64_t>(bytes.size()) ? bytes[size_t(chunk)] : 0;
}

class Walk {
public:
  /// `slots[c]`: chunk c's index in the walk's table (-1 for the chunks the stage never
  /// touches), of `chunks` indices.
  Walk(int64_t stage, const std::vector<int64_t> &chunkStages, const ChunkBufferBytes &bytes,
       const std::vector<int64_t> &slots, int64_t chunks, int64_t microBatches)
      : stage(stage), chunkStages(chunkStages), bytes(bytes), slots(slots),
        chunks(chunks), microBatches(microBatches),
        live(static_cast<size_t>(kHeldKinds * chunks * microBatches), kFree) {}

  /// The buffer of a send or receive task (PipelineTrainer's messages).
  void message(TaskOp op, int64_t c, int64_t i);
  /// The buffers a compute task writes and frees (PipelineTrainer's chunk calls).
  void compute(TaskOp op, int64_t c, int64_t i);
  /// Frees the buffer of a send known to have arrived (sendReleases).
  void sent(TaskOp op, int64_t c, int64_t i) {
    release(op == TaskOp::SendActivation ? Held::Output : Held::InputGrad, c, i);
  }

  StageBufferPeaks peaks;

private:
  /// What a buffer holds, as PipelineTrainer keys them: the residuals backward_input frees
  /// and those backward_weight reads are two.
  enum class Held { Input, Output, InputGrad, OutputGrad, Residual, WeightResidual, Stash };
  static constexpr int64_t kHeldKinds = 7;
  static constexpr int64_t kFree = -1;

  static bool saved(Held what) {
    return what == Held::Residual || what == Held::WeightResidual || what == Held::Stash;
  }
  /// The slot of (what, chunk, micro-batch) in `live` (the search walks many large lists:
  /// a flat table, not a map).
  size_t slot(Held what, int64_t c, int64_t i) const {
    return static_cast<size_t>(
        (static_cast<int64_t>(what) * chunks + slots[size_t(c)]) * microBatches + i);
  }
  void hold(Held what, int64_t c, int64_t i, int64_t size) {
    int64_t &entry = live[slot(what, c, i)];
    if (entry != kFree)
      return;
    entry = size;
    held += size;
    peaks.held = std::max(peaks.held, held);
    if (saved(what)) {
      savedNow += size;
      peaks.saved = std::max(peaks.saved, savedNow);
    }
  }
  void release(Held what, int64_t c, int64_t i) {
    int64_t &entry = live[slot(what, c, i)];
    if (entry == kFree)
      return;
    held -= entry;
    if (saved(what))
      savedNow -= entry;
    entry = kFree;
  }
  bool local(int64_t chunk) const {
    return chunk >= 0 && chunk < static_cast<int64_t>(chunkStages.size()) &&
           chunkStages[size_t(chunk)] == stage;
  }

  int64_t stage;
  const std::vector<int64_t> &chunkStages;
  const ChunkBufferBytes &bytes;
  const std::vector<int64_t> &slots;
  int64_t chunks, microBatches;
  /// The bytes of each buffer held, kFree where none.
  std::vector<int64_t> live;
  int64_t held = 0, savedNow = 0;
};

void Walk::message(TaskOp op, int64_t c, int64_t i) {
  if (op == TaskOp::SendActivation)
    hold(Held::Output, c, i, of(bytes.activation, c));
  else if (op == TaskOp::RecvActivation)
    hold(Held::Input, c, i, of(bytes.activation, c - 1));
  else if (op == TaskOp::SendGradient)
    hold(Held::InputGrad, c, i, of(bytes.activation, c - 1));
  else if (op == TaskOp::RecvGradient)
    hold(Held::OutputGrad, c, i, of(bytes.activation, c));
}

void Walk::compute(TaskOp op, int64_t c, int64_t i) {
  int64_t weightResidual = of(bytes.weightResidual, c);
  if (op == TaskOp::Forward) {
    // Its activations go straight into the next chunk's input when that chunk is local.
    if (of(bytes.activation, c) > 0) {
      if (local(c + 1))
        hold(Held::Input, c + 1, i, of(bytes.activation, c));
      else
        hold(Held::Output, c, i, of(bytes.activation, c));
    }
    hold(Held::Residual, c, i, of(bytes.residual, c) - weightResidual);
    hold(Held::WeightResidual, c, i, weightResidual);
    release(Held::Input, c, i);
    return;
  }
  // backward and backward_input write the gradient of the chunk's input (none for the first
  // chunk), into the previous chunk's when that chunk is local.
  if ((op == TaskOp::Backward || op == TaskOp::BackwardInput) && c > 0) {
    if (local(c - 1))
      hold(Held::OutputGrad, c - 1, i, of(bytes.activation, c - 1));
    else
      hold(Held::InputGrad, c, i, of(bytes.activation, c - 1));
  }
  if (op == TaskOp::BackwardInput)
    hold(Held::Stash, c, i, of(bytes.stash, c));
  release(Held::OutputGrad, c, i);
  release(Held::Residual, c, i);
  if (op != TaskOp::BackwardInput) {
    release(Held::WeightResidual, c, i);
    release(Held::Stash, c, i);
  }
}

} // namespace

StageBufferPeaks simulateStageBuffers(const std::vector<StageTasks> &stages, int64_t stage,
                                      const std::vector<int64_t> &chunkStages,
                                      const ChunkBufferBytes &bytes) {
  const std::vector<ScheduleTask> &tasks = stages[size_t(stage)].tasks;
  // The walk keys its buffers by the chunks the stage's tasks name and their neighbours (a
  // forward writes the next chunk's input, a backward the previous one's output gradient).
  int64_t maxChunk = static_cast<int64_t>(chunkStages.size()), microBatches = 1;
  for (const ScheduleTask &t : tasks) {
    maxChunk = std::max<int64_t>(maxChunk, t.chunk + 2);
    microBatches = std::max<int64_t>(microBatches, t.microBatch + 1);
  }
  std::vector<int64_t> slots(static_cast<size_t>(maxChunk), -1);
  int64_t chunks = 0;
  for (const ScheduleTask &t : tasks)
    for (int64_t c = std::max(0, t.chunk - 1); c <= t.chunk + 1; ++c)
      if (slots[size_t(c)] < 0)
        slots[size_t(c)] = chunks++;
  // Where each send is in the list, by (chunk, micro-batch): the buffer of the send that
  // follows a compute task is taken before it runs.
  auto sendSlot = [&](TaskOp op, int64_t c, int64_t i) {
    return static_cast<size_t>(
        ((op == TaskOp::SendActivation ? 0 : 1) * chunks + slots[size_t(c)]) * microBatches + i);
  };
  std::vector<size_t> sendAt(static_cast<size_t>(2 * chunks * microBatches), tasks.size());
  for (size_t k = tasks.size(); k-- > 0;)
    if (isSendTask(tasks[k].op))
      sendAt[sendSlot(tasks[k].op, tasks[k].chunk, tasks[k].microBatch)] = k;

  // The sends each compute task frees before it runs (the executor's releases).
  std::vector<size_t> releases = sendReleases(stages, stage);
  std::vector<std::vector<size_t>> releasedAt(tasks.size());
  for (size_t k = 0; k < tasks.size(); ++k)
    if (releases[k] < tasks.size())
      releasedAt[releases[k]].push_back(k);

  Walk walk(stage, chunkStages, bytes, slots, chunks, microBatches);
  size_t nextReceive = 0;
  for (size_t current = 0; current < tasks.size(); ++current) {
    // The executor posts the receives ahead, taking their buffers then.
    for (size_t limit = receiveWindowEnd(tasks, current); nextReceive < limit; ++nextReceive)
      if (isRecvTask(tasks[nextReceive].op))
        walk.message(tasks[nextReceive].op, tasks[nextReceive].chunk,
                     tasks[nextReceive].microBatch);
    const ScheduleTask &t = tasks[current];
    if (!isComputeTask(t.op)) {
      walk.message(t.op, t.chunk, t.microBatch);
      continue;
    }
    for (size_t k : releasedAt[current])
      walk.sent(tasks[k].op, tasks[k].chunk, tasks[k].microBatch);
    TaskOp send = t.op == TaskOp::Forward ? TaskOp::SendActivation : TaskOp::SendGradient;
    if (t.op != TaskOp::BackwardWeight) {
      size_t at = sendAt[sendSlot(send, t.chunk, t.microBatch)];
      if (at > current && at < tasks.size())
        walk.message(send, t.chunk, t.microBatch);
    }
    walk.compute(t.op, t.chunk, t.microBatch);
  }
  return walk.peaks;
}

} // namespace mtc::rt
