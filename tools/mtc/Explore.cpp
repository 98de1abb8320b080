//===- Explore.cpp - mtc explore and mtc compile --auto -------------------===//

#include "Explore.h"

#include "compiler/analysis/FunctionCost.h"
#include "compiler/analysis/ModelStats.h"
#include "compiler/autodiff/SplitBackward.h"
#include "compiler/costmodel/CollectiveModel.h"
#include "compiler/pipeline/Schedules.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/plan/PlanWriter.h"
#include "compiler/sharding/CommunicationVolume.h"
#include "compiler/sharding/Layout.h"
#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/TensorSize.h"
#include "dialects/mts/IR/MTSDialect.h"
#include "dialects/mts/IR/MTSOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <set>

using namespace mlir;
using namespace mtc;
namespace cm = mtc::costmodel;

namespace {

/// Adds `times` x `part` to `into` (GEMMs of one size merged).
void addProfile(cm::FunctionProfile &into, const cm::FunctionProfile &part, double times = 1) {
  into.trafficBytes += times * part.trafficBytes;
  into.batchTrafficBytes += times * part.batchTrafficBytes;
  into.ops += static_cast<int64_t>(times * static_cast<double>(part.ops));
  for (const cm::FunctionProfile::Gemm &gemm : part.gemms) {
    auto it = llvm::find_if(
        into.gemms, [&](const cm::FunctionProfile::Gemm &g) { return g.flops == gemm.flops; });
    int64_t count = static_cast<int64_t>(times * static_cast<double>(gemm.count));
    if (it == into.gemms.end())
      into.gemms.push_back({gemm.flops, count});
    else
      it->count += count;
  }
  for (cm::FunctionProfile::Collective c : part.collectives) {
    c.count = static_cast<int64_t>(times * static_cast<double>(c.count));
    into.collectives.push_back(std::move(c));
  }
}

cm::FunctionProfile toProfile(const FunctionCost &cost,
                              const std::vector<sharding::CollectiveCall> &calls) {
  cm::FunctionProfile profile;
  for (const GemmCount &gemm : cost.gemms)
    profile.gemms.push_back({static_cast<double>(gemm.flops), gemm.count});
  profile.trafficBytes = static_cast<double>(cost.trafficBytes);
  profile.batchTrafficBytes = static_cast<double>(cost.batchTrafficBytes);
  profile.ops = cost.ops;
  for (const sharding::CollectiveCall &call : calls) {
    cm::FunctionProfile::Collective c;
    c.kind = cm::parseCollectiveKind(call.kind).value_or(cm::CollectiveKind::AllReduce);
    c.axis = call.axis;
    c.group = call.groupSize;
    c.bytes = static_cast<double>(call.bytes);
    c.count = call.count;
    c.batched = call.batched;
    profile.collectives.push_back(std::move(c));
  }
  return profile;
}

LogicalResult runPipeline(ModuleOp module, void (*build)(OpPassManager &)) {
  PassManager pm(module.getContext());
  build(pm);
  return pm.run(module);
}

/// The profile of function `name` of the partitioned `step`.
cm::FunctionProfile functionProfile(ModuleOp step, StringRef name) {
  return toProfile(computeFunctionCost(step, name),
                   sharding::predictFunctionCollectives(step, name));
}

/// Cuts the partitioned `step` (forward_backward of one micro-batch, optimizer_step, the
/// layer backward's weight part `weightPart`, whose last `weightStashArgs` arguments are
/// what its input part stashes for it) into costs.
llvm::Error decompose(ModuleOp trained, ModuleOp step, StringRef weightPart,
                      unsigned weightStashArgs, cm::LayerCosts &costs) {
  auto fb = step.lookupSymbol<func::FuncOp>("forward_backward");
  if (!fb || fb.getBody().empty())
    return llvm::createStringError("the step has no forward_backward");
  // Between the stacks, what the loss depends on is the head's forward, the rest its
  // backward (as mt-pipeline-chunks cuts the last chunk).
  Block &body = fb.getBody().front();
  llvm::DenseSet<Operation *> lossSlice;
  SmallVector<Value> worklist(body.getTerminator()->getOperands().take_front(1));
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || isa<mt::RepeatOp>(def) || !lossSlice.insert(def).second)
      continue;
    def->walk([&](Operation *nested) { llvm::append_range(worklist, nested->getOperands()); });
  }
  // Top-level ops in order: before the forward layer stack and after its backward, the
  // embedding (`first`); between them, the head and loss (`last`); the stacks, the layers.
  int phase = 0;
  bool sawForward = false;
  int64_t largest = 0;
  for (Operation &op : body) {
    // (A layer stack's results are every layer's saved values, stacked: counted apart.)
    if (!isa<mt::RepeatOp>(op))
      for (Type type : op.getResultTypes())
        largest = std::max(largest, mt::getSizeInBytes(type));
    if (auto repeat = dyn_cast<mt::RepeatOp>(op)) {
      if (!repeat.getReverse() && !sawForward) {
        sawForward = true;
        costs.layers = repeat.getCount();
        // The carried activation (what a stage sends the next); the stacked saved values.
        if (repeat.getNumResults() > 0)
          costs.activationBytes =
              static_cast<double>(mt::getSizeInBytes(repeat.getResult(0).getType()));
        double saved = 0;
        for (Value result : repeat.getResults().drop_front(repeat.getNumCarried()))
          saved += static_cast<double>(mt::getSizeInBytes(result.getType()));
        costs.layerSavedBytes =
            saved / static_cast<double>(std::max<int64_t>(1, repeat.getCount()));
      }
      phase = repeat.getReverse() ? 2 : 1;
      cm::FunctionProfile layer = functionProfile(step, repeat.getCallee());
      addProfile(costs.layer, layer);
      if (!repeat.getReverse())
        addProfile(costs.layerForward, layer);
      continue;
    }
    cm::FunctionProfile part =
        toProfile(computeOpCost(step, &op), sharding::predictOpCollectives(step, &op));
    addProfile(phase == 1 ? costs.last : costs.first, part);
    if (phase == 0)
      addProfile(costs.firstForward, part);
    else if (phase == 1 && lossSlice.contains(&op))
      addProfile(costs.lastForward, part);
  }
  costs.layerBackwardWeight = functionProfile(step, weightPart);
  // W's arguments after the backward's own (but the result gradients) are B's stash.
  if (auto weight = step.lookupSymbol<func::FuncOp>(weightPart))
    for (Type type : weight.getArgumentTypes().take_back(weightStashArgs))
      costs.layerWeightStashBytes += static_cast<double>(mt::getSizeInBytes(type));
  if (!sawForward)
    return llvm::createStringError("forward_backward has no layer stack (mt.repeat)");
  // The layers' own values: the largest of a layer function's results too.
  for (auto func : step.getOps<func::FuncOp>())
    if (func->hasAttr("mt.layer_of"))
      func.walk([&](Operation *op) {
        for (Type type : op->getResultTypes())
          largest = std::max(largest, mt::getSizeInBytes(type));
      });
  costs.largestValueBytes = static_cast<double>(largest);
  costs.scalesWithMicroBatch =
      computeFunctionCost(step, "forward_backward").unbatchedGemmFlops == 0;
  costs.optimizer = functionProfile(step, "optimizer_step");

  // Each rank's parameters (their layouts on the mesh), a layer's and the rest's.
  FailureOr<sharding::ShardingSpec> spec = sharding::getShardingSpec(trained);
  if (failed(spec))
    return llvm::createStringError("the layout is not supported by the partitioner");
  if (spec->mesh)
    for (auto [name, size] : llvm::zip(spec->mesh.getAxisNames(), spec->mesh.getAxisSizes()))
      costs.meshAxes.emplace_back(name.getValue().str(), size);
  costs.meshSize = 1;
  for (const auto &axis : costs.meshAxes)
    costs.meshSize *= axis.second;
  for (auto param : trained.getOps<mt::ParamOp>()) {
    auto type = cast<mt::NamedTensorType>(param.getType());
    int64_t bytes = mt::getSizeInBytes(type);
    if (spec->mesh) {
      FailureOr<mtp::ShardedTensorType> layout =
          sharding::parameterLayout(*spec, type, [&] { return param.emitError(); });
      if (failed(layout))
        return llvm::createStringError("a parameter's layout does not fit the mesh");
      bytes = mt::getSizeInBytes(layout->getLocalType());
    }
    ++costs.paramTensors;
    if (param.getLayer())
      ++costs.layerParamTensors;
    // mtrun keeps every parameter in f32 (runtime/exec/Trainer.h).
    double f32 = static_cast<double>(bytes) * 4 / mt::getElementSizeInBytes(type.getElementType());
    (param.getLayer() ? costs.layerParamBytes : costs.restParamBytes) += f32;
    double &largest = param.getLayer() ? costs.largestLayerParamBytes : costs.largestRestParamBytes;
    largest = std::max(largest, f32);
  }
  MemoryPrediction memory = predictMemory(trained, std::nullopt);
  costs.stateRatio = memory.parameters > 0 ? static_cast<double>(memory.optimizerState) /
                                                 static_cast<double>(memory.parameters)
                                           : 2;
  costs.tokenBytes = static_cast<double>(memory.tokens);
  return llvm::Error::success();
}

