//===- PipelinePlan.cpp - the plan's "pipeline" object --------------------===//

#include "compiler/plan/PipelinePlan.h"

#include "compiler/pipeline/PipelineJSON.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/sharding/Layout.h"
#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/TensorSize.h"
#include "dialects/mts/IR/MTSOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include <map>
#include <tuple>

using namespace mlir;
using namespace mtc;
namespace json = llvm::json;

/// The bytes the runtime holds for a buffer of `type`: whole f32 words.
static int64_t heldBytes(Type type) {
  return llvm::alignTo(mt::getSizeInBytes(type), sizeof(float));
}

/// Adds `bytes` at `index` of `into`, growing it.
static void addAt(SmallVector<int64_t> &into, int64_t index, int64_t bytes) {
  if (static_cast<int64_t>(into.size()) <= index)
    into.resize(index + 1, 0);
  into[index] += bytes;
}

FailureOr<PipelineBufferBytes> mtc::pipelineBufferBytes(ModuleOp trained) {
  // The functions as the plan gets them (partitioned: a rank's tensors).
  OwningOpRef<ModuleOp> module(trained.clone());
  PassManager pm(trained.getContext());
  buildPartitionPipeline(pm);
  if (failed(pm.run(*module)))
    return failure();
  PipelineBufferBytes bytes;
  bool zeroStage2 = sharding::zeroStage(trained) == 2;
  auto kindOf = [](DictionaryAttr attrs) {
    auto kind = attrs ? attrs.getAs<StringAttr>(mt::MTDialect::kBufferAttrName) : nullptr;
    return kind ? kind.getValue() : StringRef();
  };
  for (auto func : module->getOps<func::FuncOp>()) {
    if (auto stage = func->getAttrOfType<IntegerAttr>(mt::MTDialect::kPipelineStageAttrName)) {
      if (!func.getSymName().ends_with(".optimizer_step"))
        continue;
      // The stage's parameters and states, each once among the optimizer's arguments, and
      // the gradients as it takes them (a shard with the distributed optimizer).
      llvm::StringMap<int64_t> paramBytes, gradBytes;
      for (auto [index, type] : llvm::enumerate(func.getArgumentTypes())) {
        DictionaryAttr attrs = func.getArgAttrDict(index);
        if (auto param = attrs ? attrs.getAs<FlatSymbolRefAttr>("mt.param") : nullptr) {
          addAt(bytes.stageParameters, stage.getInt(), heldBytes(type));
          paramBytes[param.getValue()] = heldBytes(type);
        } else if (attrs && attrs.get("mt.state")) {
          addAt(bytes.stageOptimizerState, stage.getInt(), heldBytes(type));
        } else if (auto grad = attrs ? attrs.getAs<FlatSymbolRefAttr>(
                                           mt::MTDialect::kGradAttrName)
                                     : nullptr) {
          gradBytes[grad.getValue()] = heldBytes(type);
        }
      }
      // The runtime's gradient buffers (GradientBuffer.h): two of every gradient (the
      // accumulated ones and a chunk call's); under ZeRO-2 one of every gradient, a second
      // of those all-reduced, the shards of those reduce-scattered and the staging of the
      // largest of them.
      int64_t gradients = 0, allReduced = 0, shards = 0, staging = 0;
      for (const auto &entry : paramBytes) {
        int64_t whole = entry.getValue(), taken = gradBytes.lookup(entry.getKey());
        gradients += whole;
        if (!zeroStage2 || taken == 0 || taken == whole) {
          allReduced += whole;
          continue;
        }
        shards += taken;
        staging = std::max(staging, whole);
      }
      addAt(bytes.stageGradients, stage.getInt(), gradients + allReduced + shards + staging);
      continue;
    }
    auto chunkAttr = func->getAttrOfType<IntegerAttr>(mt::MTDialect::kPipelineChunkAttrName);
    if (!chunkAttr)
      continue;
    int64_t chunk = chunkAttr.getInt();
    StringRef name = func.getSymName();
    if (name.ends_with(".forward")) {
      // The residuals it keeps, and the activations it hands on (with the loss chunk's,
      // none).
      for (auto [index, type] : llvm::enumerate(func.getResultTypes())) {
        StringRef kind = kindOf(func.getResultAttrDict(index));
        if (kind == "residual")
          addAt(bytes.residual, chunk, heldBytes(type));
        else if (kind == "activation")
          addAt(bytes.activation, chunk, heldBytes(type));
      }
    } else if (name.ends_with(".backward_weight")) {
      for (auto [index, type] : llvm::enumerate(func.getArgumentTypes()))
        if (kindOf(func.getArgAttrDict(index)) == "residual")
          addAt(bytes.weightResidual, chunk, heldBytes(type));
    } else if (name.ends_with(".backward_input")) {
      for (auto [index, type] : llvm::enumerate(func.getResultTypes()))
        if (kindOf(func.getResultAttrDict(index)) == "stash")
          addAt(bytes.stash, chunk, heldBytes(type));
    }
  }
  return bytes;
}

