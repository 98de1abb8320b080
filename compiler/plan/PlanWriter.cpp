//===- PlanWriter.cpp - writing the plan directory ------------------------===//

#include "compiler/plan/PlanWriter.h"
#include "compiler/plan/PipelinePlan.h"

#include "compiler/plan/CallingConvention.h"

#include "compiler/sharding/Layout.h"
#include "compiler/transforms/DataInputs.h"
#include "compiler/transforms/ResetDocuments.h"

#include "dialects/mt/IR/MTOps.h"
#include "runtime/plan/Plan.h"
#include "dialects/mt/Utils/TensorSize.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mtc;
namespace json = llvm::json;

std::string mtc::sha256Hex(llvm::StringRef bytes) {
  std::array<uint8_t, 32> digest = llvm::SHA256::hash(llvm::arrayRefFromStringRef(bytes));
  return llvm::toHex(digest, /*LowerCase=*/true);
}

namespace {

json::Array dimsJson(mt::NamedTensorType type) {
  json::Array dims;
  for (const mt::NamedDim &dim : type.getDims())
    dims.push_back(json::Object{{"name", dim.name.getValue()}, {"size", dim.size}});
  return dims;
}

/// `#mt.train` / `#mt.parallel` as plan.json's `train` / `parallel` objects: one key per
/// field that is set, named as in the DSL (docs/plan-format.md).
class SettingsJson {
public:
  void set(llvm::StringRef key, std::optional<int64_t> value) {
    if (value)
      object[key] = *value;
  }
  void set(llvm::StringRef key, std::optional<bool> value) {
    if (value)
      object[key] = *value;
  }
  void set(llvm::StringRef key, FloatAttr value) {
    if (value)
      object[key] = value.getValueAsDouble();
  }
  void set(llvm::StringRef key, json::Value value) { object[key] = std::move(value); }
  json::Object take() { return std::move(object); }

private:
  json::Object object;
};

json::Object trainJson(mt::TrainAttr train) {
  SettingsJson json;
  if (mt::OptimizerAttr optimizer = train.getOptimizer()) {
    SettingsJson args;
    args.set("kind", mt::stringifyOptimizerKind(optimizer.getKind()));
    args.set("lr", optimizer.getLr());
    if (DenseF64ArrayAttr betas = optimizer.getBetas())
      args.set("betas", json::Array(betas.asArrayRef()));
    args.set("eps", optimizer.getEps());
    args.set("weight_decay", optimizer.getWeightDecay());
    args.set("momentum", optimizer.getMomentum());
    json.set("optimizer", args.take());
  }
  if (mt::LrScheduleAttr lr = train.getLr()) {
    SettingsJson args;
    args.set("kind", mt::stringifyLrScheduleKind(lr.getKind()));
    args.set("warmup", lr.getWarmup());
    args.set("min", lr.getMin());
    args.set("decay_steps", lr.getDecaySteps());
    json.set("lr", args.take());
  }
  json.set("global_batch", train.getGlobalBatch());
  json.set("micro_batch", train.getMicroBatch());
  json.set("clip_grad", train.getClipGrad());
  if (train.getPrecision())
    json.set("precision", mt::stringifyPrecision(*train.getPrecision()));
  json.set("seed", train.getSeed());
  json.set("steps", train.getSteps());
  json.set("dropout", train.getDropout());
  json.set("eod_mask_loss", train.getEodMaskLoss());
  return json.take();
}

json::Object parallelJson(mt::ParallelAttr parallel) {
  SettingsJson json;
  if (parallel.getAutoSearch())
    json.set("auto", std::optional<bool>(true));
  json.set("tp", parallel.getTp());
  json.set("pp", parallel.getPp());
  json.set("dp", parallel.getDp());
  json.set("cp", parallel.getCp());
  // How context parallelism exchanges keys and values: all-gathered (the default) or
  // around a ring (p2p).
  if (parallel.getCp().value_or(1) > 1)
    json.set("cp_comm_type",
             json::Value(mt::stringifyContextParallelCommType(
                             parallel.getCpCommType().value_or(mt::ContextParallelCommType::AllGather))
                             .str()));
  json.set("ep", parallel.getEp());
  json.set("etp", parallel.getEtp());
  json.set("sp", parallel.getSp());
  if (parallel.getSchedule())
    json.set("schedule", mt::stringifyPipelineSchedule(*parallel.getSchedule()));
  json.set("virtual_stages", parallel.getVirtualStages());
  json.set("micro_batches", parallel.getMicroBatches());
  if (parallel.getRecompute())
    json.set("recompute", mt::stringifyRecomputePolicy(*parallel.getRecompute()));
  json.set("distributed_optimizer", parallel.getDistributedOptimizer());
  if (DictionaryAttr layout = parallel.getLayout()) {
    json::Object pairs;
    for (NamedAttribute entry : layout)
      pairs[entry.getName().getValue()] = cast<StringAttr>(entry.getValue()).getValue();
    json.set("layout", std::move(pairs));
  }
  if (DenseI64ArrayAttr layers = parallel.getPipelineLayers())
    json.set("pipeline_layers", json::Array(layers.asArrayRef()));
  return json.take();
}

llvm::Error writeFile(const llvm::Twine &path, llvm::StringRef bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path.str(), ec, llvm::sys::fs::OF_None);
  if (ec)
    return llvm::createStringError(ec, "cannot write '%s': %s", path.str().c_str(),
                                   ec.message().c_str());
  os << bytes;
  os.close();
  if (os.has_error())
    return llvm::createStringError(os.error(), "cannot write '%s'", path.str().c_str());
  return llvm::Error::success();
}

