//===- PipelinePlan.cpp - the plan's "pipeline" object --------------------===//

#include "compiler/plan/PipelinePlan.h"

#include "compiler/lowering/Passes.h"
#include "compiler/pipeline/Passes.h"
#include "compiler/pipeline/PipelineJSON.h"
#include "compiler/transforms/Passes.h"
#include "dialects/mt/IR/MTOps.h"
#include "dialects/mts/IR/MTSOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mtc;
namespace json = llvm::json;

FailureOr<SmallVector<int64_t>> mtc::chunkResidualBytes(ModuleOp trained) {
  OwningOpRef<ModuleOp> module(trained.clone());
  PassManager pm(trained.getContext());
  pm.addPass(lowering::createMTDecomposePass());
  pm.addPass(transforms::createMTOutlineParametersPass());
  pm.addPass(pipeline::createMTPipelineChunksPass());
  if (failed(pm.run(*module)))
    return failure();
  SmallVector<int64_t> bytes;
  for (auto func : module->getOps<func::FuncOp>()) {
    auto chunk = func->getAttrOfType<IntegerAttr>("mt.pipeline_chunk");
    if (!chunk || !func.getSymName().ends_with(".forward"))
      continue;
    if (bytes.size() <= chunk.getInt())
      bytes.resize(chunk.getInt() + 1, 0);
    for (auto [index, type] : llvm::enumerate(func.getResultTypes())) {
      auto kind = func.getResultAttrOfType<StringAttr>(index, "mt.buffer");
      auto tensor = cast<mt::NamedTensorType>(type);
      if (kind && kind.getValue() == "residual")
        bytes[chunk.getInt()] +=
            tensor.getNumElements() *
            std::max<int64_t>(1, tensor.getElementType().getIntOrFloatBitWidth() / 8);
    }
  }
  return bytes;
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

  // Predicted activation memory per stage and schedule: the most (chunk, micro-batch)
  // pairs in flight times the largest residuals of the stage's chunks.
  FailureOr<SmallVector<int64_t>> residuals = chunkResidualBytes(trained);
  if (failed(residuals))
    return failure();
  SmallVector<int64_t> stageResidual(options.stages, 0);
  for (auto [chunk, stage] : llvm::enumerate(cut.chunkStages))
    stageResidual[stage] = std::max(stageResidual[stage], (*residuals)[chunk]);
  json::Array residualBytes;
  for (int64_t bytes : *residuals)
    residualBytes.push_back(bytes);
  (*pipeline)["chunk_residual_bytes"] = std::move(residualBytes);
  for (json::Value &entry : *pipeline->getArray("schedules"))
    for (auto [stage, stageJson] : llvm::enumerate(*entry.getAsObject()->getArray("stages"))) {
      json::Object &object = *stageJson.getAsObject();
      object["activation_bytes"] = *object.getInteger("in_flight") * stageResidual[stage];
    }
  return pipeline;
}
