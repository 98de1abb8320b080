//===- PipelinePlan.cpp - the plan's "pipeline" object --------------------===//

#include "compiler/plan/PipelinePlan.h"

#include "compiler/pipelines/Pipelines.h"
#include "compiler/pipeline/PipelineJSON.h"
#include "dialects/mt/IR/MTOps.h"
#include "dialects/mts/IR/MTSOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mtc;
namespace json = llvm::json;

FailureOr<ChunkSavedBytes> mtc::chunkSavedBytes(ModuleOp trained) {
  // The functions as the plan gets them (partitioned: a tensor-parallel rank's tensors).
  OwningOpRef<ModuleOp> module(trained.clone());
  PassManager pm(trained.getContext());
  buildPartitionPipeline(pm);
  if (failed(pm.run(*module)))
    return failure();
  ChunkSavedBytes saved;
  for (auto func : module->getOps<func::FuncOp>()) {
    auto chunk = func->getAttrOfType<IntegerAttr>(mt::MTDialect::kPipelineChunkAttrName);
    if (!chunk)
      continue;
    // A forward's residuals, backward_input's stash and the residuals backward_weight reads.
    StringRef name = func.getSymName();
    bool forward = name.ends_with(".forward"), weight = name.ends_with(".backward_weight");
    if (!forward && !weight && !name.ends_with(".backward_input"))
      continue;
    SmallVector<int64_t> &bytes =
        forward ? saved.residual : weight ? saved.weightResidual : saved.stash;
    if (bytes.size() <= chunk.getInt())
      bytes.resize(chunk.getInt() + 1, 0);
    auto count = [&](Type type) {
      auto tensor = cast<mt::NamedTensorType>(type);
      bytes[chunk.getInt()] +=
          tensor.getNumElements() *
          std::max<int64_t>(1, tensor.getElementType().getIntOrFloatBitWidth() / 8);
    };
    if (weight) {
      for (auto [index, type] : llvm::enumerate(func.getArgumentTypes()))
        if (auto kind = func.getArgAttrOfType<StringAttr>(index, mt::MTDialect::kBufferAttrName);
            kind && kind.getValue() == "residual")
          count(type);
      continue;
    }
    for (auto [index, type] : llvm::enumerate(func.getResultTypes()))
      if (auto kind = func.getResultAttrOfType<StringAttr>(index, mt::MTDialect::kBufferAttrName);
          kind && kind.getValue() == (forward ? "residual" : "stash"))
        count(type);
  }
  return saved;
}

/// The most bytes of residuals and stash a stage holds while it runs `tasks` (plan.json
/// task objects) in order: a forward keeps its chunk's residuals until the whole backward,
/// or until backward_input for those backward_weight does not read and backward_weight for
/// the others; backward_input keeps the stash until backward_weight.
static int64_t peakSavedBytes(const json::Array &tasks, const ChunkSavedBytes &saved) {
  auto of = [](const SmallVector<int64_t> &bytes, int64_t chunk) {
    return chunk < static_cast<int64_t>(bytes.size()) ? bytes[chunk] : 0;
  };
  int64_t live = 0, peak = 0;
  for (const json::Value &value : tasks) {
    const json::Object &task = *value.getAsObject();
    StringRef op = task.getString("op").value_or("");
    int64_t chunk = task.getInteger("chunk").value_or(0);
    if (op == "forward")
      live += of(saved.residual, chunk);
    else if (op == "backward_input")
      live += of(saved.stash, chunk);
    // What a task frees, it frees after it ran (its inputs live beside its outputs).
    peak = std::max(peak, live);
    if (op == "backward_input")
      live -= of(saved.residual, chunk) - of(saved.weightResidual, chunk);
    else if (op == "backward")
      live -= of(saved.residual, chunk);
    else if (op == "backward_weight")
      live -= of(saved.weightResidual, chunk) + of(saved.stash, chunk);
  }
  return peak;
}

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
                                               int64_t microBatches) {
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

  // Predicted activation memory per stage and schedule: the most residuals and stash the
  // stage's task list holds at once.
  FailureOr<ChunkSavedBytes> saved = chunkSavedBytes(trained);
  if (failed(saved))
    return failure();
  json::Array residualBytes;
  for (int64_t bytes : saved->residual)
    residualBytes.push_back(bytes);
  (*pipeline)["chunk_residual_bytes"] = std::move(residualBytes);
  for (json::Value &entry : *pipeline->getArray("schedules"))
    for (json::Value &stageJson : *entry.getAsObject()->getArray("stages")) {
      json::Object &object = *stageJson.getAsObject();
      object["activation_bytes"] = peakSavedBytes(*object.getArray("tasks"), *saved);
    }
  return pipeline;
}