/// The model's vocabulary: the dimension its loss classifies over (`mt.cross_entropy` in
/// `forward`) and its token ids index (`mt.gather` of `forward`'s first argument, the
/// tokens). The runtime draws token ids (inputs and labels) below its size, so where the two
/// differ the smaller one is the vocabulary. None for a model with neither.
std::optional<std::pair<StringRef, int64_t>> findVocabulary(func::FuncOp forward) {
  std::optional<std::pair<StringRef, int64_t>> vocabulary;
  auto consider = [&](StringRef dim, mt::NamedTensorType type) {
    int64_t size = type.getDimSize(dim);
    if (!vocabulary || size < vocabulary->second)
      vocabulary = {dim, size};
  };
  Value tokens = forward.getNumArguments() ? forward.getArgument(0) : Value();
  forward.walk([&](Operation *op) {
    if (auto loss = dyn_cast<mt::CrossEntropyOp>(op))
      consider(loss.getDim(), cast<mt::NamedTensorType>(loss.getLogits().getType()));
    else if (auto lookup = dyn_cast<mt::GatherOp>(op); lookup && lookup.getIndices() == tokens)
      consider(lookup.getDim(), cast<mt::NamedTensorType>(lookup.getTable().getType()));
  });
  return vocabulary;
}

/// The micro-batches of one step at dp = 1: the global batch over the micro-batch (the
/// first dimension of the entry's token ids), as the runtime splits it.
int64_t stepMicroBatches(ModuleOp trained) {
  auto forward = trained.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.getNumArguments() == 0)
    return 1;
  int64_t microBatch =
      cast<mt::NamedTensorType>(forward.getArgumentTypes().front()).getDimSizes().front();
  int64_t globalBatch = microBatch;
  if (mt::TrainAttr train = mt::TrainAttr::lookup(trained))
    globalBatch = train.getGlobalBatch().value_or(microBatch);
  return std::max<int64_t>(1, globalBatch / microBatch);
}