/// The pipeline schedules the search simulates, generated as the compiler generates a
/// plan's (compiler/pipeline/Schedules.h) and kept for the other layouts of the same shape.
class ScheduleCache {
public:
  explicit ScheduleCache(MLIRContext *context)
      : scratch(ModuleOp::create(UnknownLoc::get(context))) {
    context->getOrLoadDialect<mts::MTSDialect>();
  }

  llvm::Expected<const rt::PipelineSchedule *> get(StringRef kind, int64_t stages,
                                                   int64_t virtualStages, int64_t microBatches) {
    std::string key = llvm::formatv("{0} {1} {2} {3}", kind, stages, virtualStages, microBatches);
    auto it = cache.find(key);
    if (it != cache.end())
      return &it->second;
    std::optional<mts::ScheduleKind> parsed = mts::symbolizeScheduleKind(kind);
    if (!parsed)
      return llvm::createStringError("no pipeline schedule '" + kind.str() + "'");
    MLIRContext *context = scratch->getContext();
    std::string refusal;
    ScopedDiagnosticHandler quiet(context, [&](Diagnostic &diag) {
      refusal = diag.str();
      return success();
    });
    OpBuilder builder = OpBuilder::atBlockEnd(scratch->getBody());
    FailureOr<mts::ScheduleOp> built = pipeline::buildSchedule(builder, scratch->getLoc(), *parsed,
                                                               stages, virtualStages, microBatches);
    if (failed(built))
      return llvm::createStringError(refusal);
    rt::PipelineSchedule schedule;
    schedule.microBatches = microBatches;
    for (mts::StageOp stage : built->getStageOps()) {
      rt::StageTasks &tasks = schedule.stages.emplace_back();
      for (Operation &op : stage.getBody().front())
        if (std::optional<mts::Task> task = mts::getTask(&op))
          tasks.tasks.push_back({*rt::parseTaskOp(mts::stringifyTaskKind(task->kind).str()),
                                 static_cast<int32_t>(task->chunk),
                                 static_cast<int32_t>(task->microBatch),
                                 static_cast<int32_t>(task->peer)});
    }
    built->erase();
    return &cache.emplace(key, std::move(schedule)).first->second;
  }

private:
  OwningOpRef<ModuleOp> scratch;
  std::map<std::string, rt::PipelineSchedule> cache;
};

