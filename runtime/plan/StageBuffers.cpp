//===- StageBuffers.cpp - What a pipeline stage's task list holds ---------===//

#include "runtime/plan/StageBuffers.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace mtc::rt {
namespace {

/// Bytes of chunk `chunk` in `bytes`, 0 outside it.
int64_t of(const std::vector<int64_t> &bytes, int64_t chunk) {
  return chunk >= 0 && chunk < static_cast<int64_t>(bytes.size()) ? bytes[size_t(chunk)] : 0;
}

class Walk {
public:
  Walk(int64_t stage, const std::vector<int64_t> &chunkStages, const ChunkBufferBytes &bytes)
      : stage(stage), chunkStages(chunkStages), bytes(bytes) {}

  /// The buffer of a send or receive task (PipelineTrainer's messages).
  void message(TaskOp op, int64_t c, int64_t i);
  /// The buffers a compute task writes and frees (PipelineTrainer's chunk calls).
  void compute(TaskOp op, int64_t c, int64_t i);

  StageBufferPeaks peaks;

private:
  /// What a buffer holds, as PipelineTrainer keys them: the residuals backward_input frees
  /// and those backward_weight reads are two.
  enum class Held { Input, Output, InputGrad, OutputGrad, Residual, WeightResidual, Stash };
  using Key = std::tuple<Held, int64_t, int64_t>; // what, chunk, micro-batch

  static bool saved(Held what) {
    return what == Held::Residual || what == Held::WeightResidual || what == Held::Stash;
  }
  void hold(Key key, int64_t size) {
    if (!live.try_emplace(key, size).second)
      return;
    held += size;
    peaks.held = std::max(peaks.held, held);
    if (saved(std::get<0>(key))) {
      savedNow += size;
      peaks.saved = std::max(peaks.saved, savedNow);
    }
  }
  void release(Key key) {
    auto it = live.find(key);
    if (it == live.end())
      return;
    held -= it->second;
    if (saved(std::get<0>(key)))
      savedNow -= it->second;
    live.erase(it);
  }
  bool local(int64_t chunk) const {
    return chunk >= 0 && chunk < static_cast<int64_t>(chunkStages.size()) &&
           chunkStages[size_t(chunk)] == stage;
  }

  int64_t stage;
  const std::vector<int64_t> &chunkStages;
  const ChunkBufferBytes &bytes;
  std::map<Key, int64_t> live;
  int64_t held = 0, savedNow = 0;
};

void Walk::message(TaskOp op, int64_t c, int64_t i) {
  if (op == TaskOp::SendActivation)
    hold({Held::Output, c, i}, of(bytes.activation, c));
  else if (op == TaskOp::RecvActivation)
    hold({Held::Input, c, i}, of(bytes.activation, c - 1));
  else if (op == TaskOp::SendGradient)
    hold({Held::InputGrad, c, i}, of(bytes.activation, c - 1));
  else if (op == TaskOp::RecvGradient)
    hold({Held::OutputGrad, c, i}, of(bytes.activation, c));
}

void Walk::compute(TaskOp op, int64_t c, int64_t i) {
  int64_t weightResidual = of(bytes.weightResidual, c);
  if (op == TaskOp::Forward) {
    // Its activations go straight into the next chunk's input when that chunk is local.
    if (of(bytes.activation, c) > 0)
      hold(local(c + 1) ? Key{Held::Input, c + 1, i} : Key{Held::Output, c, i},
           of(bytes.activation, c));
    hold({Held::Residual, c, i}, of(bytes.residual, c) - weightResidual);
    hold({Held::WeightResidual, c, i}, weightResidual);
    release({Held::Input, c, i});
    return;
  }
  // backward and backward_input write the gradient of the chunk's input (none for the first
  // chunk), into the previous chunk's when that chunk is local.
  if ((op == TaskOp::Backward || op == TaskOp::BackwardInput) && c > 0)
    hold(local(c - 1) ? Key{Held::OutputGrad, c - 1, i} : Key{Held::InputGrad, c, i},
         of(bytes.activation, c - 1));
  if (op == TaskOp::BackwardInput)
    hold({Held::Stash, c, i}, of(bytes.stash, c));
  release({Held::OutputGrad, c, i});
  release({Held::Residual, c, i});
  if (op != TaskOp::BackwardInput) {
    release({Held::WeightResidual, c, i});
    release({Held::Stash, c, i});
  }
}

} // namespace

StageBufferPeaks simulateStageBuffers(const std::vector<ScheduleTask> &tasks, int64_t stage,
                                      const std::vector<int64_t> &chunkStages,
                                      const ChunkBufferBytes &bytes) {
  Walk walk(stage, chunkStages, bytes);
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
    // The buffer of the send that follows it is taken first.
    TaskOp send = t.op == TaskOp::Forward ? TaskOp::SendActivation : TaskOp::SendGradient;
    if (t.op != TaskOp::BackwardWeight)
      for (size_t later = current + 1; later < tasks.size(); ++later)
        if (tasks[later].op == send && tasks[later].chunk == t.chunk &&
            tasks[later].microBatch == t.microBatch) {
          walk.message(send, t.chunk, t.microBatch);
          break;
        }
    walk.compute(t.op, t.chunk, t.microBatch);
  }
  return walk.peaks;
}

} // namespace mtc::rt
