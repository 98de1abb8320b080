//===- SelectParallelLoops.cpp - scf.parallel where threads pay off ------===//
//
// See SelectParallelLoopsPass in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_SELECTPARALLELLOOPSPASS
#include "compiler/codegen/CPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

/// The iterations of one dimension, or nothing when its bounds or step are not constants.
std::optional<int64_t> tripCount(Value lower, Value upper, Value step) {
  std::optional<int64_t> lb = getConstantIntValue(lower);
  std::optional<int64_t> ub = getConstantIntValue(upper);
  std::optional<int64_t> st = getConstantIntValue(step);
  if (!lb || !ub || !st || *st <= 0)
    return std::nullopt;
  return *ub <= *lb ? 0 : (*ub - *lb + *st - 1) / *st;
}

/// Saturates at INT64_MAX, which stands for "unknown, assumed large".
int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t product;
  return llvm::MulOverflow(a, b, product) ? std::numeric_limits<int64_t>::max() : product;
}

int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  return llvm::AddOverflow(a, b, sum) ? std::numeric_limits<int64_t>::max() : sum;
}

/// The innermost iterations one run of `block` does: the work of its loops (summed), or 1
/// for straight-line code.
int64_t blockWork(Block &block);

int64_t loopWork(Operation *loop) {
  int64_t trips = 1;
  auto multiply = [&](std::optional<int64_t> count) {
    trips = saturatingMul(trips, count.value_or(std::numeric_limits<int64_t>::max()));
  };
  if (auto parallel = dyn_cast<scf::ParallelOp>(loop)) {
    for (auto [lb, ub, step] : llvm::zip(parallel.getLowerBound(), parallel.getUpperBound(),
                                         parallel.getStep()))
      multiply(tripCount(lb, ub, step));
  } else if (auto forOp = dyn_cast<scf::ForOp>(loop)) {
    multiply(tripCount(forOp.getLowerBound(), forOp.getUpperBound(), forOp.getStep()));
  } else {
    multiply(std::nullopt);
  }
  int64_t body = 0;
  for (Region &region : loop->getRegions())
    for (Block &block : region)
      body = saturatingAdd(body, blockWork(block));
  return saturatingMul(trips, std::max<int64_t>(body, 1));
}

int64_t blockWork(Block &block) {
  int64_t work = 0;
  for (Operation &op : block)
    if (isa<LoopLikeOpInterface>(op))
      work = saturatingAdd(work, loopWork(&op));
  return std::max<int64_t>(work, 1);
}

/// Splits `op` into an `scf.parallel` over its first `kept` dimensions around one over the
/// others, which becomes nested `scf.for`s.
LogicalResult keepLeadingDimensions(RewriterBase &rewriter, scf::ParallelOp op, unsigned kept) {
  Location loc = op.getLoc();
  auto leading = [&](OperandRange values) { return ValueRange(values).take_front(kept); };
  auto trailing = [&](OperandRange values) { return ValueRange(values).drop_front(kept); };
  rewriter.setInsertionPoint(op);
  auto outer = scf::ParallelOp::create(rewriter, loc, leading(op.getLowerBound()),
                                       leading(op.getUpperBound()), leading(op.getStep()));
  rewriter.setInsertionPointToStart(outer.getBody());
  auto inner = scf::ParallelOp::create(rewriter, loc, trailing(op.getLowerBound()),
                                       trailing(op.getUpperBound()), trailing(op.getStep()));
  SmallVector<Value> ivs(outer.getInductionVars());
  llvm::append_range(ivs, inner.getInductionVars());
  rewriter.eraseOp(inner.getBody()->getTerminator());
  rewriter.mergeBlocks(op.getBody(), inner.getBody(), ivs);
  rewriter.eraseOp(op);
  return scf::parallelForToNestedFors(rewriter, inner);
}

struct SelectParallelLoopsPass
    : mtc::codegen::impl::SelectParallelLoopsPassBase<SelectParallelLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<scf::ParallelOp> loops;
    getOperation()->walk([&](scf::ParallelOp op) { loops.push_back(op); });
    if (llvm::any_of(loops, [](scf::ParallelOp op) { return op.getNumReductions() > 0; })) {
      // Reductions across threads would combine partial results in an order that depends
      // on the number of threads.
      getOperation()->emitError("scf.parallel with reductions is not run on threads");
      return signalPassFailure();
    }
    IRRewriter rewriter(&getContext());
    for (scf::ParallelOp op : loops) {
      bool outermost = !op->getParentOfType<LoopLikeOpInterface>();
      if (outermost && loopWork(op) >= minWork) {
        unsigned kept = 0;
        int64_t iterations = 1;
        while (kept < op.getNumLoops() && iterations < minParallel) {
          iterations = saturatingMul(
              iterations, tripCount(op.getLowerBound()[kept], op.getUpperBound()[kept],
                                    op.getStep()[kept])
                              .value_or(std::numeric_limits<int64_t>::max()));
          ++kept;
        }
        if (kept < op.getNumLoops() && failed(keepLeadingDimensions(rewriter, op, kept))) {
          op.emitOpError("cannot split the parallel dimensions of this loop");
          return signalPassFailure();
        }
        continue;
      }
      rewriter.setInsertionPoint(op);
      if (failed(scf::parallelForToNestedFors(rewriter, op))) {
        op.emitOpError("cannot turn this loop into sequential loops");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
