//===- FuseElementwise.cpp - fuse elementwise linalg chains ---------------===//
//
// See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "compiler/fusion/Passes.h"
#include "compiler/fusion/FusionRule.h"

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

mtc::fusion::LoopNest loopNestOf(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  if (!generic)
    return mtc::fusion::LoopNest::Opaque;
  return generic.getNumReductionLoops() ? mtc::fusion::LoopNest::Reduction
                                        : mtc::fusion::LoopNest::Parallel;
}

/// Whether fusing `fused`'s producer into its owner runs a costly body once per iteration
/// of the owner rather than once per element of the producer: the owner reads the operand
/// through a map that is not a permutation (a broadcast), and the producer's body, as it is
/// now (with what was fused into it already), has a costly op.
bool recomputesCostly(OpOperand *fused, Operation *producer) {
  auto consumer = dyn_cast<linalg::GenericOp>(fused->getOwner());
  auto generic = dyn_cast<linalg::GenericOp>(producer);
  if (!consumer || !generic || consumer.getMatchingIndexingMap(fused).isPermutation())
    return false;
  return generic.getBody()
      ->walk([](Operation *op) {
        return mtc::fusion::isCostlyPerElement(op) ? WalkResult::interrupt()
                                                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// The fusion's rule (FusionRule.h, which the cost model shares): a parallel generic
/// producer into the generic that is its one use, unless that recomputes a costly body.
bool fuseOnlySingleUse(OpOperand *fused) {
  Operation *producer = fused->get().getDefiningOp();
  return producer && mtc::fusion::fusesInto(loopNestOf(producer), loopNestOf(fused->getOwner()),
                                            producer->hasOneUse(),
                                            /*consumerLoopsStayDefined=*/true,
                                            recomputesCostly(fused, producer));
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
