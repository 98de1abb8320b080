//===- Layout.cpp - the parallel layout a module asks for ------------------===//

#include "compiler/sharding/Layout.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::sharding;

static int64_t degree(DictionaryAttr parallel, StringRef axis) {
  if (auto value = parallel.getAs<IntegerAttr>(axis))
    return value.getInt();
  return 1;
}

FailureOr<ShardingSpec> sharding::getShardingSpec(ModuleOp module) {
  ShardingSpec spec;
  auto parallel = module->getAttrOfType<DictionaryAttr>("mt.parallel");
  if (!parallel)
    return spec;
  for (StringRef axis : {"pp", "cp", "ep"})
    if (int64_t n = degree(parallel, axis); n > 1)
      return module.emitError() << axis << " " << n
                                << " is not supported yet: only tensor (tp, sp) and data "
                                   "parallelism partition the step";
  int64_t tp = degree(parallel, "tp");
  auto layout = parallel.getAs<DictionaryAttr>("layout");
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
    for (StringRef dim : {"heads", "kv_heads", "ffn", "vocab"})
      spec.dimAxis[dim] = "tp";
  }
  if (tp <= 1)
    return ShardingSpec{};
  MLIRContext *ctx = module.getContext();
  ctx->getOrLoadDialect<mtp::MTPDialect>(); // the plan writer asks without running a pass
  spec.mesh = mtp::MeshAttr::get(ctx, {StringAttr::get(ctx, "tp")}, {tp});
  if (auto sp = parallel.getAs<BoolAttr>("sp"); sp && sp.getValue())
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
    if (it == spec.dimAxis.end() || dim.name.getValue() == "layers")
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