/// Swallows the diagnostics of a candidate the compiler refuses, keeping the first message.
class Quiet {
public:
  explicit Quiet(MLIRContext *context)
      : handler(context, [this](Diagnostic &diag) {
          if (diag.getSeverity() == DiagnosticSeverity::Error && first.empty())
            first = diag.str();
          return success();
        }) {}
  std::string first;

private:
  ScopedDiagnosticHandler handler;
};

std::string gib(double bytes) {
  if (bytes < 1024.0 * 1024 * 1024)
    return llvm::formatv("{0:F1} MiB", bytes / (1024.0 * 1024)).str();
  return llvm::formatv("{0:F1} GiB", bytes / (1024.0 * 1024 * 1024)).str();
}

std::string secondsText(double s) {
  return s >= 1 ? llvm::formatv("{0:F3} s", s).str() : llvm::formatv("{0:F2} ms", s * 1e3).str();
}

/// The named dimensions of the model and their sizes.
int64_t dimOf(ModuleOp model, StringRef name) {
  auto dims = model->getAttrOfType<DictionaryAttr>(mt::MTDialect::kDimsAttrName);
  if (auto size = dims ? dims.getAs<IntegerAttr>(name) : nullptr)
    return size.getInt();
  return 0;
}

bool divides(int64_t degree, int64_t size) { return size == 0 || size % degree == 0; }

} // namespace

