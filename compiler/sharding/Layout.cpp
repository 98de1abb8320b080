//===- Layout.cpp - the parallel layout a module asks for ------------------===//

#include "compiler/sharding/Layout.h"

#include "dialects/mt/IR/MTOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::sharding;

/// Whether `dimAxis` splits a dimension of some parameter of `module` (`layers` never is).
static bool splitsAParameter(ModuleOp module, const llvm::StringMap<std::string> &dimAxis) {
  return llvm::any_of(module.getOps<mt::ParamOp>(), [&](mt::ParamOp param) {
    auto type = cast<mt::NamedTensorType>(param.getType());
    return llvm::any_of(type.getDimNames(), [&](StringAttr dim) {
      return dim.getValue() != mt::MTDialect::kLayersDimName && dimAxis.count(dim.getValue());
    });
  });
}

/// The first dimension of `type` after `layers`: `experts` in an expert weight.
static StringRef leadingDim(mt::NamedTensorType type) {
  for (StringAttr dim : type.getDimNames())
    if (dim.getValue() != mt::MTDialect::kLayersDimName)
      return dim.getValue();
  return {};
}

/// The first parameter of `module` leading with `expertDim` (split over ep), if any.
static mt::ParamOp findExpertWeight(ModuleOp module, StringRef expertDim) {
  for (mt::ParamOp param : module.getOps<mt::ParamOp>())
    if (leadingDim(cast<mt::NamedTensorType>(param.getType())) == expertDim)
      return param;
  return {};
}

int64_t sharding::zeroStage(ModuleOp module) {
  if (auto stage = module->getAttrOfType<IntegerAttr>(kZeroStageAttrName))
    return stage.getInt();
  mt::ParallelAttr parallel = mt::ParallelAttr::lookup(module);
  return parallel && parallel.usesDistributedOptimizer() ? 1 : 0;
}

