//===- MTSVerifier.cpp - the verifier of mts.schedule ---------------------===//
//
// Checks, in this order, that a schedule is well formed (attributes, stages, tasks that
// name chunks of their stage and peers that are the neighbouring chunks' stages), that
// every stage's order respects the data dependencies it can see locally, that every
// (chunk, micro-batch) is computed exactly once, that sends and receives pair up in
// order between every two stages, and finally that the stages do not wait on each other
// forever (by simulating the schedule).
//
//===----------------------------------------------------------------------===//

#include "dialects/mts/IR/MTSOps.h"
#include "dialects/mts/IR/MTSSimulation.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mtc::mts;

namespace {

using ChunkMicroBatch = std::pair<int64_t, int64_t>;

/// What the printed form of a task says, for messages ("forward chunk 1 mb 3").
std::string describe(const Task &task) {
  std::string text = stringifyTaskKind(task.kind).str();
  if (task.chunk >= 0)
    text += " chunk " + std::to_string(task.chunk) + " mb " + std::to_string(task.microBatch);
  if (isSendTask(task.kind))
    text += " to " + std::to_string(task.peer);
  if (isRecvTask(task.kind))
    text += " from " + std::to_string(task.peer);
  return text;
}

/// The schedule's attributes and the facts about chunks every check needs.
struct Layout {
  int64_t stages, microBatches;
  llvm::ArrayRef<int64_t> chunkStages;
  int64_t chunks() const { return chunkStages.size(); }
};

/// The chunk on the other side of a transfer (the next one for activations sent and
/// gradients received, the previous one otherwise).
int64_t neighbourChunk(const Task &task) {
  bool toNext = task.kind == TaskKind::SendActivation || task.kind == TaskKind::RecvGradient;
  return toNext ? task.chunk + 1 : task.chunk - 1;
}

LogicalResult verifyAttributes(ScheduleOp schedule) {
  if (!symbolizeScheduleKind(schedule.getKind()))
    return schedule.emitOpError() << "has unknown kind '" << schedule.getKind()
                                  << "' (expected " << scheduleKindNames() << ")";
  int64_t stages = schedule.getStages(), virtualStages = schedule.getVirtualStages(),
          microBatches = schedule.getMicroBatches();
  if (stages < 1 || virtualStages < 1 || microBatches < 1)
    return schedule.emitOpError() << "needs positive stages, virtual_stages and micro_batches, not "
                                  << stages << ", " << virtualStages << " and " << microBatches;
  ArrayRef<int64_t> chunkStages = schedule.getChunkStages();
  if (static_cast<int64_t>(chunkStages.size()) != stages * virtualStages)
    return schedule.emitOpError() << "has " << chunkStages.size()
                                  << " chunk_stages; stages * virtual_stages is "
                                  << stages * virtualStages;
  llvm::SmallVector<int64_t> chunksOnStage(stages, 0);
  for (auto [chunk, stage] : llvm::enumerate(chunkStages)) {
    if (stage < 0 || stage >= stages)
      return schedule.emitOpError() << "places chunk " << chunk << " on stage " << stage
                                    << ", which does not exist (stages 0 to " << stages - 1 << ")";
    ++chunksOnStage[stage];
  }
  for (auto [stage, count] : llvm::enumerate(chunksOnStage))
    if (count != virtualStages)
      return schedule.emitOpError() << "places " << count << " chunk(s) on stage " << stage
                                    << "; every stage runs virtual_stages = " << virtualStages;
  return success();
}

/// The stages are `mts.stage 0` to `P-1` in order, holding only tasks.
LogicalResult verifyStructure(ScheduleOp schedule) {
  int64_t expected = 0;
  for (Operation &op : schedule.getBody().front()) {
    auto stage = dyn_cast<StageOp>(&op);
    if (!stage)
      return op.emitOpError() << "is not an mts.stage: a schedule holds only its stages";
    if (static_cast<int64_t>(stage.getIndex()) != expected)
      return stage.emitOpError() << "has index " << static_cast<int64_t>(stage.getIndex())
                                 << "; the schedule's stage " << expected << " must come here";
    ++expected;
    for (Operation &task : stage.getBody().front())
      if (!getTask(&task))
        return task.emitOpError() << "is not a task: a stage holds only mts tasks";
  }
  if (expected != schedule.getStages())
    return schedule.emitOpError() << "has " << expected << " stage(s), not stages = "
                                  << schedule.getStages();
  return success();
}

/// A task names a chunk of its stage, a micro-batch of the step and, for a transfer, a
/// neighbouring chunk on another stage, which is its peer.
LogicalResult verifyTaskFields(Operation *op, const Task &task, int64_t stage,
                               const Layout &layout) {
  if (task.kind == TaskKind::ReduceGradients || task.kind == TaskKind::OptimizerStep)
    return success();
  if (task.chunk < 0 || task.chunk >= layout.chunks())
    return op->emitOpError() << "names chunk " << task.chunk << ", which does not exist (chunks 0 to "
                             << layout.chunks() - 1 << ")";
  if (layout.chunkStages[task.chunk] != stage)
    return op->emitOpError() << "names chunk " << task.chunk << ", which runs on stage "
                             << layout.chunkStages[task.chunk] << ", not on stage " << stage;
  if (task.microBatch < 0 || task.microBatch >= layout.microBatches)
    return op->emitOpError() << "names micro-batch " << task.microBatch << "; the step has "
                             << layout.microBatches << " (0 to " << layout.microBatches - 1 << ")";
  if (!isSendTask(task.kind) && !isRecvTask(task.kind))
    return success();
  int64_t neighbour = neighbourChunk(task);
  if (neighbour < 0)
    return op->emitOpError() << "has no previous chunk to exchange with: chunk 0 reads the batch "
                                "and sends no gradient";
  if (neighbour >= layout.chunks())
    return op->emitOpError() << "has no next chunk to exchange with: the last chunk's output "
                                "is the loss";
  int64_t peerStage = layout.chunkStages[neighbour];
  if (peerStage == stage)
    return op->emitOpError() << "exchanges with chunk " << neighbour
                             << " on the same stage: consecutive chunks on one stage hand "
                                "over locally, without send or receive";
  if (task.peer != peerStage)
    return op->emitOpError() << "names peer " << task.peer << ", but chunk " << neighbour
                             << " runs on stage " << peerStage;
  return success();
}

/// What one stage has done so far, for its local dependency checks.
struct StageState {
  llvm::DenseSet<ChunkMicroBatch> forwarded, backwarded /* B or BW */, received;
  Operation *reduceGradients = nullptr;
};

/// Per (chunk, micro-batch): the ops of each compute kind seen so far (the first one).
struct ComputeOps {
  Operation *forward = nullptr, *backward = nullptr, *backwardInput = nullptr,
            *backwardWeight = nullptr;
};

class ScheduleVerifier {
public:
  ScheduleVerifier(ScheduleOp schedule)
      : schedule(schedule), layout{static_cast<int64_t>(schedule.getStages()),
                                   static_cast<int64_t>(schedule.getMicroBatches()),
                                   schedule.getChunkStages()} {}

