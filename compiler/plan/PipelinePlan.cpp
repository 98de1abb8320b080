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

#include "runtime/plan/StageBuffers.h"


using namespace mlir;
using namespace mtc;
namespace json = llvm::json;

/// The bytes the runtime holds for a buffer of `type`: whole f32 words.
static int64_t heldBytes(Type type) {
  return llvm::alignTo(mt::getSizeInBytes(type), sizeof(float));
}

/// Adds `bytes` at `index` of `into`, growing it.
static void addAt(std::vector<int64_t> &into, int64_t index, int64_t bytes) {
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
          addAt(bytes.chunks.residual, chunk, heldBytes(type));
        else if (kind == "activation")
          addAt(bytes.chunks.activation, chunk, heldBytes(type));
      }
    } else if (name.ends_with(".backward_weight")) {
      for (auto [index, type] : llvm::enumerate(func.getArgumentTypes()))
        if (kindOf(func.getArgAttrDict(index)) == "residual")
          addAt(bytes.chunks.weightResidual, chunk, heldBytes(type));
    } else if (name.ends_with(".backward_input")) {
      for (auto [index, type] : llvm::enumerate(func.getResultTypes()))
        if (kindOf(func.getResultAttrDict(index)) == "stash")
          addAt(bytes.chunks.stash, chunk, heldBytes(type));
    }
  }
  return bytes;
}

namespace {

/// Bytes of chunk (or stage) `index` in `bytes`, 0 past its end.
int64_t of(ArrayRef<int64_t> bytes, int64_t index) {
  return index >= 0 && index < static_cast<int64_t>(bytes.size()) ? bytes[index] : 0;
}

/// A stage's tasks of plan.json (as pipeline::buildPipelineJSON writes them) as the runtime
/// reads them.
std::vector<rt::ScheduleTask> scheduleTasks(const json::Array &tasks) {
  std::vector<rt::ScheduleTask> list;
  for (const json::Value &value : tasks) {
    const json::Object &task = *value.getAsObject();
    std::optional<rt::TaskOp> op = rt::parseTaskOp(task.getString("op").value_or(""));
    if (!op)
      continue; // the generators write only the runtime's ops (PipelineScheduleTest)
    list.push_back({*op, static_cast<int32_t>(task.getInteger("chunk").value_or(0)),
                    static_cast<int32_t>(task.getInteger("micro_batch").value_or(0)),
                    static_cast<int32_t>(task.getInteger("peer").value_or(-1))});
  }
  return list;
}

/// The workspace of each stage's ranks: the largest arena of the functions they call, their
/// chunks' and their stage's, in `functions` (the x86 calling convention with its arenas), as
/// the runtime sizes a stage's arena (KernelLibrary::load).
std::vector<int64_t> stageWorkspaces(const json::Object &functions,
                                     const std::vector<int64_t> &chunkStages, int64_t stages) {
  std::vector<int64_t> workspaces(static_cast<size_t>(stages), 0);
  for (const auto &[name, value] : functions) {
    const json::Object *function = value.getAsObject();
    const json::Object *arena = function ? function->getObject("arena") : nullptr;
    if (!arena)
      continue;
    std::optional<int64_t> stage = function->getInteger("stage");
    if (std::optional<int64_t> chunk = function->getInteger("chunk");
        chunk && *chunk >= 0 && *chunk < static_cast<int64_t>(chunkStages.size()))
      stage = chunkStages[static_cast<size_t>(*chunk)];
    if (stage && *stage >= 0 && *stage < stages)
      workspaces[static_cast<size_t>(*stage)] =
          std::max(workspaces[static_cast<size_t>(*stage)], arena->getInteger("bytes").value_or(0));
  }
  return workspaces;
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
                                               const json::Object *functions) {
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
  // list holds at once, and, with the kernels' arenas, the peak of everything it holds
  // (PipelineTrainer::peakBytes): parameters and state (updated in place by the optimizer),
  // the gradient buffers (twice the gradients: a chunk's part lands in a second buffer; less
  // under ZeRO-2), the buffers of the task list at most, and the stage's arena.
  FailureOr<PipelineBufferBytes> bytes = pipelineBufferBytes(trained);
  if (failed(bytes))
    return failure();
  json::Array residualBytes;
  for (int64_t chunk : llvm::seq<int64_t>(0, cut.numChunks()))
    residualBytes.push_back(of(bytes->chunks.residual, chunk));
  (*pipeline)["chunk_residual_bytes"] = std::move(residualBytes);
  std::vector<int64_t> chunkStages;
  for (const json::Value &value : *pipeline->getArray("chunk_stages"))
    chunkStages.push_back(value.getAsInteger().value_or(0));
  std::optional<std::vector<int64_t>> workspaces;
  if (functions)
    workspaces = stageWorkspaces(*functions, chunkStages, options.stages);
  for (json::Value &entry : *pipeline->getArray("schedules")) {
    json::Array &stagesJson = *entry.getAsObject()->getArray("stages");
    std::vector<rt::StageTasks> lists;
    for (json::Value &stageJson : stagesJson)
      lists.push_back({.tasks = scheduleTasks(*stageJson.getAsObject()->getArray("tasks"))});
    for (auto [stage, stageJson] : llvm::enumerate(stagesJson)) {
      json::Object &object = *stageJson.getAsObject();
      rt::StageBufferPeaks peaks =
          rt::simulateStageBuffers(lists, static_cast<int64_t>(stage), chunkStages, bytes->chunks);
      object["activation_bytes"] = peaks.saved;
      if (!workspaces)
        continue;
      object["buffer_bytes"] = peaks.held;
      object["peak_bytes"] = of(bytes->stageParameters, stage) +
                             of(bytes->stageGradients, stage) +
                             of(bytes->stageOptimizerState, stage) + peaks.held +
                             (*workspaces)[stage];
    }
  }
  return pipeline;
}