FailureOr<ShardingSpec> sharding::getShardingSpec(ModuleOp module) {
  ShardingSpec spec;
  mt::ParallelAttr parallel = mt::ParallelAttr::lookup(module);
  if (!parallel)
    return spec;
  // pp cuts the step into chunk functions before partitioning (mt-pipeline-chunks).
  int64_t tp = parallel.getTensorParallel();
  int64_t ep = parallel.getDegree("ep"), cp = parallel.getDegree("cp");
  // The dimension each of ep and cp splits: Megatron's unless the layout names another.
  std::string expertDim = ep > 1 ? "experts" : "", contextDim = cp > 1 ? "seq" : "";
  DictionaryAttr layout = parallel.getLayout();
  if (layout) {
    for (NamedAttribute entry : layout) {
      StringRef dim = entry.getName().getValue();
      StringRef axis = cast<StringAttr>(entry.getValue()).getValue();
      if (axis == "tp") {
        spec.dimAxis[dim] = "tp";
        continue;
      }
      if (axis == "dp" && dim == mt::MTDialect::kBatchDimName)
        continue; // the runtime's data parallelism
      if (axis == "ep" || axis == "cp") {
        if (parallel.getDegree(axis) <= 1)
          return module.emitError() << "layout '" << dim << ": " << axis << "' names an axis of "
                                    << "degree 1: set " << axis << " above 1";
        (axis == "ep" ? expertDim : contextDim) = dim.str();
        continue;
      }
      return module.emitError() << "layout '" << dim << ": " << axis
                                << "' is not supported yet: layouts map dimensions to tp, ep "
                                   "(the experts) and cp (the sequence), and batch to dp";
    }
  } else {
    for (StringRef dim : kMegatronTensorParallelDims)
      spec.dimAxis[dim] = "tp";
  }
  // The distributed optimizer shards optimizer state over dp: dp becomes an axis of the
  // optimizer step (its degree is then fixed by the plan).
  int64_t dp = parallel.getDataParallel();
  bool shardState = parallel.usesDistributedOptimizer();
  if (shardState && dp <= 1)
    return module.emitError() << "the distributed optimizer shards the optimizer state over "
                                 "data-parallel ranks: set dp above 1";
  // Expert tensor parallelism: the expert weights split over tp like the dense layers
  // (etp = tp) or whole, with tp folded into expert parallelism (etp = 1: the experts
  // split over [ep, tp]). Megatron's other degrees fold part of tp (an expert-tensor-parallel
  // group inside tp), which needs the tp axis cut in two.
  if (int64_t etp = parallel.getExpertTensorParallel(); etp != tp && etp != 1)
    return module.emitError() << "etp " << etp << " is not supported: the expert weights are "
                              << "split over tp like the dense ones (etp = tp = " << tp
                              << ") or whole, tp folded into expert parallelism (etp = 1)";
  if (tp <= 1 && !shardState && ep <= 1 && cp <= 1)
    return ShardingSpec{};
  if (tp > 1 && !splitsAParameter(module, spec.dimAxis)) {
    // Every rank would hold and compute the whole model: tp copies of one, not a split.
    SmallVector<StringRef> looked;
    for (const auto &entry : spec.dimAxis)
      looked.push_back(entry.first());
    llvm::sort(looked);
    InFlightDiagnostic diag = module.emitError() << "tp " << tp << " shards nothing: ";
    if (looked.empty())
      diag << "the layout maps no dimension to tp";
    else if (layout)
      diag << "no parameter has a dimension the layout maps to tp (" << llvm::join(looked, ", ")
           << ")";
    else
      diag << "no parameter has a dimension of Megatron's layout (" << llvm::join(looked, ", ")
           << ")";
    return diag << "; name this model's dimensions to split with --layout '<dim>:tp,...' (or "
                   "`layout { <dim>: tp }` in parallel {})";
  }
  mt::ParamOp expertWeight = ep > 1 ? findExpertWeight(module, expertDim) : mt::ParamOp();
  if (ep > 1 && !expertWeight)
    return module.emitError() << "ep " << ep << " shards nothing: no parameter leads with the "
                              << "dimension '" << expertDim << "' of the experts (expert weights "
                              << "are laid out [" << expertDim << ", ...])";
  // Parallel folding (etp 1 under tp > 1): the experts are split over ep x tp.
  bool fold = ep > 1 && tp > 1 && parallel.getExpertTensorParallel() == 1;
  int64_t experts =
      expertWeight ? cast<mt::NamedTensorType>(expertWeight.getType()).getDimSize(expertDim) : 0;
  if (fold && experts % (ep * tp) != 0)
    return module.emitError() << "etp 1 folds tp into expert parallelism: the " << experts
                              << " experts cannot be split over ep x tp = " << ep << " x " << tp
                              << " ranks; choose ep and tp whose product divides them, or --etp "
                              << tp << " (the expert weights split over tp like the dense ones)";
  if (auto it = spec.dimAxis.find(expertDim); ep > 1 && it != spec.dimAxis.end())
    return module.emitError() << "layout '" << expertDim << ": " << it->second
                              << "' and ep " << ep << " both split the experts: map '"
                              << expertDim << "' to one axis";
  MLIRContext *ctx = module.getContext();
  ctx->getOrLoadDialect<mtp::MTPDialect>(); // the plan writer asks without running a pass
  // Megatron's order, the last axis fastest: dp, ep, cp, tp.
  SmallVector<StringAttr> names, twoChunk;
  SmallVector<int64_t> sizes;
  auto addAxis = [&](StringRef name, int64_t size) {
    names.push_back(StringAttr::get(ctx, name));
    sizes.push_back(size);
  };
  if (shardState) {
    addAxis("dp", dp);
    spec.dataParallelAxis = "dp";
  }
  spec.keepLayersWhole =
      shardState && (zeroStage(module) == 3 ||
                     (zeroStage(module) == 2 && parallel.getPipelineParallel() > 1));
  if (shardState && zeroStage(module) == 3) {
    // Each data-parallel rank computes its own part of the group's micro-batch.
    spec.shardParameters = true;
    spec.activationAxes[mt::MTDialect::kBatchDimName].push_back("dp");
  }
  if (ep > 1) {
    addAxis("ep", ep);
    spec.expertAxis = "ep";
    spec.dimAxis[expertDim] = "ep";
    // Each expert-parallel rank routes its own part of the micro-batch: under ZeRO-3 of the
    // data-parallel rank's part (batch over [dp, ep], the mesh's order).
    spec.activationAxes[mt::MTDialect::kBatchDimName].push_back("ep");
  }
  if (cp > 1) {
    addAxis("cp", cp);
    spec.activationAxes[contextDim] = {"cp"};
    // Ring attention balances causal work as Megatron does: rank c holds the sequence's
    // chunks c and 2 cp - 1 - c.
    if (parallel.usesRingAttention())
      twoChunk.push_back(names.back());
  }
  if (tp > 1) {
    addAxis("tp", tp);
  } else {
    for (auto it = spec.dimAxis.begin(); it != spec.dimAxis.end();)
      if (it->second == "tp")
        spec.dimAxis.erase(it++);
      else
        ++it;
  }
  spec.mesh = mtp::MeshAttr::get(ctx, names, sizes, twoChunk);
  spec.expertDim = expertDim.empty() ? "experts" : expertDim;
  spec.splitExpertWeights = parallel.getExpertTensorParallel() == tp;
  if (fold)
    spec.foldedAxis = "tp";
  if (parallel.isSequenceParallel())
    spec.sequenceDim = "seq";
  return spec;
}