  LogicalResult verify() {
    for (StageOp stage : schedule.getStageOps())
      if (failed(verifyStage(stage)))
        return failure();
    if (failed(verifyComplete()) || failed(verifyPairing()))
      return failure();
    return verifyNoDeadlock();
  }

private:
  /// Where the input of F(c, i) comes from on `stage`: available when it was received or
  /// the previous chunk ran on this stage.
  bool inputAvailable(const StageState &state, int64_t stage, ChunkMicroBatch key) const {
    auto [chunk, microBatch] = key;
    if (chunk == 0)
      return true;
    if (layout.chunkStages[chunk - 1] == stage)
      return state.forwarded.contains({chunk - 1, microBatch});
    return state.received.contains({chunk, microBatch});
  }

  /// Whether the gradient of chunk c's output for micro-batch i is on `stage`.
  bool outputGradientAvailable(const StageState &state, int64_t stage, ChunkMicroBatch key) const {
    auto [chunk, microBatch] = key;
    if (chunk == layout.chunks() - 1)
      return true;
    if (layout.chunkStages[chunk + 1] == stage)
      return state.backwarded.contains({chunk + 1, microBatch});
    return state.received.contains({-chunk - 1, microBatch});
  }

  LogicalResult verifyStage(StageOp stageOp) {
    int64_t stage = stageOp.getIndex();
    StageState state;
    Operation *optimizerStep = nullptr;
    for (Operation &op : stageOp.getBody().front()) {
      Task task = *getTask(&op);
      if (failed(verifyTaskFields(&op, task, stage, layout)))
        return failure();
      if (optimizerStep)
        return optimizerStep->emitOpError() << "must be the stage's last task";
      ChunkMicroBatch key{task.chunk, task.microBatch};
      ComputeOps &ops = computeOps[key];
      auto duplicate = [&](Operation *first) -> LogicalResult {
        InFlightDiagnostic diag = op.emitOpError()
                                  << "repeats " << describe(task) << ": every task runs once per step";
        diag.attachNote(first->getLoc()) << "the first one";
        return diag;
      };
      auto afterReduction = [&]() -> LogicalResult {
        InFlightDiagnostic diag = op.emitOpError()
                                  << "comes after the stage's reduce_gradients, which must follow "
                                     "its last backward and backward_weight";
        diag.attachNote(state.reduceGradients->getLoc()) << "the reduction";
        return diag;
      };
      switch (task.kind) {
      case TaskKind::Forward:
        if (ops.forward)
          return duplicate(ops.forward);
        if (!inputAvailable(state, stage, key))
          return op.emitOpError() << "runs before its input is here: "
                                  << (task.chunk > 0 && layout.chunkStages[task.chunk - 1] == stage
                                          ? "the forward of chunk " + std::to_string(task.chunk - 1)
                                          : "recv_activation chunk " + std::to_string(task.chunk))
                                  << " mb " << task.microBatch << " must come first";
        ops.forward = &op;
        state.forwarded.insert(key);
        break;
      case TaskKind::Backward:
      case TaskKind::BackwardInput: {
        bool whole = task.kind == TaskKind::Backward;
        if (Operation *first = whole ? ops.backward : ops.backwardInput)
          return duplicate(first);
        if (Operation *other = whole ? ops.backwardInput : ops.backward) {
          InFlightDiagnostic diag = op.emitOpError()
                                    << "mixes backward with backward_input/backward_weight for chunk "
                                    << task.chunk << " mb " << task.microBatch
                                    << ": a micro-batch's backward is one or the other";
          diag.attachNote(other->getLoc()) << "the other one";
          return diag;
        }
        if (!state.forwarded.contains(key))
          return op.emitOpError() << "runs before the forward of chunk " << task.chunk << " mb "
                                  << task.microBatch;
        if (!outputGradientAvailable(state, stage, key))
          return op.emitOpError() << "runs before the gradient of its output is here: "
                                  << (layout.chunkStages[task.chunk + 1] == stage
                                          ? "the backward of chunk " + std::to_string(task.chunk + 1)
                                          : "recv_gradient chunk " + std::to_string(task.chunk))
                                  << " mb " << task.microBatch << " must come first";
        if (whole && state.reduceGradients)
          return afterReduction();
        (whole ? ops.backward : ops.backwardInput) = &op;
        state.backwarded.insert(key);
        break;
      }
      case TaskKind::BackwardWeight:
        if (ops.backwardWeight)
          return duplicate(ops.backwardWeight);
        if (ops.backward) {
          InFlightDiagnostic diag = op.emitOpError()
                                    << "mixes backward with backward_input/backward_weight for chunk "
                                    << task.chunk << " mb " << task.microBatch
                                    << ": a micro-batch's backward is one or the other";
          diag.attachNote(ops.backward->getLoc()) << "the other one";
          return diag;
        }
        if (!ops.backwardInput)
          return op.emitOpError() << "runs before backward_input chunk " << task.chunk << " mb "
                                  << task.microBatch;
        if (state.reduceGradients)
          return afterReduction();
        ops.backwardWeight = &op;
        break;
      case TaskKind::SendActivation:
      case TaskKind::SendGradient: {
        bool activation = task.kind == TaskKind::SendActivation;
        if (!(activation ? state.forwarded : state.backwarded).contains(key))
          return op.emitOpError() << "sends before "
                                  << (activation ? "the forward" : "the backward (input gradient)")
                                  << " of chunk " << task.chunk << " mb " << task.microBatch;
        Operation *&first = sends[{activation ? task.chunk : -task.chunk - 1, task.microBatch}];
        if (first)
          return duplicate(first);
        first = &op;
        sendOrder[{stage, task.peer}].push_back({&op, task});
        break;
      }
      case TaskKind::RecvActivation:
      case TaskKind::RecvGradient: {
        // Gradients received for chunk c are keyed -c-1, apart from activations.
        bool activation = task.kind == TaskKind::RecvActivation;
        ChunkMicroBatch receivedKey{activation ? task.chunk : -task.chunk - 1, task.microBatch};
        Operation *&first = recvs[receivedKey];
        if (first)
          return duplicate(first);
        first = &op;
        state.received.insert(receivedKey);
        recvOrder[{task.peer, stage}].push_back({&op, task});
        break;
      }
      case TaskKind::ReduceGradients:
        if (state.reduceGradients)
          return duplicate(state.reduceGradients);
        state.reduceGradients = &op;
        break;
      case TaskKind::OptimizerStep:
        if (!state.reduceGradients)
          return op.emitOpError() << "comes before the stage's reduce_gradients";
        optimizerStep = &op;
        break;
      }
    }
    if (!optimizerStep)
      return stageOp.emitOpError() << "has no optimizer_step: every stage ends with one";
    return success();
  }

