//===- ReductionLoopOrder.cpp - reductions iterate in their input's layout ------===//
//
// See ReductionLoopOrderPass in Passes.td. The interchange keeps the relative order of the
// reduction loops (a permutation of the input's dimensions lists the reduced ones in the
// input's order, which is also the order mt-to-linalg gave them), so every result element
// sums the same terms in the same order.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_REDUCTIONLOOPORDERPASS
#include "compiler/codegen/CPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

/// The loop order that walks `op`'s largest input read through a permutation of all its
/// loops in that input's layout, or nothing (no such input, or the order is already that).
std::optional<SmallVector<unsigned>> layoutOrder(linalg::GenericOp op) {
  OpOperand *followed = nullptr;
  int64_t largest = -1;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    auto type = dyn_cast<ShapedType>(input->get().getType());
    if (!type || !type.hasStaticShape() || !map.isPermutation())
      continue;
    if (type.getNumElements() > largest) {
      largest = type.getNumElements();
      followed = input;
    }
  }
  if (!followed)
    return std::nullopt;
  AffineMap map = op.getMatchingIndexingMap(followed);
  if (map.isIdentity())
    return std::nullopt;
  SmallVector<unsigned> order;
  for (AffineExpr result : map.getResults())
    order.push_back(cast<AffineDimExpr>(result).getPosition());
  return order;
}

/// Marks the accumulation of each result reassociable when the innermost loop reduces, so
/// that LLVM can keep partial sums in vector lanes.
void allowReassociation(linalg::GenericOp op) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (iterators.empty() || iterators.back() != utils::IteratorType::reduction)
    return;
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  for (OpOperand &init : op.getDpsInitsMutable()) {
    BlockArgument accumulator = op.getMatchingBlockArgument(&init);
    Operation *combine = yield.getOperand(init.getOperandNumber() - op.getNumDpsInputs())
                             .getDefiningOp();
    auto flags = dyn_cast_if_present<arith::ArithFastMathInterface>(combine);
    if (!flags || !llvm::is_contained(combine->getOperands(), Value(accumulator)))
      continue;
    combine->setAttr(flags.getFastMathAttrName(),
                     arith::FastMathFlagsAttr::get(
                         op.getContext(), flags.getFastMathFlagsAttr().getValue() |
                                              arith::FastMathFlags::reassoc));
  }
}

struct ReductionLoopOrderPass
    : mtc::codegen::impl::ReductionLoopOrderPassBase<ReductionLoopOrderPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> reductions;
    getOperation()->walk([&](linalg::GenericOp op) {
      if (op.getNumReductionLoops() > 0)
        reductions.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp &op : reductions) {
      std::optional<SmallVector<unsigned>> order = layoutOrder(op);
      if (!order)
        continue;
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::GenericOp> interchanged = linalg::interchangeGenericOp(rewriter, op, *order);
      if (failed(interchanged)) {
        op.emitOpError("cannot interchange the loops of this reduction");
        return signalPassFailure();
      }
      op = *interchanged;
    }
    for (linalg::GenericOp op : reductions)
      allowReassociation(op);
  }
};

} // namespace
