//===- CopyRepeatedResults.cpp - one buffer per function result -----------===//

#include "compiler/codegen/Common/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_COPYREPEATEDRESULTSPASS
#include "compiler/codegen/Common/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

struct CopyRepeatedResultsPass
    : public mtc::codegen::impl::CopyRepeatedResultsPassBase<CopyRepeatedResultsPass> {
  void runOnOperation() override {
    OpBuilder builder(&getContext());
    getOperation().walk([&](func::ReturnOp ret) {
      llvm::SmallPtrSet<Value, 4> seen;
      for (OpOperand &operand : ret->getOpOperands()) {
        Value value = operand.get();
        auto type = dyn_cast<RankedTensorType>(value.getType());
        if (!type || seen.insert(value).second)
          continue;
        builder.setInsertionPoint(ret);
        Value empty = tensor::EmptyOp::create(builder, ret.getLoc(), type.getShape(),
                                              type.getElementType());
        operand.set(linalg::CopyOp::create(builder, ret.getLoc(), value, empty).getResult(0));
      }
    });
  }
};

} // namespace