  /// Every (chunk, micro-batch) has its forward and its backward.
  LogicalResult verifyComplete() {
    for (int64_t chunk = 0; chunk < layout.chunks(); ++chunk) {
      for (int64_t microBatch = 0; microBatch < layout.microBatches; ++microBatch) {
        ComputeOps &ops = computeOps[{chunk, microBatch}];
        int64_t stage = layout.chunkStages[chunk];
        auto missing = [&](StringRef what) {
          return schedule.emitOpError() << "has no " << what << " of chunk " << chunk << " mb "
                                        << microBatch << " (on stage " << stage << ")";
        };
        if (!ops.forward)
          return missing("forward");
        if (!ops.backward && !ops.backwardInput)
          return missing("backward (or backward_input and backward_weight)");
        if (ops.backwardInput && !ops.backwardWeight)
          return missing("backward_weight");
      }
    }
    return success();
  }

  /// The k-th message stage a sends to stage b is the k-th one b receives from a, and
  /// they agree on kind, chunk and micro-batch. (A send without a receive cannot reach
  /// this check: the task on the other stage that needs its message has no input.)
  LogicalResult verifyPairing() {
    for (int64_t from = 0; from < layout.stages; ++from) {
      for (int64_t to = 0; to < layout.stages; ++to) {
        auto sent = sendOrder.find({from, to});
        auto got = recvOrder.find({from, to});
        ArrayRef<std::pair<Operation *, Task>> sendList, recvList;
        if (sent != sendOrder.end())
          sendList = sent->second;
        if (got != recvOrder.end())
          recvList = got->second;
        for (auto [index, recv] : llvm::enumerate(recvList)) {
          if (index >= sendList.size())
            return recv.first->emitOpError()
                   << "has no matching send: stage " << from << " sends " << sendList.size()
                   << " message(s) to stage " << to << " and this is receive " << index + 1;
          auto [sendOp, send] = sendList[index];
          TaskKind expected = send.kind == TaskKind::SendActivation ? TaskKind::RecvActivation
                                                                     : TaskKind::RecvGradient;
          const Task &task = recv.second;
          if (task.kind != expected || neighbourChunk(task) != send.chunk ||
              task.microBatch != send.microBatch) {
            InFlightDiagnostic diag = recv.first->emitOpError()
                                      << "is receive " << index + 1 << " from stage " << from
                                      << ", whose send " << index + 1 << " to stage " << to
                                      << " is " << describe(send)
                                      << ": receives from a stage must be in the order it sends";
            diag.attachNote(sendOp->getLoc()) << "the send";
            return diag;
          }
        }
      }
    }
    return success();
  }

