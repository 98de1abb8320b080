//===- ExpandStridedCopies.cpp - strided copies as linalg.copy loops ------===//

#include "compiler/codegen/CPU/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_EXPANDSTRIDEDCOPIESPASS
#include "compiler/codegen/CPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

bool hasIdentityLayout(Value value) {
  auto type = dyn_cast<MemRefType>(value.getType());
  return type && type.getLayout().isIdentity();
}

struct ExpandStridedCopiesPass
    : public mtc::codegen::impl::ExpandStridedCopiesPassBase<ExpandStridedCopiesPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    getOperation().walk([&](memref::CopyOp copy) {
      if (hasIdentityLayout(copy.getSource()) && hasIdentityLayout(copy.getTarget()))
        return;
      rewriter.setInsertionPoint(copy);
      rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(), copy.getTarget());
    });
  }
};

} // namespace