llvm::Expected<cm::LayerCosts> mtc::measureLayerCosts(ModuleOp model,
                                                      const cm::LayerLayout &layout) {
  OwningOpRef<ModuleOp> module(model.clone());
  MLIRContext *ctx = module->getContext();
  Quiet quiet(ctx);
  auto refused = [&](StringRef what) {
    return llvm::createStringError(what.str() + (quiet.first.empty() ? "" : ": " + quiet.first));
  };
  auto recompute = mt::symbolizeRecomputePolicy(layout.recompute);
  auto one = [](int64_t n) { return n > 1 ? std::optional<int64_t>(n) : std::nullopt; };
  auto parallel = mt::ParallelAttr::get(ctx, /*autoSearch=*/false, one(layout.tp), std::nullopt,
                                        std::nullopt, one(layout.cp), one(layout.ep), std::nullopt,
                                        layout.sp ? std::optional<bool>(true) : std::nullopt,
                                        std::nullopt, std::nullopt, std::nullopt, recompute,
                                        std::nullopt, nullptr, nullptr, std::nullopt);
  (*module)->setAttr(mt::MTDialect::kParallelAttrName, parallel);
  PassManager training(ctx);
  TrainingPipelineOptions options;
  options.recompute = layout.recompute;
  buildTrainingPipeline(training, options);
  if (failed(training.run(*module)))
    return refused("the training pipeline fails");
  OwningOpRef<ModuleOp> step(module->clone());
  // The layer backward split into B and W (as the pipeline's chunks are), for W's cost.
  std::string weightPart;
  unsigned weightStashArgs = 0;
  for (auto func : llvm::make_early_inc_range(step->getOps<func::FuncOp>()))
    if (func->hasAttr("mt.param_grads") && func->hasAttr(mt::MTDialect::kLayerOfAttrName)) {
      FailureOr<autodiff::BackwardParts> parts = autodiff::splitLayerBackward(func);
      if (failed(parts))
        return refused("the layer backward cannot be split");
      weightPart = parts->weight.getSymName().str();
      weightStashArgs =
          parts->weight.getNumArguments() - (func.getNumArguments() - parts->numResultGrads);
    }
  if (failed(runPipeline(*step, buildPartitionPipeline)))
    return refused("the partition fails");
  cm::LayerCosts costs;
  costs.layout = layout;
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  costs.microBatch =
      forward ? cast<mt::NamedTensorType>(forward.getArgumentTypes().front()).getDimSizes().front()
              : 1;
  if (llvm::Error err = decompose(*module, *step, weightPart, weightStashArgs, costs))
    return std::move(err);
  return costs;
}

void mtc::setTrainSetting(frontend::Module &ast, llvm::StringRef key, int64_t value) {
  if (!ast.train)
    ast.train.emplace().kind = "train";
  for (frontend::ConfigEntry &entry : ast.train->entries)
    if (entry.key == key && entry.value && entry.value->kind == frontend::Expr::Kind::Number) {
      entry.value->number = static_cast<double>(value);
      return;
    }
  frontend::ConfigEntry entry;
  entry.key = key.str();
  entry.value = std::make_unique<frontend::Expr>(frontend::Expr::Kind::Number);
  entry.value->isInteger = true;
  entry.value->number = static_cast<double>(value);
  ast.train->entries.push_back(std::move(entry));
}

void mtc::applyChoice(ModuleOp module, const AutoChoice &choice) {
  MLIRContext *ctx = module.getContext();
  Builder b(ctx);
  const cm::LayerLayout &in = choice.inLayer;
  const cm::Layout &l = choice.layout;
  auto one = [](int64_t n) { return n > 1 ? std::optional<int64_t>(n) : std::nullopt; };
  std::optional<mt::PipelineSchedule> schedule;
  if (l.pp > 1)
    schedule = mt::symbolizePipelineSchedule(l.schedule);
  DenseI64ArrayAttr pipelineLayers =
      l.pp > 1 ? b.getDenseI64ArrayAttr(choice.chunkLayers) : nullptr;
  bool distributed = l.zeroStage >= 1;
  auto parallel = mt::ParallelAttr::get(
      ctx, /*autoSearch=*/false, one(in.tp), one(l.pp),
      distributed ? std::optional<int64_t>(l.dp) : std::nullopt, one(in.cp), one(in.ep),
      std::nullopt, in.sp ? std::optional<bool>(true) : std::nullopt, schedule,
      one(l.virtualStages), std::nullopt, mt::symbolizeRecomputePolicy(in.recompute),
      distributed ? std::optional<bool>(true) : std::nullopt, nullptr, pipelineLayers,
      std::nullopt);
  module->setAttr(mt::MTDialect::kParallelAttrName, parallel);
  if (l.zeroStage >= 2)
    module->setAttr(sharding::kZeroStageAttrName, b.getI64IntegerAttr(l.zeroStage));
}

