//===- PipelineOptimizer.cpp - per-stage gradient squares and optimizer step ===//
//
// Builds, for every pipeline stage, the functions the runtime calls instead of the
// whole-model @optimizer_step (Passes.td describes the contract). Which parameters a
// stage holds comes from its chunk functions (the parameters they take or return a
// gradient for); a layer parameter's stage storage packs the stage's chunks' layers in
// chunk order. The update math is OptimizerUpdate.h's, shared with mt-optimizer.
//
//===----------------------------------------------------------------------===//

#include "compiler/optimizer/OptimizerUpdate.h"
#include "compiler/pipeline/Passes.h"
#include "compiler/transforms/Passes.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/TensorBuilder.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace mtc::pipeline {
#define GEN_PASS_DEF_MTPIPELINEOPTIMIZERPASS
#include "compiler/pipeline/Passes.h.inc"
} // namespace mtc::pipeline

using namespace mlir;
using namespace mtc;
using namespace mtc::optimizer;

namespace {


/// One argument or result of a function under construction.
struct Slot {
  Type type;
  DictionaryAttr attrs;
};

/// What one stage holds.
struct Stage {
  int64_t layers = 0;
  /// The parameters the stage holds, in mt.param order, and whether grad_squares counts
  /// each one's gradient.
  SmallVector<std::pair<mt::ParamOp, bool>> params;
};

class PipelineOptimizerPass
    : public mtc::pipeline::impl::MTPipelineOptimizerPassBase<PipelineOptimizerPass> {
public:
  void runOnOperation() override;

private:
  /// `type` (a storage type of the whole model) in the storage of a stage of `layers`
  /// layers: a layer parameter's leading `layers` dimension resized.
  Type stageType(Type type, bool layered, int64_t layers) const;
  void buildGradSquares(int64_t index, const Stage &stage);
  void buildOptimizerStep(int64_t index, const Stage &stage);
  func::FuncOp createFunction(StringRef name, int64_t index, ArrayRef<Slot> args,
                              ArrayRef<Slot> results);

  ModuleOp module;
  func::FuncOp wholeStep;
  OptimizerSettings settings;
  /// The gradient type of every parameter in the whole model's storage.
  llvm::StringMap<Type> gradTypes;
};

Type PipelineOptimizerPass::stageType(Type type, bool layered, int64_t layers) const {
  auto tensor = cast<mt::NamedTensorType>(type);
  if (!layered || tensor.getRank() == 0 || tensor.getDims().front().name != mt::MTDialect::kLayersDimName)
    return type;
  SmallVector<mt::NamedDim> dims(tensor.getDims());
  dims.front().size = layers;
  return tensor.withDims(dims);
}

func::FuncOp PipelineOptimizerPass::createFunction(StringRef name, int64_t index,
                                                   ArrayRef<Slot> args,
                                                   ArrayRef<Slot> results) {
  OpBuilder builder(module.getBodyRegion());
  builder.setInsertionPointToEnd(module.getBody());
  SmallVector<Type> argTypes, resultTypes;
  for (const Slot &slot : args)
    argTypes.push_back(slot.type);
  for (const Slot &slot : results)
    resultTypes.push_back(slot.type);
  auto func = func::FuncOp::create(builder, module.getLoc(),
                                   ("stage" + Twine(index) + "." + name).str(),
                                   builder.getFunctionType(argTypes, resultTypes));
  for (auto [i, slot] : llvm::enumerate(args))
    func.setArgAttrs(i, slot.attrs);
  for (auto [i, slot] : llvm::enumerate(results))
    func.setResultAttrs(i, slot.attrs);
  func->setAttr(mt::MTDialect::kPipelineStageAttrName, builder.getI64IntegerAttr(index));
  func->setAttr(kOptimizerAttrName, builder.getUnitAttr());
  func.addEntryBlock();
  return func;
}

/// Attributes `{name = value}`.
static DictionaryAttr attrsOf(Builder &b, StringRef name, Attribute value) {
  return b.getDictionaryAttr(b.getNamedAttr(name, value));
}

void PipelineOptimizerPass::buildGradSquares(int64_t index, const Stage &stage) {
  Builder b(module.getContext());
  auto scalar = mt::NamedTensorType::getScalar(b.getF32Type());
  SmallVector<Slot> args = {{scalar, attrsOf(b, mt::MTDialect::kBufferAttrName, b.getStringAttr("grad_scale"))}};
  for (auto [op, counted] : stage.params)
    if (mt::ParamOp param = op; counted)
      args.push_back({stageType(gradTypes.lookup(param.getSymName()),
                                param.getLayer().has_value(), stage.layers),
                      attrsOf(b, mt::MTDialect::kGradAttrName, FlatSymbolRefAttr::get(param.getSymNameAttr()))});
  func::FuncOp func = createFunction(
      "grad_squares", index, args,
      {{scalar, attrsOf(b, mt::MTDialect::kBufferAttrName, b.getStringAttr("grad_squares"))}});
  Block &body = func.getBody().front();
  OpBuilder builder = OpBuilder::atBlockBegin(&body);
  mt::TensorBuilder t(builder, module.getLoc());
  Value gradScale = body.getArgument(0);
  SmallVector<Value> grads;
  for (BlockArgument grad : body.getArguments().drop_front())
    grads.push_back(scaleBy(t, grad, gradScale));
  func::ReturnOp::create(builder, module.getLoc(), sumOfSquares(t, grads, gradScale));
}

void PipelineOptimizerPass::buildOptimizerStep(int64_t index, const Stage &stage) {
  Builder b(module.getContext());
  auto scalar = mt::NamedTensorType::getScalar(b.getF32Type());
  auto buffer = [&](StringRef kind) { return attrsOf(b, mt::MTDialect::kBufferAttrName, b.getStringAttr(kind)); };
  SmallVector<Slot> args = {{scalar, buffer("step")},
                            {scalar, buffer("grad_scale")},
                            {scalar, buffer("grad_norm")}};
  llvm::StringMap<mt::ParamOp> held;
  for (auto [op, counted] : stage.params) {
    mt::ParamOp param = op;
    held[param.getSymName()] = param;
    args.push_back({stageType(gradTypes.lookup(param.getSymName()),
                              param.getLayer().has_value(), stage.layers),
                    attrsOf(b, mt::MTDialect::kGradAttrName, FlatSymbolRefAttr::get(param.getSymNameAttr()))});
  }
  // The parameters and states as the outlined whole-model step takes and returns them
  // (symbol order), those of the held parameters, in stage storage.
  auto heldParamOf = [&](DictionaryAttr attrs) -> mt::ParamOp {
    if (!attrs)
      return nullptr;
    if (auto param = attrs.getAs<FlatSymbolRefAttr>(transforms::kParamAttrName))
      return held.lookup(param.getValue());
    if (auto state = attrs.getAs<FlatSymbolRefAttr>(transforms::kStateAttrName))
      if (auto op = module.lookupSymbol<mt::StateOp>(state.getAttr()))
        return held.lookup(op.getOf());
    return nullptr;
  };
  auto outlined = [&](TypeRange types, ArrayRef<DictionaryAttr> attrs,
                      SmallVectorImpl<Slot> &slots) {
    for (auto [type, dict] : llvm::zip_equal(types, attrs))
      if (mt::ParamOp param = heldParamOf(dict))
        slots.push_back({stageType(type, param.getLayer().has_value(), stage.layers), dict});
  };
  size_t firstOutlined = args.size();
  SmallVector<DictionaryAttr> wholeArgAttrs, wholeResultAttrs;
  wholeStep.getAllArgAttrs(wholeArgAttrs);
  wholeStep.getAllResultAttrs(wholeResultAttrs);
  outlined(wholeStep.getArgumentTypes(), wholeArgAttrs, args);
  SmallVector<Slot> results = {{scalar, buffer("lr")}};
  outlined(wholeStep.getResultTypes(), wholeResultAttrs, results);

  func::FuncOp func = createFunction("optimizer_step", index, args, results);
  Block &body = func.getBody().front();
  OpBuilder builder = OpBuilder::atBlockBegin(&body);
  mt::TensorBuilder t(builder, module.getLoc());
  Value step = body.getArgument(0), gradScale = body.getArgument(1),
        norm = body.getArgument(2);
  // The outlined values by symbol: the arguments, then what the step writes.
  llvm::StringMap<Value> values;
  auto symbolOf = [](DictionaryAttr attrs) {
    for (StringRef name : {transforms::kParamAttrName, transforms::kStateAttrName})
      if (auto symbol = attrs.getAs<FlatSymbolRefAttr>(name))
        return symbol.getValue();
    return StringRef();
  };
  for (size_t i = firstOutlined; i < args.size(); ++i)
    values[symbolOf(args[i].attrs)] = body.getArgument(i);

  SmallVector<Value> grads;
  for (size_t i = 0; i < stage.params.size(); ++i)
    grads.push_back(scaleBy(t, body.getArgument(3 + i), gradScale));
  if (Value coef = clipCoefficient(t, settings, norm))
    for (Value &grad : grads)
      grad = scaleBy(t, grad, coef);
  StepScalars scalars = buildStepScalars(t, settings, step);
  SmallVector<StringRef> roles = stateRoles(settings);
  for (auto [entry, grad] : llvm::zip_equal(stage.params, grads)) {
    mt::ParamOp param = entry.first;
    StringRef name = param.getSymName();
    SmallVector<Value> states;
    for (StringRef role : roles)
      states.push_back(values.lookup((name + "." + role).str()));
    UpdatedParameter updated =
        updateParameter(t, settings, scalars, values.lookup(name), grad, states,
                        param->hasAttr(mt::MTDialect::kWeightDecayAttrName));
    values[name] = updated.param;
    for (auto [role, state] : llvm::zip_equal(roles, updated.states))
      values[(name + "." + role).str()] = state;
  }
  SmallVector<Value> returned = {scalars.lr};
  for (const Slot &slot : ArrayRef(results).drop_front())
    returned.push_back(values.lookup(symbolOf(slot.attrs)));
  func::ReturnOp::create(builder, module.getLoc(), returned);
}

void PipelineOptimizerPass::runOnOperation() {
  module = getOperation();
  auto pipeline = module->getAttrOfType<DictionaryAttr>(mt::MTDialect::kPipelineAttrName);
  if (!pipeline)
    return; // no pipeline chunks: the whole-model step is the only one
  wholeStep = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (!wholeStep || !module->hasAttr(transforms::kOutlinedAttrName)) {
    module.emitError("mt-pipeline-optimizer builds the stages' optimizer steps from the "
                     "outlined @optimizer_step: run it after mt-optimizer, "
                     "mt-outline-parameters and mt-pipeline-chunks");
    return signalPassFailure();
  }
  for (auto func : module.getOps<func::FuncOp>())
    if (func->hasAttr(mt::MTDialect::kPipelineStageAttrName)) {
      func.emitOpError("is a pipeline stage function already: the module has its stages' "
                       "optimizer steps");
      return signalPassFailure();
    }
  auto chunkLayers = dyn_cast_or_null<DenseI64ArrayAttr>(pipeline.get("chunk_layers"));
  auto chunkStages = dyn_cast_or_null<DenseI64ArrayAttr>(pipeline.get("chunk_stages"));
  auto numStages = dyn_cast_or_null<IntegerAttr>(pipeline.get("stages"));
  auto shared = dyn_cast_or_null<DictionaryAttr>(pipeline.get("shared_params"));
  if (!chunkLayers || !chunkStages || !numStages || !shared ||
      chunkLayers.size() != chunkStages.size() ||
      llvm::any_of(chunkStages.asArrayRef(), [&](int64_t stage) {
        return stage < 0 || stage >= numStages.getInt();
      })) {
    module.emitError("'") << mt::MTDialect::kPipelineAttrName
                          << "' must give chunk_layers and chunk_stages (one stage in [0, "
                             "stages) per chunk), stages and shared_params";
    return signalPassFailure();
  }
  FailureOr<OptimizerSettings> read = readOptimizerSettings(module);
  if (failed(read))
    return signalPassFailure();
  settings = *read;

  // The whole model's gradient types, from the whole step's gradient arguments.
  gradTypes.clear();
  for (auto [i, type] : llvm::enumerate(wholeStep.getArgumentTypes()))
    if (auto grad = wholeStep.getArgAttrOfType<FlatSymbolRefAttr>(i, mt::MTDialect::kGradAttrName))
      gradTypes[grad.getValue()] = type;

  // What each stage holds: the parameters its chunks take or return a gradient for.
  SmallVector<Stage> stages(numStages.getInt());
  SmallVector<llvm::StringSet<>> heldBy(stages.size());
  for (auto [layers, stage] : llvm::zip_equal(chunkLayers.asArrayRef(), chunkStages.asArrayRef()))
    stages[stage].layers += layers;
  for (auto func : module.getOps<func::FuncOp>()) {
    auto chunk = func->getAttrOfType<IntegerAttr>(mt::MTDialect::kPipelineChunkAttrName);
    if (!chunk)
      continue;
    if (chunk.getInt() < 0 || chunk.getInt() >= chunkStages.size()) {
      func.emitOpError("is chunk ") << chunk.getInt() << " of a pipeline of "
                                    << chunkStages.size() << " chunks";
      return signalPassFailure();
    }
    llvm::StringSet<> &held = heldBy[chunkStages[chunk.getInt()]];
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto param = func.getArgAttrOfType<FlatSymbolRefAttr>(i, transforms::kParamAttrName))
        held.insert(param.getValue());
    if (auto grads = func->getAttrOfType<ArrayAttr>(mt::MTDialect::kGradsAttrName))
      for (auto symbol : grads.getAsRange<FlatSymbolRefAttr>())
        held.insert(symbol.getValue());
  }
  for (mt::ParamOp param : module.getOps<mt::ParamOp>()) {
    StringRef name = param.getSymName();
    if (!gradTypes.count(name)) {
      param.emitOpError("has no gradient argument in @optimizer_step");
      return signalPassFailure();
    }
    // A parameter held by several stages (shared_params) is counted on the stage of the
    // lowest chunk listed for it: the runtime sums its gradient over those stages first.
    std::optional<int64_t> owner;
    if (auto chunks = dyn_cast_or_null<DenseI64ArrayAttr>(shared.get(name))) {
      if (chunks.empty() || llvm::any_of(chunks.asArrayRef(), [&](int64_t chunk) {
            return chunk < 0 || chunk >= chunkStages.size();
          })) {
        module.emitError("shared parameter @") << name << " lists no chunk of the pipeline";
        return signalPassFailure();
      }
      owner = chunkStages[*llvm::min_element(chunks.asArrayRef())];
    }
    bool anywhere = false;
    for (auto [index, stage] : llvm::enumerate(stages)) {
      if (!heldBy[index].contains(name))
        continue;
      anywhere = true;
      stage.params.push_back({param, !owner || *owner == static_cast<int64_t>(index)});
    }
    if (!anywhere) {
      param.emitOpError("is read by no pipeline chunk, so no stage would update it");
      return signalPassFailure();
    }
  }
  for (auto [index, stage] : llvm::enumerate(stages)) {
    buildGradSquares(index, stage);
    buildOptimizerStep(index, stage);
  }
}

} // namespace
