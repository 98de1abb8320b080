//===- ExpertLoad.cpp - tokens per expert out of the training step --------===//
//
// The counts are added after autodiff, to the layer forwards the step repeats, rather than
// written in the model: they are a statistic the runtime logs, not part of the loss, so
// they need no gradient and every MoE model reports them without a change to its source.
// Passes.td describes the contract.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mt/IR/MTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace mtc::transforms {
#define GEN_PASS_DEF_MTEXPERTLOADPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace mtc::transforms

using namespace mlir;
using namespace mtc;
using mt::NamedTensorType;

namespace {

/// The buffer kind the plan gives the counts (CallingConvention.cpp).
constexpr StringLiteral kExpertLoadBuffer = "expert_load";

/// Appends `values` to what `func` returns (its single block's return), with `attrs` on
/// each new result.
void appendResults(func::FuncOp func, ValueRange values, DictionaryAttr attrs) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (Value value : values) {
    unsigned index = func.getNumResults();
    (void)func.insertResult(index, value.getType(), attrs);
    ret->insertOperands(ret->getNumOperands(), value);
  }
}

/// Counts the choices of every dispatch of `layer` (a layer forward) and returns them as
/// new results; their types, without the stacking dimension, in `types`.
void countDispatches(func::FuncOp layer, SmallVectorImpl<Type> &types) {
  SmallVector<mt::DispatchOp> dispatches(layer.getBody().front().getOps<mt::DispatchOp>());
  if (dispatches.empty())
    return;
  OpBuilder b(layer.getBody().front().getTerminator());
  SmallVector<Value> counts;
  for (mt::DispatchOp dispatch : dispatches) {
    auto routed = cast<NamedTensorType>(dispatch.getResult().getType());
    StringAttr expertDim = dispatch.getExpertDimAttr();
    auto type = NamedTensorType::get(b.getContext(), {expertDim},
                                     {routed.getDimSize(expertDim.getValue())},
                                     b.getI64Type());
    counts.push_back(mt::ExpertLoadOp::create(b, dispatch.getLoc(), type,
                                              dispatch.getIndices(), dispatch.getKDimAttr(),
                                              expertDim));
    types.push_back(type);
  }
  appendResults(layer, counts, DictionaryAttr());
}

struct ExpertLoadPass : transforms::impl::MTExpertLoadPassBase<ExpertLoadPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("forward_backward");
    if (!step || !step.getBody().hasOneBlock()) {
      module.emitError("mt-expert-load counts the routing of the training step "
                       "'forward_backward': run it after mt-autodiff");
      return signalPassFailure();
    }

    MLIRContext *context = &getContext();
    SmallVector<Value> loads;
    // A layer repeated by more than one mt.repeat returns its counts once: its count types
    // are those of its first rewrite.
    llvm::DenseMap<Operation *, SmallVector<Type>> counted;
    for (auto repeat : llvm::to_vector(step.getBody().front().getOps<mt::RepeatOp>())) {
      auto layer = module.lookupSymbol<func::FuncOp>(repeat.getCallee());
      if (!layer || !layer.getBody().hasOneBlock())
        continue;
      auto [known, first] = counted.try_emplace(layer);
      if (first)
        countDispatches(layer, known->second);
      SmallVector<Type> countTypes = known->second;
      if (countTypes.empty())
        continue;
      // The same repeat with the counts stacked after its results.
      SmallVector<Type> resultTypes(repeat.getResultTypes());
      for (Type type : countTypes) {
        auto counts = cast<NamedTensorType>(type);
        SmallVector<mt::NamedDim> dims = {
            {StringAttr::get(context, repeat.getStackDimName()),
             static_cast<int64_t>(repeat.getCount())}};
        llvm::append_range(dims, counts.getDims());
        resultTypes.push_back(counts.withDims(dims));
      }
      OpBuilder b(repeat);
      auto withCounts = mt::RepeatOp::create(b, repeat.getLoc(), resultTypes,
                                             repeat.getInputs(), repeat->getAttrs());
      repeat.replaceAllUsesWith(withCounts.getResults().take_front(repeat.getNumResults()));
      repeat.erase();
      llvm::append_range(loads, withCounts.getResults().take_back(countTypes.size()));
    }
    Builder b(context);
    appendResults(step, loads,
                  b.getDictionaryAttr(b.getNamedAttr(mt::MTDialect::kBufferAttrName,
                                                     b.getStringAttr(kExpertLoadBuffer))));
  }
};

} // namespace