/// `predictions.functions` (docs/plan-format.md, "Predictions"): per call of each step
/// function on one rank, its matrix products, the bytes its other ops move, its op count and
/// its collectives, for the cost model (compiler/costmodel).
json::Object functionCostsJson(const std::map<std::string, FunctionCost> &costs,
                               const sharding::CollectiveBytes &collectives) {
  json::Object functions;
  for (const auto &[name, cost] : costs) {
    json::Array gemms;
    for (const GemmCount &gemm : cost.gemms)
      gemms.push_back(json::Object{{"flops", gemm.flops}, {"count", gemm.count}});
    json::Array calls;
    if (auto it = collectives.calls.find(name); it != collectives.calls.end())
      for (const sharding::CollectiveCall &call : it->second)
        calls.push_back(json::Object{{"kind", call.kind},
                                     {"axis", call.axis},
                                     {"group", call.groupSize},
                                     {"bytes", call.bytes},
                                     {"count", call.count}});
    functions[name] = json::Object{{"gemms", std::move(gemms)},
                                   {"traffic_bytes", cost.trafficBytes},
                                   {"ops", cost.ops},
                                   {"collectives", std::move(calls)}};
  }
  return functions;
}

json::Object buildManifestJson(ModuleOp trained, const ModelStats &stats,
                               const PlanSource &source, std::optional<int64_t> workspace,
                               const sharding::CollectiveBytes *collectives,
                               const std::map<std::string, FunctionCost> *functionCosts) {
  MLIRContext *context = trained.getContext();
  json::Object plan;
  plan["format"] = "mtc-plan";
  plan["version"] = rt::kPlanFormatVersion;
  plan["compiler"] = source.compilerVersion;
  plan["model"] = stats.modelName;
  plan["source"] = json::Object{{"path", source.path}, {"sha256", sha256Hex(source.contents)}};

  mt::TrainAttr train = mt::TrainAttr::lookup(trained);
  mt::ParallelAttr parallel = mt::ParallelAttr::lookup(trained);
  plan["seed"] = train ? train.getSeed().value_or(1234) : 1234;

  json::Object dims;
  if (auto dimsAttr = trained->getAttrOfType<DictionaryAttr>(mt::MTDialect::kDimsAttrName))
    for (NamedAttribute dim : dimsAttr)
      dims[dim.getName().getValue()] = cast<IntegerAttr>(dim.getValue()).getInt();
  plan["dims"] = std::move(dims);
  plan["train"] = train ? trainJson(train) : json::Object();
  // --reset-position-ids (a module attribute, mt-reset-documents) is recorded with the
  // train settings it stands beside, as eod_mask_loss is.
  if (trained->hasAttr(transforms::kResetPositionIdsAttrName))
    (*plan.getObject("train"))["reset_position_ids"] = true;
  if (trained->hasAttr(transforms::kResetAttentionMaskAttrName))
    (*plan.getObject("train"))["reset_attention_mask"] = true;
  plan["parallel"] = parallel ? parallelJson(parallel) : json::Object();

  auto forward = trained.lookupSymbol<func::FuncOp>("forward");
  if (std::optional<std::pair<StringRef, int64_t>> vocabulary = findVocabulary(forward)) {
    plan["vocabulary"] = vocabulary->first;
    // The real size: `dims` holds the padded one when mt-pad-vocabulary padded it for tp.
    int64_t size = vocabulary->second;
    if (auto padding = trained->getAttrOfType<DictionaryAttr>(sharding::kVocabularyAttrName);
        padding && padding.getAs<StringAttr>("dim").getValue() == vocabulary->first)
      size = padding.getAs<IntegerAttr>("size").getInt();
    plan["vocabulary_size"] = size;
  }
  json::Array inputs;
  for (auto [index, type] : llvm::enumerate(forward.getArgumentTypes())) {
    auto tensor = cast<mt::NamedTensorType>(type);
    std::string name = transforms::dataInputName(forward, index);
    inputs.push_back(json::Object{{"name", name},
                                  {"dtype", planDTypeName(tensor.getElementType())},
                                  {"dims", dimsJson(tensor)}});
  }
  plan["inputs"] = std::move(inputs);

  // Parameters and their stored types: the optimizer step's gradient arguments are exactly
  // the storage types, in mt.param order.
  auto step = trained.lookupSymbol<func::FuncOp>("optimizer_step");
  TypeRange storage = step.getArgumentTypes().drop_front(2);
  // The layouts the partitioned kernels use (compiler/sharding); writePlan has checked
  // that the spec is valid and that every layout fits.
  std::optional<sharding::ShardingSpec> spec;
  if (FailureOr<sharding::ShardingSpec> s = sharding::getShardingSpec(trained);
      succeeded(s) && s->mesh)
    spec = *s;
  if (spec) {
    json::Array axes;
    for (auto [name, size] : llvm::zip(spec->mesh.getAxisNames(), spec->mesh.getAxisSizes()))
      axes.push_back(json::Object{{"name", name.getValue()}, {"size", size}});
    json::Object mesh{{"axes", std::move(axes)}};
    if (!spec->dataParallelAxis.empty()) {
      mesh["data_parallel_axis"] = spec->dataParallelAxis;
      mesh["zero_stage"] = std::max<int64_t>(sharding::zeroStage(trained), 1);
    }
    plan["mesh"] = std::move(mesh);
  }
  auto splitJson = [](mtp::ShardedTensorType layout) {
    json::Object split;
    for (NamedAttribute dim : layout.getSplit()) {
      json::Array axes;
      for (StringRef axis : layout.getSplitAxes(dim.getName()))
        axes.push_back(axis);
      split[dim.getName().getValue()] = std::move(axes);
    }
    return split;
  };
  json::Array params;
  for (auto [index, param, type] :
       llvm::enumerate(trained.getOps<mt::ParamOp>(), storage)) {
    auto stored = cast<mt::NamedTensorType>(type);
    json::Object entry{{"name", param.getSymName()},
                       {"tensor_id", static_cast<int64_t>(index)},
                       {"dims", dimsJson(stored)},
                       {"dtype", planDTypeName(stored.getElementType())},
                       {"weight_decay", param->hasAttr(mt::MTDialect::kWeightDecayAttrName)}};
    if (std::optional<StringRef> layer = param.getLayer()) {
      entry["layer"] = *layer;
      entry["instances"] = stored.getDimSizes().front();
    } else {
      entry["instances"] = 1;
    }
    if (spec) {
      mt::ParamOp op = param;
      auto emitError = [&] { return op.emitError(); };
      mtp::ShardedTensorType layout = *sharding::parameterLayout(*spec, stored, emitError);
      mtp::ShardedTensorType optimizer = *sharding::optimizerLayout(*spec, stored, emitError);
      if (json::Object split = splitJson(layout); !split.empty())
        entry["layout"] = json::Object{{"split", std::move(split)}};
      if (optimizer != layout)
        entry["optimizer_layout"] = json::Object{{"split", splitJson(optimizer)}};
    }
    json::Array args;
    for (double arg : param.getInit().getArgs().asArrayRef())
      args.push_back(arg);
    entry["init"] = json::Object{{"kind", mt::stringifyInitKind(param.getInit().getKind())},
                                 {"args", std::move(args)}};
    params.push_back(std::move(entry));
  }
  plan["params"] = std::move(params);

  json::Array states;
  for (auto state : trained.getOps<mt::StateOp>()) {
    auto type = cast<mt::NamedTensorType>(state.getType());
    states.push_back(json::Object{{"name", state.getSymName()},
                                  {"of", state.getOf()},
                                  {"dims", dimsJson(type)},
                                  {"dtype", planDTypeName(type.getElementType())}});
  }
  plan["states"] = std::move(states);
  json::Array functions{"forward", "forward_backward", "optimizer_step"};
  // What generation runs (mt-logits), where the model has logits to return.
  if (trained.lookupSymbol<func::FuncOp>("logits"))
    functions.push_back("logits");
  // Cached generation (mt-kv-cache), on single-rank plans.
  for (StringRef name : {"prefill", "decode_step"})
    if (trained.lookupSymbol<func::FuncOp>(name))
      functions.push_back(name);
  plan["functions"] = std::move(functions);

  (void)context;
  MemoryPrediction memory = predictMemory(trained, workspace);
  json::Object memoryJson{
      {"parameters", memory.parameters},
      {"gradients", memory.gradients()},
      {"optimizer_state", memory.optimizerState},
      {"saved_activations", memory.savedActivations},
      {"total", 2 * memory.parameters + memory.optimizerState + memory.savedActivations}};
  if (memory.gradientShards) {
    memoryJson["gradient_shards"] = memory.gradientShards;
    memoryJson["gradient_staging"] = memory.gradientStaging;
  }
  if (std::optional<int64_t> peak = memory.peak()) {
    memoryJson["workspace"] = *memory.workspace;
    memoryJson["peak"] = *peak;
  }
  plan["predictions"] = json::Object{
      {"parameters", stats.totalParams},
      {"flops_per_token", json::Object{{"forward", stats.forwardFlopsPerToken},
                                       {"backward", stats.backwardFlopsPerToken}}},
      {"memory_bytes", std::move(memoryJson)}};
  if (collectives) {
    json::Object bytes{{"forward_backward", collectives->forwardBackward},
                       {"optimizer_step", collectives->optimizerStep}};
    if (collectives->upperBound)
      bytes["upper_bound"] = true;
    for (const auto &[function, sent] : collectives->pipelineFunctions)
      bytes[function] = sent;
    (*plan["predictions"].getAsObject())["communication_bytes"] = std::move(bytes);
  }
  if (collectives && functionCosts)
    (*plan["predictions"].getAsObject())["functions"] =
        functionCostsJson(*functionCosts, *collectives);
  return plan;
}

