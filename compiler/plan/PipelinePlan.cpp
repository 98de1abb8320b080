//===- PipelinePlan.cpp - the plan's "pipeline" object --------------------===//

#include "compiler/plan/PipelinePlan.h"

#include "compiler/lowering/Passes.h"
#include "compiler/pipeline/Passes.h"
#include "compiler/pipeline/PipelineJSON.h"
#include "compiler/pipeline/Schedules.h"
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

/// The schedule's name and kind (see checkPipelineSchedule).
static FailureOr<std::pair<std::string, mts::ScheduleKind>>
scheduleKind(ModuleOp trained, const pipeline::PipelineOptions &options) {
  std::string name = options.schedule;
  if (name.empty())
    name = options.virtualStages > 1 ? "interleaved" : "1f1b";
  std::optional<mts::ScheduleKind> kind = mts::symbolizeScheduleKind(name);
  if (!kind)
    return trained.emitError() << "schedule '" << name << "' has no generator (expected "
                               << mts::scheduleKindNames() << ")";
  return std::pair{name, *kind};
}

LogicalResult mtc::checkPipelineSchedule(ModuleOp trained, const pipeline::StageCut &cut) {
  return success(succeeded(scheduleKind(trained, cut.options)));
}

FailureOr<json::Object> mtc::buildPipelineJson(ModuleOp trained, const pipeline::StageCut &cut,
                                               int64_t microBatches) {
  const pipeline::PipelineOptions &options = cut.options;
  FailureOr<std::pair<std::string, mts::ScheduleKind>> named = scheduleKind(trained, options);
  if (failed(named))
    return failure();
  auto [name, kind] = *named;

  // One schedule per divisor m of the step's micro-batches (dp ranks divide them); the
  // counts the kind cannot run (interleaved: m not a multiple of pp) are left out.
  trained.getContext()->getOrLoadDialect<mts::MTSDialect>();
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(trained.getLoc());
  OpBuilder builder = OpBuilder::atBlockEnd(scratch->getBody());
  SmallVector<mts::ScheduleOp> schedules;
  SmallVector<int64_t> tried;
  for (int64_t m = 1; m <= microBatches; ++m) {
    if (microBatches % m != 0)
      continue;
    tried.push_back(m);
    ScopedDiagnosticHandler quiet(trained.getContext(), [](Diagnostic &) { return success(); });
    FailureOr<mts::ScheduleOp> schedule = pipeline::buildSchedule(
        builder, trained.getLoc(), kind, options.stages, options.virtualStages, m);
    if (succeeded(schedule))
      schedules.push_back(*schedule);
  }
  if (schedules.empty()) {
    InFlightDiagnostic diag = trained.emitError()
                              << "schedule " << name << " with pp " << options.stages
                              << " x virtual_stages " << options.virtualStages
                              << " runs none of the micro-batch counts the step admits (";
    llvm::interleaveComma(tried, diag);
    return diag << ")";
  }
  FailureOr<json::Object> pipeline = pipeline::pipelineToJSON(schedules, cut.chunkLayers);
  if (failed(pipeline))
    return failure();
  json::Array placed;
  for (int64_t stage : cut.chunkStages)
    placed.push_back(stage);
  if (json::Value(std::move(placed)) != *pipeline->get("chunk_stages"))
    return trained.emitError() << "schedule " << name
                               << " places the chunks other than the stage cut";

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