/// The layout of a parameter over the model-parallel axes (tp, ep): parameterLayout
/// without ZeRO-3.
static FailureOr<mtp::ShardedTensorType>
modelParallelLayout(const ShardingSpec &spec, mt::NamedTensorType type,
                    function_ref<InFlightDiagnostic()> emitError) {
  MLIRContext *ctx = type.getContext();
  NamedAttrList split;
  StringRef leading = leadingDim(type);
  bool expertWeight = leading == spec.expertDim;
  for (const mt::NamedDim &dim : type.getDims()) {
    auto it = spec.dimAxis.find(dim.name.getValue());
    if (it == spec.dimAxis.end() || dim.name.getValue() == mt::MTDialect::kLayersDimName)
      continue;
    if (it->second == spec.expertAxis && dim.name.getValue() != leading)
      continue; // a router: every expert-parallel rank routes its own tokens
    if (it->second == "tp" && expertWeight && !spec.splitExpertWeights)
      continue; // etp 1: the experts are split over tp instead
    SmallVector<Attribute, 2> axes = {StringAttr::get(ctx, it->second)};
    if (expertWeight && dim.name.getValue() == leading && !spec.foldedAxis.empty())
      axes.push_back(StringAttr::get(ctx, spec.foldedAxis));
    split.set(dim.name, ArrayAttr::get(ctx, axes));
  }
  auto layout = mtp::ShardedTensorType::getChecked(emitError, ctx, type, spec.mesh,
                                                   split.getDictionary(ctx),
                                                   ArrayAttr::get(ctx, {}));
  if (!layout)
    return failure();
  return layout;
}

FailureOr<mtp::ShardedTensorType>
sharding::optimizerLayout(const ShardingSpec &spec, mt::NamedTensorType type,
                          function_ref<InFlightDiagnostic()> emitError) {
  FailureOr<mtp::ShardedTensorType> layout = modelParallelLayout(spec, type, emitError);
  if (failed(layout) || spec.dataParallelAxis.empty())
    return layout;
  int64_t dp = *spec.mesh.getAxisSize(spec.dataParallelAxis);
  for (const mt::NamedDim &dim : type.getDims())
    if (layout->getSplitAxes(dim.name.getValue()).empty() && dim.size % dp == 0 &&
        !(spec.keepLayersWhole && dim.name.getValue() == mt::MTDialect::kLayersDimName))
      return layout->withSplit(dim.name.getValue(), {spec.dataParallelAxis});
  return layout; // nothing divides: the state stays whole on every data-parallel rank
}

FailureOr<mtp::ShardedTensorType>
sharding::parameterLayout(const ShardingSpec &spec, mt::NamedTensorType type,
                          function_ref<InFlightDiagnostic()> emitError) {
  return spec.shardParameters ? optimizerLayout(spec, type, emitError)
                              : modelParallelLayout(spec, type, emitError);
}