namespace {

/// The cluster and the search's options for `model` on the request's GPUs; errors name the
/// flag.
llvm::Error prepare(ModuleOp model, const SearchRequest &request, cm::Cluster &cluster,
                    cm::SearchOptions &options, ModelStats &stats) {
  llvm::Expected<cm::Cluster> loaded = cm::loadCluster(request.cluster);
  if (!loaded)
    return loaded.takeError();
  cluster = std::move(*loaded);
  if (request.gpus < 1)
    return llvm::createStringError("--gpus must be at least 1");
  if (request.gpus > 1000000)
    return llvm::createStringError(
        llvm::formatv("--gpus {0} is not a cluster size the search considers (at most "
                      "1000000)",
                      request.gpus)
            .str());
  int64_t perNode = cluster.devicesPerNode;
  if (request.gpus > perNode && request.gpus % perNode != 0)
    return llvm::createStringError(
        llvm::formatv("--gpus {0} does not fill whole nodes of {1} ({2} devices each)",
                      request.gpus, cluster.name, perNode)
            .str());
  FailureOr<ModelStats> computed = computeModelStats(model);
  if (failed(computed))
    return llvm::createStringError("the model's statistics cannot be computed");
  stats = std::move(*computed);
  mt::TrainAttr train = mt::TrainAttr::lookup(model);
  options.gpus = request.gpus;
  options.ranksPerNode = std::min(perNode, request.gpus);
  int64_t microBatch = dimOf(model, "batch");
  options.globalBatch = train && train.getGlobalBatch() ? *train.getGlobalBatch() : microBatch;
  options.seq = microBatch > 0 ? stats.tokensPerMicroBatch / microBatch : 1;
  options.modelFlopsPerToken = stats.forwardFlopsPerToken + stats.backwardFlopsPerToken;
  // The matrix products run at the peak of the model's precision (bf16 under --bf16 or
  // `precision bf16`), as `mtc simulate` times a plan by its precision.
  options.dtype = train && train.getPrecision()
                      ? cm::peakFlopsKey(mt::stringifyPrecision(*train.getPrecision()))
                      : "f32";
  return llvm::Error::success();
}

} // namespace