std::string mebibytes(int64_t bytes) {
  return llvm::formatv("{0:F2} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)).str();
}

} // namespace

bool mtc::usesGradientShards(ModuleOp module) {
  return sharding::zeroStage(module) == 2;
}

MemoryPrediction mtc::predictMemory(ModuleOp trained, std::optional<int64_t> workspace) {
  MemoryPrediction memory;
  memory.workspace = workspace;
  // A rank holds its part of each parameter and state (the whole without a mesh).
  FailureOr<sharding::ShardingSpec> spec = sharding::getShardingSpec(trained);
  // (the optimizer state in its optimizer layout: a part of it with the distributed
  // optimizer).
  auto rankBytes = [&](Type type, Operation *at, bool state) {
    auto named = cast<mt::NamedTensorType>(type);
    auto emitError = [&] { return at->emitError(); };
    if (succeeded(spec) && spec->mesh)
      if (FailureOr<mtp::ShardedTensorType> layout =
              state ? sharding::optimizerLayout(*spec, named, emitError)
                    : sharding::parameterLayout(*spec, named, emitError);
          succeeded(layout))
        return mt::getSizeInBytes(layout->getLocalType());
    return mt::getSizeInBytes(named);
  };
  // The optimizer step's gradient arguments are exactly the parameters' storage types. Under
  // ZeRO-2 a gradient the distributed optimizer shards (its optimizer layout is smaller) is
  // accumulated as its shard, staged whole for the in-place reduce-scatter.
  bool gradientShards = usesGradientShards(trained);
  int64_t allReducedGradients = 0;
  if (auto step = trained.lookupSymbol<func::FuncOp>("optimizer_step"))
    for (Type type : step.getArgumentTypes().drop_front(2)) {
      int64_t bytes = rankBytes(type, step, /*state=*/false);
      memory.parameters += bytes;
      int64_t shard = gradientShards ? rankBytes(type, step, /*state=*/true) : bytes;
      if (shard == bytes) {
        allReducedGradients += bytes;
        continue;
      }
      memory.gradientShards += shard;
      memory.gradientStaging = std::max(memory.gradientStaging, bytes);
    }
  for (auto state : trained.getOps<mt::StateOp>())
    memory.optimizerState += rankBytes(state.getType(), state, /*state=*/true);
  // Saved activations: the stacked results of the layer stack's forward repeats beyond the
  // carried values, i.e. what every layer instance keeps for its backward.
  if (auto step = trained.lookupSymbol<func::FuncOp>("forward_backward"))
    step.walk([&](mt::RepeatOp repeat) {
      if (repeat.getReverse())
        return;
      for (Value saved : repeat.getResults().drop_front(repeat.getNumCarried()))
        memory.savedActivations += mt::getSizeInBytes(saved.getType());
    });
  // Tokens and labels of one micro-batch, int32 like the entry function's arguments, and
  // the f32 loss mask where mt-loss-mask added it; the runtime splits the plan's global
  // batch into micro-batches of the tokens' first dimension.
  mt::TrainAttr trainSettings = mt::TrainAttr::lookup(trained);
  if (auto forward = trained.lookupSymbol<func::FuncOp>("forward");
      forward && forward.getNumArguments() > 0) {
    auto tokens = cast<mt::NamedTensorType>(forward.getArgumentTypes().front());
    memory.tokens = 2 * mt::getSizeInBytes(tokens);
    if (trainSettings && trainSettings.masksLossAtEndOfDocument())
      memory.tokens += mt::getSizeInBytes(forward.getArgumentTypes()[2]);
    // The position ids of mt-reset-documents (named arguments after the others).
    for (unsigned index = 0; index < forward.getNumArguments(); ++index)
      if (forward.getArgAttr(index, transforms::kInputNameAttrName))
        memory.tokens += mt::getSizeInBytes(forward.getArgumentTypes()[index]);
    // Under ZeRO-3 a rank loads its part of the data-parallel group's micro-batch.
    if (succeeded(spec) && spec->shardParameters)
      memory.tokens /= *spec->mesh.getAxisSize(spec->dataParallelAxis);
    int64_t microBatch = tokens.getDimSizes().front(), globalBatch = microBatch;
    if (mt::TrainAttr train = mt::TrainAttr::lookup(trained))
      globalBatch = train.getGlobalBatch().value_or(globalBatch);
    // Under ZeRO-2 the scratch gradients serve a rank's second micro-batch on (the plan fixes
    // the data-parallel degree), and only the all-reduced ones.
    if (!gradientShards && globalBatch > microBatch)
      memory.microBatchGradients = memory.gradients();
    if (gradientShards && succeeded(spec) &&
        globalBatch / microBatch / spec->mesh.getAxisSize(spec->dataParallelAxis).value_or(1) > 1)
      memory.microBatchGradients = allReducedGradients;
  }
  return memory;
}

