//===- Schedules.cpp - pipeline schedule generators -----------------------===//

#include "compiler/pipeline/Schedules.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>

using namespace mlir;
using namespace mtc;
using namespace mtc::mts;

namespace {

/// Each stage's compute tasks in order.
using ComputeOrder = SmallVector<SmallVector<Task>>;

Task forward(int64_t chunk, int64_t microBatch) { return {TaskKind::Forward, chunk, microBatch}; }
Task backward(int64_t chunk, int64_t microBatch) { return {TaskKind::Backward, chunk, microBatch}; }

/// All forwards, then all backwards, in micro-batch order.
ComputeOrder gpipeOrder(int64_t stages, int64_t microBatches) {
  ComputeOrder order(stages);
  for (int64_t stage = 0; stage < stages; ++stage) {
    for (int64_t i = 0; i < microBatches; ++i)
      order[stage].push_back(forward(stage, i));
    for (int64_t i = 0; i < microBatches; ++i)
      order[stage].push_back(backward(stage, i));
  }
  return order;
}

/// Megatron's forward_backward_pipelining_without_interleaving: min(P - s - 1, m)
/// warm-up forwards, then one forward and one backward at a time, then the remaining
/// backwards. `split` makes every backward a B, and stage s runs W of micro-batch i - s
/// right after B of micro-batch i (zb-h1), the rest at the end.
ComputeOrder oneFOneBOrder(int64_t stages, int64_t microBatches, bool split) {
  ComputeOrder order(stages);
  for (int64_t stage = 0; stage < stages; ++stage) {
    SmallVector<Task> &tasks = order[stage];
    int64_t warmup = std::min(stages - stage - 1, microBatches);
    int64_t weights = 0; // W tasks placed so far
    auto addBackward = [&](int64_t i) {
      if (!split) {
        tasks.push_back(backward(stage, i));
        return;
      }
      tasks.push_back({TaskKind::BackwardInput, stage, i});
      if (i >= stage)
        tasks.push_back({TaskKind::BackwardWeight, stage, weights++});
    };
    for (int64_t i = 0; i < warmup; ++i)
      tasks.push_back(forward(stage, i));
    for (int64_t i = 0; i < microBatches - warmup; ++i) {
      tasks.push_back(forward(stage, warmup + i));
      addBackward(i);
    }
    for (int64_t i = microBatches - warmup; i < microBatches; ++i)
      addBackward(i);
    while (split && weights < microBatches)
      tasks.push_back({TaskKind::BackwardWeight, stage, weights++});
  }
  return order;
}

/// Megatron's forward_backward_pipelining_with_interleaving (m a multiple of P): the
/// k-th forward of a stage is micro-batch (k / (P V)) P + k % P of its local chunk
/// (k % (P V)) / P; backwards likewise with the local chunks reversed. Warm-up:
/// (P - s - 1) * 2 + (V - 1) * P forwards, or all of them when m = P.
ComputeOrder interleavedOrder(int64_t stages, int64_t virtualStages, int64_t microBatches) {
  ComputeOrder order(stages);
  int64_t total = microBatches * virtualStages, group = stages * virtualStages;
  for (int64_t stage = 0; stage < stages; ++stage) {
    auto task = [&](int64_t k, bool isForward) {
      int64_t localChunk = (k % group) / stages;
      if (!isForward)
        localChunk = virtualStages - 1 - localChunk;
      int64_t chunk = localChunk * stages + stage;
      int64_t microBatch = (k / group) * stages + k % stages;
      return isForward ? forward(chunk, microBatch) : backward(chunk, microBatch);
    };
    int64_t warmup = microBatches == stages
                         ? total
                         : std::min((stages - stage - 1) * 2 + (virtualStages - 1) * stages, total);
    SmallVector<Task> &tasks = order[stage];
    for (int64_t k = 0; k < warmup; ++k)
      tasks.push_back(task(k, true));
    for (int64_t k = 0; k < total - warmup; ++k) {
      tasks.push_back(task(warmup + k, true));
      tasks.push_back(task(k, false));
    }
    for (int64_t k = total - warmup; k < total; ++k)
      tasks.push_back(task(k, false));
  }
  return order;
}

/// A message between stages: what the sender's send says.
struct Message {
  TaskKind kind; // SendActivation or SendGradient
  int64_t chunk, microBatch;
  bool operator==(const Message &other) const {
    return kind == other.kind && chunk == other.chunk && microBatch == other.microBatch;
  }
};

/// Adds the sends and receives to the compute order of every stage, and the step's end.
/// A send goes right after the task whose result it carries. The receives a stage posts
/// from one peer must follow that peer's send order; a task that needs a message posts
/// the receives of every earlier message from that peer it has not posted yet, then its
/// own. Those earlier messages were sent before the one needed, so posting them early
/// never makes a stage wait longer.
SmallVector<SmallVector<Task>> addTransfers(const ComputeOrder &order,
                                            ArrayRef<int64_t> chunkStages) {
  int64_t stages = order.size(), chunks = chunkStages.size();
  // The message a compute task produces for another stage, if any, and where it goes.
  auto produced = [&](const Task &task) -> std::optional<std::pair<Message, int64_t>> {
    int64_t stage = chunkStages[task.chunk];
    if (task.kind == TaskKind::Forward && task.chunk + 1 < chunks &&
        chunkStages[task.chunk + 1] != stage)
      return std::pair{Message{TaskKind::SendActivation, task.chunk, task.microBatch},
                       chunkStages[task.chunk + 1]};
    if ((task.kind == TaskKind::Backward || task.kind == TaskKind::BackwardInput) &&
        task.chunk > 0 && chunkStages[task.chunk - 1] != stage)
      return std::pair{Message{TaskKind::SendGradient, task.chunk, task.microBatch},
                       chunkStages[task.chunk - 1]};
    return std::nullopt;
  };
  // The message a compute task needs from another stage, if any, and where it comes from.
  auto needed = [&](const Task &task) -> std::optional<std::pair<Message, int64_t>> {
    int64_t stage = chunkStages[task.chunk];
    if (task.kind == TaskKind::Forward && task.chunk > 0 && chunkStages[task.chunk - 1] != stage)
      return std::pair{Message{TaskKind::SendActivation, task.chunk - 1, task.microBatch},
                       chunkStages[task.chunk - 1]};
    if ((task.kind == TaskKind::Backward || task.kind == TaskKind::BackwardInput) &&
        task.chunk + 1 < chunks && chunkStages[task.chunk + 1] != stage)
      return std::pair{Message{TaskKind::SendGradient, task.chunk + 1, task.microBatch},
                       chunkStages[task.chunk + 1]};
    return std::nullopt;
  };

  // (from, to) -> the messages in the sender's order.
  llvm::DenseMap<std::pair<int64_t, int64_t>, SmallVector<Message>> outgoing;
  for (auto [stage, tasks] : llvm::enumerate(order))
    for (const Task &task : tasks)
      if (auto sent = produced(task))
        outgoing[{static_cast<int64_t>(stage), sent->second}].push_back(sent->first);

  SmallVector<SmallVector<Task>> result(stages);
  for (auto [index, tasks] : llvm::enumerate(order)) {
    int64_t stage = index;
    llvm::DenseMap<int64_t, size_t> posted; // peer -> receives posted from it
    for (const Task &task : tasks) {
      if (auto message = needed(task)) {
        auto [wanted, peer] = *message;
        ArrayRef<Message> queue = outgoing[{peer, stage}];
        size_t &next = posted[peer];
        auto position = std::find(queue.begin() + next, queue.end(), wanted);
        for (const Message *it = queue.begin() + next; it != queue.end() && it <= position; ++it) {
          bool activation = it->kind == TaskKind::SendActivation;
          result[stage].push_back({activation ? TaskKind::RecvActivation : TaskKind::RecvGradient,
                                   activation ? it->chunk + 1 : it->chunk - 1, it->microBatch,
                                   peer});
          ++next;
        }
      }
      result[stage].push_back(task);
      if (auto sent = produced(task))
        result[stage].push_back(
            {sent->first.kind, sent->first.chunk, sent->first.microBatch, sent->second});
    }
    result[stage].push_back({TaskKind::ReduceGradients});
    result[stage].push_back({TaskKind::OptimizerStep});
  }
  return result;
}

} // namespace