llvm::Error mtc::evaluateLayout(ModuleOp model, const SearchRequest &request, StringRef spec,
                                llvm::raw_ostream &os) {
  cm::Cluster cluster;
  cm::SearchOptions options;
  ModelStats stats;
  if (llvm::Error err = prepare(model, request, cluster, options, stats))
    return err;
  ScheduleCache schedules(model.getContext());
  options.schedules = [&](StringRef kind, int64_t p, int64_t v, int64_t m) {
    return schedules.get(kind, p, v, m);
  };
  cm::LayerLayout inLayer;
  cm::Layout layout;
  layout.microBatch = dimOf(model, "batch");
  std::string schedule;
  SmallVector<StringRef> items;
  spec.split(items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [key, value] = item.trim().split('=');
    int64_t n = 0;
    bool number = !value.getAsInteger(10, n) && n >= 0;
    auto bad = [&] {
      return llvm::createStringError("--evaluate: '" + item.str() +
                                     "' is not tp=N, cp=N, ep=N, pp=N, dp=N, vpp=N, mbs=N, "
                                     "zero=N, recompute=none|selective|full, "
                                     "schedule=1f1b|interleaved|zb-h1|zb-v or sp");
    };
    if (key == "sp" && value.empty()) {
      inLayer.sp = true;
    } else if (key == "recompute" && llvm::is_contained({"none", "selective", "full"}, value)) {
      inLayer.recompute = value.str();
    } else if (key == "schedule" &&
               llvm::is_contained({"1f1b", "interleaved", "zb-h1", "zb-v"}, value)) {
      schedule = value.str();
    } else if (!number || n < (key == "zero" ? 0 : 1)) {
      return bad();
    } else if (key == "tp") {
      inLayer.tp = n;
    } else if (key == "cp") {
      inLayer.cp = n;
    } else if (key == "ep") {
      inLayer.ep = n;
    } else if (key == "pp") {
      layout.pp = n;
    } else if (key == "dp") {
      layout.dp = n;
    } else if (key == "vpp") {
      layout.virtualStages = n;
    } else if (key == "mbs") {
      layout.microBatch = n;
    } else if (key == "zero") {
      layout.zeroStage = n;
    } else {
      return bad();
    }
  }
  layout.schedule = layout.pp == 1             ? "none"
                    : !schedule.empty()        ? schedule
                    : layout.virtualStages > 1 ? "interleaved"
                                               : "1f1b";
  // zb-v's two chunks per stage are its shape, not a choice (as `mtc compile` sets them).
  if (layout.schedule == "zb-v")
    layout.virtualStages = 2;
  llvm::Expected<cm::LayerCosts> costs = measureLayerCosts(model, inLayer);
  if (!costs)
    return costs.takeError();
  llvm::Expected<cm::Candidate> c = cm::composeLayout(*costs, layout, cluster, options);
  if (!c)
    return c.takeError();
  os << llvm::formatv("layout:    {0}\n", cm::describeLayout(*c));
  os << llvm::formatv("step:      {0:E6} s composed\n", c->stepSeconds);
  os << llvm::formatv("  compute {0}, layer collectives {1}, data-parallel reduction {2}, "
                      "bubble {3}\n",
                      secondsText(c->computeSeconds), secondsText(c->layerCommunicationSeconds),
                      secondsText(c->dataParallelSeconds), secondsText(c->bubbleSeconds));
  os << llvm::formatv("MFU:       {0:F2}%\n", 100 * c->mfu);
  os << llvm::formatv("per layer: {0} parameters, {1} saved per micro-batch of {2} ({3} more "
                      "from B until W); rest {4} parameters; largest value {5}\n",
                      gib(costs->layerParamBytes), gib(costs->layerSavedBytes), costs->microBatch,
                      gib(costs->layerWeightStashBytes), gib(costs->restParamBytes),
                      gib(costs->largestValueBytes));
  os << llvm::formatv("memory:    {0} per rank ({1} bytes; {2})\n", gib(c->memoryBytes),
                      static_cast<int64_t>(c->memoryBytes), c->fits ? "fits" : "does not fit");
  auto perStage = [&](llvm::StringRef what, const std::vector<double> &bytes) {
    os << what << ", per stage:";
    for (double b : bytes)
      os << " " << static_cast<int64_t>(b);
    os << " bytes\n";
  };
  perStage("memory", c->stageMemoryBytes);
  perStage("activations held", c->stageActivationBytes);
  return llvm::Error::success();
}

