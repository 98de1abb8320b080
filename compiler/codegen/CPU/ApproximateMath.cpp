//===- ApproximateMath.cpp - f32 transcendentals as polynomials ----------===//
//
// The x86 kernels call libm for every transcendental function; in the GELU and softmax
// loops of a transformer those scalar calls were a quarter of a training step and kept the
// loops from vectorising. Upstream MLIR's polynomial approximations replace them with
// arithmetic; this pass picks the functions whose approximations are accurate over the
// whole f32 range.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_APPROXIMATEMATHPASS
#include "compiler/codegen/CPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

bool hasAccurateApproximation(llvm::StringRef operationName) {
  return llvm::is_contained({math::ExpOp::getOperationName(), math::ExpM1Op::getOperationName(),
                             math::TanhOp::getOperationName(), math::LogOp::getOperationName(),
                             math::Log1pOp::getOperationName(), math::Log2Op::getOperationName(),
                             math::ErfOp::getOperationName()},
                            operationName);
}

struct ApproximateMathPass : mtc::codegen::impl::ApproximateMathPassBase<ApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, hasAccurateApproximation);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