SmallVector<int64_t> pipeline::placeChunks(int64_t stages, int64_t virtualStages) {
  SmallVector<int64_t> chunkStages;
  for (int64_t chunk = 0; chunk < stages * virtualStages; ++chunk)
    chunkStages.push_back(chunk % stages);
  return chunkStages;
}

FailureOr<ScheduleOp> pipeline::buildSchedule(OpBuilder &builder, Location loc, ScheduleKind kind,
                                              int64_t stages, int64_t virtualStages,
                                              int64_t microBatches) {
  StringRef name = stringifyScheduleKind(kind);
  if (stages < 1 || virtualStages < 1 || microBatches < 1)
    return emitError(loc) << "a pipeline schedule needs positive stages, virtual stages and "
                             "micro-batches, not "
                          << stages << ", " << virtualStages << " and " << microBatches;
  ComputeOrder order;
  switch (kind) {
  case ScheduleKind::GPipe:
  case ScheduleKind::OneFOneB:
  case ScheduleKind::ZBH1:
    if (virtualStages != 1)
      return emitError(loc) << "the " << name << " schedule runs one chunk per stage, not "
                            << virtualStages << " virtual stages (use 'interleaved' for more)";
    order = kind == ScheduleKind::GPipe
                ? gpipeOrder(stages, microBatches)
                : oneFOneBOrder(stages, microBatches, kind == ScheduleKind::ZBH1);
    break;
  case ScheduleKind::Interleaved:
    if (virtualStages < 2)
      return emitError(loc) << "the interleaved schedule needs at least 2 virtual stages, not "
                            << virtualStages << " (with one chunk per stage use 1f1b)";
    if (microBatches % stages != 0)
      return emitError(loc) << "the interleaved schedule needs the micro-batch count ("
                            << microBatches << ") to be a multiple of the stage count ("
                            << stages << "), as Megatron's interleaved schedule does";
    order = interleavedOrder(stages, virtualStages, microBatches);
    break;
  }

  SmallVector<int64_t> chunkStages = placeChunks(stages, virtualStages);
  auto schedule =
      ScheduleOp::create(builder, loc, name, stages, virtualStages, microBatches, chunkStages);
  OpBuilder::InsertionGuard guard(builder);
  for (auto [index, tasks] : llvm::enumerate(addTransfers(order, chunkStages))) {
    builder.setInsertionPointToEnd(&schedule.getBody().front());
    auto stage = StageOp::create(builder, loc, index);
    builder.setInsertionPointToEnd(&stage.getBody().front());
    for (const Task &task : tasks)
      createTask(builder, loc, task);
  }
  return schedule;
}