llvm::Expected<AutoChoice> mtc::searchModel(ModuleOp model, const SearchRequest &request,
                                            bool table, llvm::raw_ostream &os) {
  cm::Cluster cluster;
  cm::SearchOptions options;
  ModelStats stats;
  if (llvm::Error err = prepare(model, request, cluster, options, stats))
    return std::move(err);
  ScheduleCache schedules(model.getContext());
  options.schedules = [&](StringRef kind, int64_t p, int64_t v, int64_t m) {
    return schedules.get(kind, p, v, m);
  };
  int64_t perNode = cluster.devicesPerNode;

  // The layouts inside a layer the compiler accepts: each degree dividing what it splits
  // (Megatron's tp dims, seq for sp and cp, the experts for ep), tp x cp inside a node.
  int64_t heads = dimOf(model, "heads"), kvHeads = dimOf(model, "kv_heads"),
          ffn = dimOf(model, "ffn"), seq = dimOf(model, "seq"), experts = dimOf(model, "experts");
  std::vector<cm::LayerLayout> layouts;
  for (int64_t tp = 1; tp <= perNode && tp <= request.gpus; tp *= 2) {
    if (!divides(tp, heads) || !divides(tp, kvHeads) || !divides(tp, ffn))
      continue;
    for (int64_t cp = 1; cp <= 8 && tp * cp <= std::min(perNode, request.gpus); cp *= 2) {
      if (!divides(cp, seq) || (cp > 1 && seq < 2048))
        continue;
      for (int64_t ep = 1; ep <= std::max<int64_t>(1, std::min<int64_t>(experts, 8)); ep *= 2) {
        if (experts ? experts % ep != 0 : ep > 1)
          continue;
        if (tp * cp * ep > request.gpus)
          continue;
        for (bool sp : {false, true}) {
          if (sp && (tp == 1 || !divides(tp * cp, seq)))
            continue;
          for (const char *recompute : {"none", "selective", "full"})
            layouts.push_back({tp, cp, ep, sp, recompute});
        }
      }
    }
  }
  std::vector<cm::LayerCosts> measured;
  std::vector<std::string> refused;
  for (const cm::LayerLayout &layout : layouts) {
    llvm::Expected<cm::LayerCosts> costs = measureLayerCosts(model, layout);
    if (!costs) {
      refused.push_back(llvm::toString(costs.takeError()));
      continue;
    }
    measured.push_back(std::move(*costs));
  }
  cm::SearchResult result = cm::searchLayouts(measured, cluster, options);
  os << llvm::formatv("model {0}: {1} parameters; {2} x {3} ({4}), global batch {5} x {6} "
                      "tokens, {7}\n",
                      stats.modelName, stats.totalParams, request.gpus, cluster.deviceName,
                      cluster.name, options.globalBatch, options.seq, options.dtype);
  os << llvm::formatv("searched: {0} layouts inside a layer compiled ({1} refused by the "
                      "compiler), {2} layouts composed, {3} pruned by memory ({4} per device), "
                      "{5} fit\n",
                      measured.size(), refused.size(), result.enumerated, result.prunedByMemory,
                      gib(static_cast<double>(cluster.memoryBytes)), result.fitting.size());
  if (result.fitting.empty()) {
    std::string need = result.smallest ? llvm::formatv("the smallest ({0}) needs {1} per rank",
                                                       cm::describeLayout(*result.smallest),
                                                       gib(result.smallest->memoryBytes))
                                             .str()
                                       : "no layout could be composed for this GPU count and batch";
    return llvm::createStringError(
        llvm::formatv("no layout of model {0} fits {1} GPUs of {2}: device memory is the "
                      "limiting resource ({3} per device); {4}",
                      stats.modelName, request.gpus, cluster.name,
                      gib(static_cast<double>(cluster.memoryBytes)), need)
            .str());
  }
  if (table) {
    os << "\nPareto front (predicted step time against memory per rank; fastest first):\n";
    cm::printParetoTable(result, cluster, static_cast<size_t>(request.rows), os);
    os << "\n";
  }
  const cm::Candidate &best = result.fitting.front();
  os << llvm::formatv("chosen:    {0}: step {1}, MFU {2:F1}%, {3} per rank\n",
                      cm::describeLayout(best), secondsText(best.stepSeconds), 100 * best.mfu,
                      gib(best.memoryBytes));
  if (result.fitting.size() > 1) {
    const cm::Candidate &second = result.fitting[1];
    os << llvm::formatv("runner-up: {0}: step {1} (+{2:F1}%), {3} per rank\n",
                        cm::describeLayout(second), secondsText(second.stepSeconds),
                        100 * (second.stepSeconds / best.stepSeconds - 1), gib(second.memoryBytes));
  }
  // What limits the choice: faster layouts that do not fit, and where its step goes.
  if (!result.tooLarge.empty()) {
    const cm::Candidate &faster = result.tooLarge.front();
    os << llvm::formatv("limited by memory: {0} would take {1} but needs {2} per rank of "
                        "{3}\n",
                        cm::describeLayout(faster), secondsText(faster.stepSeconds),
                        gib(faster.memoryBytes), gib(static_cast<double>(cluster.memoryBytes)));
  }
  auto share = [&](double part) { return 100 * part / best.stepSeconds; };
  std::string limit = "compute";
  double most = best.computeSeconds;
  if (best.layerCommunicationSeconds > most) {
    limit = "the layers' collectives (tp/cp/ep)";
    most = best.layerCommunicationSeconds;
  }
  if (best.dataParallelSeconds > most) {
    limit = "the data-parallel gradient reduction";
    most = best.dataParallelSeconds;
  }
  if (best.bubbleSeconds > most)
    limit = "the pipeline bubble";
  os << llvm::formatv("its step: compute {0:F1}%, layer collectives {1:F1}%, data-parallel "
                      "reduction {2:F1}%, pipeline bubble {3:F1}%: bound by {4}\n",
                      share(best.computeSeconds), share(best.layerCommunicationSeconds),
                      share(best.dataParallelSeconds), share(best.bubbleSeconds), limit);
  AutoChoice choice;
  choice.inLayer = best.costs->layout;
  choice.layout = best.layout;
  choice.chunkLayers = best.chunkLayers;
  return choice;
}