void mtc::printMemoryPrediction(const MemoryPrediction &memory, llvm::raw_ostream &os) {
  os << "memory per rank:\n";
  auto line = [&](llvm::StringRef what, int64_t bytes) {
    os << llvm::formatv("  {0} {1,14} bytes ({2})\n", llvm::left_justify(what, 38), bytes,
                        mebibytes(bytes));
  };
  line("parameters", memory.parameters);
  line("optimizer state", memory.optimizerState);
  line("gradients", memory.gradients());
  if (memory.microBatchGradients)
    line("micro-batch gradients", memory.microBatchGradients);
  if (memory.gradientShards) {
    line("gradient shards (ZeRO-2)", memory.gradientShards);
    line("gradient staging (ZeRO-2)", memory.gradientStaging);
  }
  line("tokens and labels", memory.tokens);
  line("workspace (the kernels' arena)", memory.workspace.value_or(0));
  line("peak", memory.buffers() + memory.workspace.value_or(0));
}

namespace {

/// The host code of the CUDA kernels.
constexpr llvm::StringLiteral kCudaHostFile = "kernels/cuda_host.so";

/// `kernels/<chip>.<extension>`.
std::string cudaFileName(llvm::StringRef chip, llvm::StringRef extension) {
  return ("kernels/" + chip + "." + extension).str();
}

json::Object describeArgument(const codegen::GPUKernelArgument &argument) {
  using Kind = codegen::GPUKernelArgument::Kind;
  switch (argument.kind) {
  case Kind::Argument:
    return json::Object{{"kind", "arg"}, {"index", argument.argument}, {"bytes", argument.bytes}};
  case Kind::Temporary:
    return json::Object{{"kind", "temp"}, {"bytes", argument.bytes}};
  case Kind::View:
    return json::Object{{"kind", "view"}, {"bytes", argument.bytes}};
  case Kind::Scalar:
    return json::Object{{"kind", "scalar"}, {"type", argument.scalarType}};
  }
  llvm_unreachable("every buffer kind is described");
}

/// `kernels.cuda` (docs/plan-format.md, "Kernels").
json::Object buildCudaKernelsJson(const PlanCudaKernels &cuda) {
  json::Array binaries;
  for (const auto &[chip, ptx] : cuda.step.ptx) {
    json::Object binary{{"chip", chip}, {"ptx", cudaFileName(chip, "ptx")}};
    if (llvm::any_of(cuda.cubins, [&](const auto &cubin) { return cubin.first == chip; }))
      binary["cubin"] = cudaFileName(chip, "cubin");
    binaries.push_back(std::move(binary));
  }
  json::Object functions;
  for (const auto &[function, calls] : cuda.step.calls)
    functions[function] = json::Object{{"calls", json::Array(calls)}, {"launches", json::Array()}};
  for (const codegen::GPUKernelLaunch &launch : cuda.step.launches) {
    json::Array arguments;
    for (const codegen::GPUKernelArgument &argument : launch.arguments)
      arguments.push_back(describeArgument(argument));
    // step.calls lists every function that launches kernels.
    functions.getObject(launch.function)->getArray("launches")->push_back(json::Object{
        {"kernel", launch.kernel},
        {"grid", json::Array{launch.grid[0], launch.grid[1], launch.grid[2]}},
        {"block", json::Array{launch.block[0], launch.block[1], launch.block[2]}},
        {"args", std::move(arguments)}});
  }
  return json::Object{{"block_size", cuda.blockSize},
                      {"binaries", std::move(binaries)},
                      {"functions", std::move(functions)},
                      {"host", json::Object{{"file", kCudaHostFile},
                                            {"workspace_bytes", cuda.workspaceBytes},
                                            {"functions", json::Object(cuda.callingConvention)}}}};
}

} // namespace

