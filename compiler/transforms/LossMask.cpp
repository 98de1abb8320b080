//===- LossMask.cpp - the loss masked at end-of-document tokens -----------===//
//
// Megatron's --eod-mask-loss: documents are packed into samples, and the position whose
// input token is an end of document (predicting the first token of the next document) is
// left out of the loss. Which positions those are depends on the data, which the runtime
// reads: the step takes the mask as an input rather than the end-of-document id, so that
// the plan does not depend on the tokenizer. Passes.td describes the contract.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mt/IR/MTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mtc::transforms {
#define GEN_PASS_DEF_MTLOSSMASKPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace mtc::transforms

using namespace mlir;
using namespace mtc;
using mt::NamedTensorType;

namespace {

struct LossMaskPass : transforms::impl::MTLossMaskPassBase<LossMaskPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    mt::TrainAttr train = mt::TrainAttr::lookup(module);
    if (!train || !train.masksLossAtEndOfDocument())
      return;
    auto forward = SymbolTable::lookupSymbolIn(module, "forward");
    auto function = dyn_cast_or_null<func::FuncOp>(forward);
    if (!function) {
      module.emitError() << "eod_mask_loss needs a 'forward' function";
      return signalPassFailure();
    }
    if (function.getNumArguments() != 2) {
      function.emitError() << "eod_mask_loss needs 'forward' to take the tokens and the labels "
                              "only, but it takes "
                           << function.getNumArguments() << " arguments";
      return signalPassFailure();
    }
    BlockArgument labels = function.getArgument(1);
    SmallVector<mt::CrossEntropyOp> losses;
    for (Operation *user : labels.getUsers())
      if (auto loss = dyn_cast<mt::CrossEntropyOp>(user); loss && loss.getLabels() == labels)
        losses.push_back(loss);
    if (losses.empty()) {
      function.emitError() << "eod_mask_loss masks the cross_entropy of the labels, but "
                              "'forward' computes none";
      return signalPassFailure();
    }
    auto labelsType = cast<NamedTensorType>(labels.getType());
    NamedTensorType maskType = labelsType.withElementType(Float32Type::get(&getContext()));
    if (failed(function.insertArgument(2, maskType, DictionaryAttr(), function.getLoc())))
      return signalPassFailure();
    BlockArgument mask = function.getArgument(2);
    for (mt::CrossEntropyOp loss : losses)
      loss.getMaskMutable().assign(mask);
  }
};

} // namespace
