//===- FuseElementwise.cpp - fuse elementwise linalg chains ---------------===//
//
// See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "compiler/fusion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mtc::fusion {
#define GEN_PASS_DEF_FUSEELEMENTWISEPASS
#include "compiler/fusion/Passes.h.inc"
} // namespace mtc::fusion

using namespace mlir;

namespace {

/// Fuse a generic producer into its consumer only when the consumer is its one user:
/// with several users the producer's loop would be recomputed in each of them.
bool fuseOnlySingleUse(OpOperand *fused) {
  Operation *producer = fused->get().getDefiningOp();
  return producer && isa<linalg::GenericOp>(producer) && producer->hasOneUse() &&
         isa<linalg::GenericOp>(fused->getOwner());
}

struct FuseElementwisePass
    : mtc::fusion::impl::FuseElementwisePassBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, fuseOnlySingleUse);
    // Folds the fills and reshapes fusion leaves behind.
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // On tensors a generic without results has no effect but its calls', which are pure in
    // kernel bodies.
    getOperation()->walk([](linalg::GenericOp op) {
      if (op->getNumResults() == 0 && op.hasPureTensorSemantics())
        op.erase();
    });
  }
};

} // namespace