  LogicalResult verifyNoDeadlock() {
    ScheduleSimulation run = simulateSchedule(schedule);
    if (!run.deadlocked())
      return success();
    InFlightDiagnostic diag = schedule.emitOpError()
                              << "deadlocks: its stages wait on each other";
    for (auto [stage, simulated] : llvm::enumerate(run.stages))
      if (simulated.blockedAt)
        diag.attachNote(simulated.blockedAt->getLoc())
            << "stage " << stage << " is blocked at "
            << describe(*getTask(simulated.blockedAt));
    return diag;
  }

  ScheduleOp schedule;
  Layout layout;
  llvm::DenseMap<ChunkMicroBatch, ComputeOps> computeOps;
  // Sends and receives of one message, keyed as StageState::received.
  llvm::DenseMap<ChunkMicroBatch, Operation *> sends, recvs;
  // (from, to) -> the messages in the sender's and in the receiver's order.
  llvm::DenseMap<std::pair<int64_t, int64_t>, llvm::SmallVector<std::pair<Operation *, Task>>>
      sendOrder, recvOrder;
};

} // namespace

LogicalResult ScheduleOp::verifyRegions() {
  if (failed(verifyAttributes(*this)) || failed(verifyStructure(*this)))
    return failure();
  return ScheduleVerifier(*this).verify();
}