llvm::Error mtc::writePlan(ModuleOp trained, const ModelStats &stats, const PlanSource &source,
                           llvm::StringRef path, const PlanKernels *kernels) {
  if (!trained.lookupSymbol<func::FuncOp>("forward") ||
      !trained.lookupSymbol<func::FuncOp>("forward_backward") ||
      !trained.lookupSymbol<func::FuncOp>("optimizer_step"))
    return llvm::createStringError("the module has not been through the training pipeline");
  FailureOr<sharding::ShardingSpec> spec = sharding::getShardingSpec(trained);
  if (failed(spec))
    return llvm::createStringError("the plan's parallel settings are not supported");
  if (spec->mesh)
    for (auto param : trained.getOps<mt::ParamOp>())
      if (failed(sharding::optimizerLayout(*spec, cast<mt::NamedTensorType>(param.getType()),
                                           [&] { return param.emitError(); })))
        return llvm::createStringError("the parallel layout does not fit the parameters");

  std::string planJson;
  {
    // The workspace is the x86 kernels' arena; the CUDA step has no memory plan yet.
    std::optional<int64_t> workspace =
        kernels && kernels->x86SharedObject ? std::optional<int64_t>(kernels->workspaceBytes)
                                            : std::nullopt;
    json::Object manifestJson =
        buildManifestJson(trained, stats, source, workspace,
                          kernels ? &kernels->collectiveBytes : nullptr,
                          kernels ? &kernels->functionCosts : nullptr);
    // Pipeline parallelism: the contract's "pipeline" object (docs/plan-format.md).
    FailureOr<pipeline::StageCut> cut = pipeline::computeStageCut(trained);
    if (failed(cut))
      return llvm::createStringError("the pipeline cut is not possible");
    if (cut->numChunks() > 1) {
      FailureOr<json::Object> pipeline =
          buildPipelineJson(trained, *cut, stepMicroBatches(trained),
                            workspace ? &kernels->callingConvention : nullptr);
      if (failed(pipeline))
        return llvm::createStringError("the pipeline schedules cannot be built");
      manifestJson["pipeline"] = std::move(*pipeline);
    }
    // Without a target (--target=none) the kernels carry only the partitioned step's
    // predictions.
    if (kernels && (kernels->x86SharedObject || kernels->cuda)) {
      json::Object targets;
      if (kernels->x86SharedObject)
        targets["x86_64"] =
            json::Object{{"file", "kernels/x86_64.so"},
                         {"functions", json::Object(kernels->callingConvention)}};
      if (kernels->cuda)
        targets["cuda"] = buildCudaKernelsJson(*kernels->cuda);
      manifestJson["kernels"] = std::move(targets);
    }
    llvm::raw_string_ostream os(planJson);
    os << llvm::formatv("{0:2}", json::Value(std::move(manifestJson))) << "\n";
  }
  std::string program;
  {
    llvm::raw_string_ostream os(program);
    trained.print(os);
  }
  SmallVector<std::pair<StringRef, StringRef>> files = {{"plan.json", planJson},
                                                        {"program.mlir", program}};
  // Owns the names of the CUDA files while `files` refers to them.
  std::vector<std::string> cudaFileNames;
  if (kernels && kernels->x86SharedObject)
    files.push_back({"kernels/x86_64.so", *kernels->x86SharedObject});
  if (kernels && kernels->cuda) {
    const PlanCudaKernels &cuda = *kernels->cuda;
    cudaFileNames.reserve(cuda.step.ptx.size() + cuda.cubins.size());
    for (const auto &[chip, ptx] : cuda.step.ptx)
      files.push_back({cudaFileNames.emplace_back(cudaFileName(chip, "ptx")), ptx});
    for (const auto &[chip, cubin] : cuda.cubins)
      files.push_back({cudaFileNames.emplace_back(cudaFileName(chip, "cubin")), cubin});
    files.push_back({kCudaHostFile, cuda.hostSharedObject});
  }
  std::string manifest = llvm::formatv("mtc-plan {0}\n", rt::kPlanFormatVersion).str();
  for (auto [name, bytes] : files)
    manifest += llvm::formatv("{0} {1} {2}\n", sha256Hex(bytes), bytes.size(), name).str();
  files.push_back({"MANIFEST", manifest});

  // Write next to the destination, then swap it in.
  llvm::SmallString<256> target(path);
  llvm::sys::path::remove_dots(target, /*remove_dot_dot=*/true);
  std::string staging = (target + ".tmp." + llvm::Twine(llvm::sys::Process::getProcessId())).str();
  llvm::sys::fs::remove_directories(staging);
  if (std::error_code ec = llvm::sys::fs::create_directories(staging))
    return llvm::createStringError(ec, "cannot create '%s': %s", staging.c_str(),
                                   ec.message().c_str());
  if (kernels)
    if (std::error_code ec = llvm::sys::fs::create_directories(staging + "/kernels"))
      return llvm::createStringError(ec, "cannot create '%s/kernels': %s", staging.c_str(),
                                     ec.message().c_str());
  for (auto [name, bytes] : files)
    if (llvm::Error err = writeFile(staging + "/" + name, bytes))
      return err;

  std::string previous;
  if (llvm::sys::fs::exists(target)) {
    if (!llvm::sys::fs::is_directory(target) ||
        !llvm::sys::fs::exists(target + "/MANIFEST"))
      return llvm::createStringError("'%s' exists and is not a plan; not replacing it",
                                     target.c_str());
    previous = (target + ".old." + llvm::Twine(llvm::sys::Process::getProcessId())).str();
    if (std::error_code ec = llvm::sys::fs::rename(target, previous))
      return llvm::createStringError(ec, "cannot replace '%s': %s", target.c_str(),
                                     ec.message().c_str());
  }
  if (std::error_code ec = llvm::sys::fs::rename(staging, target))
    return llvm::createStringError(ec, "cannot move the plan to '%s': %s", target.c_str(),
                                   ec.message().c_str());
  if (!previous.empty())
    llvm::sys::fs::remove_directories(previous);
  return llvm::Error::success();
}
