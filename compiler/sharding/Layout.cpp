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

FailureOr<ShardingSpec> sharding::getShardingSpec(ModuleOp module) {
  ShardingSpec spec;
  mt::ParallelAttr parallel = mt::ParallelAttr::lookup(module);
  if (!parallel)
    return spec;
  // pp cuts the step into chunk functions before partitioning (mt-pipeline-chunks).
  for (StringRef axis : {"cp", "ep"})
    if (int64_t n = parallel.getDegree(axis); n > 1)
      return module.emitError() << axis << " " << n
                                << " is not supported yet: only tensor (tp, sp) and data "
                                   "parallelism partition the step";
  int64_t tp = parallel.getTensorParallel();
  DictionaryAttr layout = parallel.getLayout();
  if (layout) {
    for (NamedAttribute entry : layout) {
      StringRef axis = cast<StringAttr>(entry.getValue()).getValue();
      if (axis == "tp") {
        spec.dimAxis[entry.getName().getValue()] = "tp";
        continue;
      }
      if (axis == "dp" && entry.getName().getValue() == "batch")
        continue; // the runtime's data parallelism
      return module.emitError() << "layout '" << entry.getName().getValue() << ": " << axis
                                << "' is not supported yet: layouts map dimensions to tp "
                                   "(and batch to dp)";
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
  if (tp <= 1 && !shardState)
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
  MLIRContext *ctx = module.getContext();
  ctx->getOrLoadDialect<mtp::MTPDialect>(); // the plan writer asks without running a pass
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  if (shardState) {
    names.push_back(StringAttr::get(ctx, "dp"));
    sizes.push_back(dp);
    spec.dataParallelAxis = "dp";
  }
  if (tp > 1) {
    names.push_back(StringAttr::get(ctx, "tp"));
    sizes.push_back(tp);
  } else {
    spec.dimAxis.clear();
  }
  spec.mesh = mtp::MeshAttr::get(ctx, names, sizes);
  if (parallel.isSequenceParallel())
    spec.sequenceDim = "seq";
  return spec;
}

FailureOr<mtp::ShardedTensorType>
sharding::parameterLayout(const ShardingSpec &spec, mt::NamedTensorType type,
                          function_ref<InFlightDiagnostic()> emitError) {
  MLIRContext *ctx = type.getContext();
  NamedAttrList split;
  for (const mt::NamedDim &dim : type.getDims()) {
    auto it = spec.dimAxis.find(dim.name.getValue());
    if (it == spec.dimAxis.end() || dim.name.getValue() == mt::MTDialect::kLayersDimName)
      continue;
    split.set(dim.name, ArrayAttr::get(ctx, {StringAttr::get(ctx, it->second)}));
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
  FailureOr<mtp::ShardedTensorType> layout = parameterLayout(spec, type, emitError);
  if (failed(layout) || spec.dataParallelAxis.empty())
    return layout;
  int64_t dp = *spec.mesh.getAxisSize(spec.dataParallelAxis);
  for (const mt::NamedDim &dim : type.getDims())
    if (layout->getSplitAxes(dim.name.getValue()).empty() && dim.size % dp == 0)
      return layout->withSplit(dim.name.getValue(), {spec.dataParallelAxis});
  return layout; // nothing divides: the state stays whole on every data-parallel rank
}