namespace {

/// Bytes of chunk `chunk` in `bytes`, 0 past its end.
int64_t of(ArrayRef<int64_t> bytes, int64_t chunk) {
  return chunk >= 0 && chunk < static_cast<int64_t>(bytes.size()) ? bytes[chunk] : 0;
}

/// One step of a stage's task list (plan.json task objects) as the runtime runs it, with the
/// buffers it holds (runtime/exec/PipelineTrainer.h, ScheduleExecutor.h): what it holds at
/// most in residuals and stash, and in every buffer (messages included).
class StageBufferSimulation {
public:
  StageBufferSimulation(const json::Array &tasks, int64_t stage, ArrayRef<int64_t> chunkStages,
                        const PipelineBufferBytes &bytes)
      : tasks(tasks), stage(stage), chunkStages(chunkStages), bytes(bytes) {}

  void run();
  int64_t peakSaved = 0, peakHeld = 0;

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
    peakHeld = std::max(peakHeld, held);
    if (saved(std::get<0>(key))) {
      savedNow += size;
      peakSaved = std::max(peakSaved, savedNow);
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
           chunkStages[chunk] == stage;
  }
  /// The buffer of a send or receive task (PipelineTrainer::message).
  void holdMessage(StringRef op, int64_t chunk, int64_t microBatch);
  /// The buffers a compute task writes and frees (PipelineTrainer::callChunk).
  void compute(StringRef op, int64_t chunk, int64_t microBatch);

  const json::Array &tasks;
  int64_t stage;
  ArrayRef<int64_t> chunkStages;
  const PipelineBufferBytes &bytes;
  std::map<Key, int64_t> live;
  int64_t held = 0, savedNow = 0;
};

bool isCompute(StringRef op) {
  return op == "forward" || op == "backward" || op == "backward_input" ||
         op == "backward_weight";
}

void StageBufferSimulation::holdMessage(StringRef op, int64_t c, int64_t i) {
  if (op == "send_activation")
    hold({Held::Output, c, i}, of(bytes.activation, c));
  else if (op == "recv_activation")
    hold({Held::Input, c, i}, of(bytes.activation, c - 1));
  else if (op == "send_gradient")
    hold({Held::InputGrad, c, i}, of(bytes.activation, c - 1));
  else if (op == "recv_gradient")
    hold({Held::OutputGrad, c, i}, of(bytes.activation, c));
}

void StageBufferSimulation::compute(StringRef op, int64_t c, int64_t i) {
  int64_t weightResidual = of(bytes.weightResidual, c);
  if (op == "forward") {
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
  if ((op == "backward" || op == "backward_input") && c > 0)
    hold(local(c - 1) ? Key{Held::OutputGrad, c - 1, i} : Key{Held::InputGrad, c, i},
         of(bytes.activation, c - 1));
  if (op == "backward_input")
    hold({Held::Stash, c, i}, of(bytes.stash, c));
  release({Held::OutputGrad, c, i});
  release({Held::Residual, c, i});
  if (op != "backward_input") {
    release({Held::WeightResidual, c, i});
    release({Held::Stash, c, i});
  }
}

void StageBufferSimulation::run() {
  auto field = [&](size_t n, StringRef key) {
    return tasks[n].getAsObject()->getInteger(key).value_or(0);
  };
  auto opOf = [&](size_t n) { return tasks[n].getAsObject()->getString("op").value_or(""); };
  // The executor posts the receives ahead of each task up to its third compute task from
  // there (runtime/exec/ScheduleExecutor.h), taking their buffers then.
  constexpr size_t kReceiveLookahead = 2;
  size_t nextReceive = 0;
  for (size_t current = 0; current < tasks.size(); ++current) {
    size_t limit = current;
    for (size_t computes = 0; limit < tasks.size(); ++limit)
      if (isCompute(opOf(limit)) && ++computes > kReceiveLookahead)
        break;
    for (; nextReceive < limit; ++nextReceive)
      if (opOf(nextReceive).starts_with("recv_"))
        holdMessage(opOf(nextReceive), field(nextReceive, "chunk"),
                    field(nextReceive, "micro_batch"));
    StringRef op = opOf(current);
    int64_t c = field(current, "chunk"), i = field(current, "micro_batch");
    if (!isCompute(op)) {
      holdMessage(op, c, i);
      continue;
    }
    // The buffer of the send that follows it is taken first.
    StringRef send = op == "forward" ? "send_activation" : "send_gradient";
    if (op != "backward_weight")
      for (size_t later = current + 1; later < tasks.size(); ++later)
        if (opOf(later) == send && field(later, "chunk") == c &&
            field(later, "micro_batch") == i) {
          holdMessage(send, c, i);
          break;
        }
    compute(op, c, i);
  }
}

} // namespace

/// The schedule's kind (see checkPipelineSchedule).
static FailureOr<mts::ScheduleKind>
scheduleKind(ModuleOp trained, const pipeline::PipelineOptions &options) {
  std::string name = options.schedule;
  if (name.empty())
    name = options.virtualStages > 1 ? "interleaved" : "1f1b";
  std::optional<mts::ScheduleKind> kind = mts::symbolizeScheduleKind(name);
  if (!kind)
    return trained.emitError() << "schedule '" << name << "' has no generator (expected "
                               << mts::scheduleKindNames() << ")";
  return *kind;
}

LogicalResult mtc::checkPipelineSchedule(ModuleOp trained, const pipeline::StageCut &cut) {
  return success(succeeded(scheduleKind(trained, cut.options)));
}

FailureOr<json::Object> mtc::buildPipelineJson(ModuleOp trained, const pipeline::StageCut &cut,
                                               int64_t microBatches,
                                               std::optional<int64_t> workspace) {
  const pipeline::PipelineOptions &options = cut.options;
  FailureOr<mts::ScheduleKind> kind = scheduleKind(trained, options);
  if (failed(kind))
    return failure();

  // One verified schedule per divisor m of the step's micro-batches (dp ranks divide them),
  // without the counts the kind cannot run (interleaved: m not a multiple of pp).
  trained.getContext()->getOrLoadDialect<mts::MTSDialect>();
  FailureOr<json::Object> pipeline =
      pipeline::buildPipelineJSON(trained.getLoc(), *kind, options.stages, options.virtualStages,
                                  microBatches, cut.chunkLayers);
  if (failed(pipeline))
    return failure();
  json::Object shared;
  for (const auto &[param, chunks] : cut.sharedParams) {
    json::Array list;
    for (int64_t chunk : chunks)
      list.push_back(chunk);
    shared[param] = std::move(list);
  }
  (*pipeline)["shared_params"] = std::move(shared);

  // Predicted memory per stage and schedule: the most residuals and stash the stage's task
  // list holds at once, and, with the kernels' arena, the peak of everything it holds
  // (PipelineTrainer::peakBytes): parameters and state twice (the optimizer writes the next
  // into the second), the gradient buffers (twice the gradients: a chunk's part lands in a
  // second buffer; less under ZeRO-2), the buffers of the task list at most, and the arena.
  FailureOr<PipelineBufferBytes> bytes = pipelineBufferBytes(trained);
  if (failed(bytes))
    return failure();
  json::Array residualBytes;
  for (int64_t chunk : llvm::seq<int64_t>(0, cut.numChunks()))
    residualBytes.push_back(of(bytes->residual, chunk));
  (*pipeline)["chunk_residual_bytes"] = std::move(residualBytes);
  SmallVector<int64_t> chunkStages;
  for (const json::Value &value : *pipeline->getArray("chunk_stages"))
    chunkStages.push_back(value.getAsInteger().value_or(0));
  for (json::Value &entry : *pipeline->getArray("schedules"))
    for (auto [stage, stageJson] : llvm::enumerate(*entry.getAsObject()->getArray("stages"))) {
      json::Object &object = *stageJson.getAsObject();
      StageBufferSimulation simulation(*object.getArray("tasks"), stage, chunkStages, *bytes);
      simulation.run();
      object["activation_bytes"] = simulation.peakSaved;
      if (!workspace)
        continue;
      object["buffer_bytes"] = simulation.peakHeld;
      object["peak_bytes"] = 2 * of(bytes->stageParameters, stage) +
                             of(bytes->stageGradients, stage) +
                             2 * of(bytes->stageOptimizerState, stage) + simulation.peakHeld +
                             *workspace;
    }
  return pipeline;
}
